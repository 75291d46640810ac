"""Random-waypoint mobility (Elsässer et al. 2006, Sec. 4.2): square, speeds, pauses, disc graph."""

import numpy as np
import pytest

from tokendist import TokendistError, make_graph, simulate
from tokendist.engine import DYNAMICS, RandomWaypoint


def _wrapped(d):
    return (d + 0.5) % 1.0 - 0.5


def naive_disc_edges(pos, r, wrap):
    out = set()
    n = len(pos)
    for i in range(n):
        for j in range(i + 1, n):
            d = pos[i] - pos[j]
            if wrap:
                d = _wrapped(d)
            if np.hypot(*d) <= r:
                out.add((i, j))
    return out


def _run(d, n=60, steps=120, seed=1):
    d.reset(make_graph(f"ring:{n}"), np.random.default_rng(seed))
    graphs, positions, pausing, waypoints = [], [d.positions.copy()], [d.pausing.copy()], [d.waypoints.copy()]
    for t in range(steps):
        graphs.append(d.graph_at(t))
        positions.append(d.positions.copy())
        pausing.append(d.pausing.copy())
        waypoints.append(d.waypoints.copy())
    return graphs, np.array(positions), np.array(pausing), np.array(waypoints)


@pytest.mark.parametrize("wrap", [True, False])
def test_positions_stay_in_unit_square_and_graph_is_disc_graph(wrap):
    d = RandomWaypoint(radius=0.2, speed=(0.02, 0.08), pause=3, wrap=wrap)
    graphs, pos, _, _ = _run(d, n=40, steps=60)
    assert pos.min() >= 0.0 and pos.max() < 1.0 if wrap else pos.max() <= 1.0
    for t in (0, 17, 59):
        got = set(zip(graphs[t].u.tolist(), graphs[t].v.tolist()))
        assert got == naive_disc_edges(pos[t], 0.2, wrap)
        np.testing.assert_array_equal(graphs[t].positions, pos[t])


def test_speeds_within_range_and_pause_respected():
    lo, hi, pause = 0.01, 0.03, 3
    d = RandomWaypoint(radius=0.1, speed=(lo, hi), pause=pause, wrap=True)
    _, pos, pausing, wp = _run(d, n=50, steps=300)
    step = np.hypot(*_wrapped(pos[1:] - pos[:-1]).transpose(2, 0, 1))
    arrived = np.hypot(*_wrapped(pos[1:] - wp[:-1]).transpose(2, 0, 1)) < 1e-12
    moving = (pausing[:-1] == 0) & ~arrived
    assert np.all(step[moving] >= lo - 1e-12) and np.all(step[moving] <= hi + 1e-12)
    assert np.all(step <= hi + 1e-12)
    # After each arrival the node stays put for exactly `pause` steps, then moves again.
    arrivals = np.argwhere((pausing[1:] == pause) & (pausing[:-1] != pause))
    assert len(arrivals) > 10
    for t, i in arrivals:
        t = t + 1  # index into pos of the arrival position
        if t + pause + 1 < len(pos):
            assert np.all(step[t:t + pause, i] == 0)
            assert step[t + pause, i] > 0


def test_from_options_and_errors():
    d = DYNAMICS.get("random-waypoint").from_options({"radius": "0.1", "speed": "0.001..0.005", "pause": "3",
                                                      "wrap": "true"})
    assert (d.radius, d.speed, d.pause, d.wrap) == (0.1, (0.001, 0.005), 3, True)
    assert RandomWaypoint.from_options({"speed": "0.01"}).speed == (0.01, 0.01)
    for bad in ({"radius": "x"}, {"speed": "5..1"}, {"pause": "-1"}, {"wrap": "maybe"}, {"colour": "red"},
                {"radius": "0.7"}):
        with pytest.raises(TokendistError):
            RandomWaypoint.from_options(bad)


def test_seeded_and_used_by_simulate():
    kw = dict(seed=5, max_steps=40, speeds="uniform:0.8..1.2")
    a = simulate("ring:64", "fos-floor", "point:4096", dynamics=RandomWaypoint(radius=0.15, speed=(0.01, 0.05)), **kw)
    b = simulate("ring:64", "fos-floor", "point:4096", dynamics=RandomWaypoint(radius=0.15, speed=(0.01, 0.05)), **kw)
    np.testing.assert_array_equal(a.loads, b.loads)
    assert a.tokens == 4096 and a.dynamics["name"] == "random-waypoint"
