"""Random-waypoint mobility in the unit square: the mobile ad-hoc setting of Elsässer et al., Sec. 4.2.

The n nodes of the run's graph are placed uniformly at random in the unit square (its edges are not
used). Before each load-balancing step the step's graph is the *disc graph*: nodes i and j are
adjacent when their distance is at most ``radius``. After the step every node moves toward its
waypoint by its current speed; a node that reaches its waypoint stays there for ``pause`` steps and
then moves toward a new uniformly random waypoint with a new speed drawn uniformly from the speed
range (random waypoint, Johnson and Maltz [19]). With ``wrap`` (the paper's setting) the square has
wrap-around borders: distances and the direction of movement are those of the torus, and a node
leaving on one side reappears on the other.

Everything is vectorised over nodes; the disc graph comes from ``scipy.spatial.cKDTree``
(``boxsize=1`` for the periodic square). All randomness comes from the generator given to ``reset``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import TokendistError
from ..graphs import Graph
from ..graphs._specs import check_size
from ._dynamics import Dynamics, register_dynamics

__all__ = ["RandomWaypoint", "disc_graph"]

#: The longest pause accepted (steps); the pause counters are int64.
MAX_PAUSE = 10**9
#: Time to build a disc graph, per edge (cKDTree pairs, sort, CSR): torus:100x100 with a radius
#: covering the square, 50M edges, took 60 s on this machine.
DISC_SECONDS_PER_EDGE = 1.2e-6
#: The longest disc-graph rebuild a step may need before the run is refused.
MAX_STEP_SECONDS = 30


def disc_graph(positions: np.ndarray, radius: float, *, wrap: bool, spec: str = "", speeds=None) -> Graph:
    """The disc graph of ``positions`` (n x 2 in [0, 1)): an edge where the distance is <= ``radius``."""
    from scipy.spatial import cKDTree

    n = positions.shape[0]
    tree = cKDTree(positions, boxsize=1.0 if wrap else None)
    pairs = tree.query_pairs(radius, output_type="ndarray")
    if pairs.size:
        a, b = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
    else:
        a = b = np.zeros(0, dtype=np.int64)
    return Graph(n, a, b, spec=spec, speeds=speeds, positions=positions)


def _parse_range(key: str, text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition("..")
    try:
        lo_v = float(lo)
        hi_v = float(hi) if sep else lo_v
    except ValueError:
        raise TokendistError(f"--mobility {key}= expects a number or A..B, got {text!r}") from None
    if not (math.isfinite(lo_v) and math.isfinite(hi_v) and 0 <= lo_v <= hi_v):
        raise TokendistError(f"--mobility {key}= needs finite numbers 0 <= A <= B, got {text!r}")
    return lo_v, hi_v


@register_dynamics
class RandomWaypoint(Dynamics):
    """Random-waypoint mobility of the nodes in the unit square with a disc graph (Sec. 4.2).

    Parameters
    ----------
    radius : float
        Communication radius of the disc graph (the paper: 0.1).
    speed : (float, float)
        Range of node speeds per step (the paper: 0.001..0.005, and ten times that).
    pause : int
        Steps a node waits at a reached waypoint (the paper: 3).
    wrap : bool
        Wrap-around borders (the paper: yes).

    Notes
    -----
    ``graph_at(t)`` must be called once per step, in order: it returns the disc graph of the current
    positions, then moves the nodes ("after executing one load balancing step, all nodes move").

    Examples
    --------
    >>> import numpy as np
    >>> from tokendist.graphs import make_graph
    >>> d = RandomWaypoint.from_options({"radius": "0.3", "speed": "0.01..0.02"})
    >>> d.reset(make_graph("ring:20"), np.random.default_rng(1))
    >>> g = d.graph_at(0); g.n
    20
    """

    name = "random-waypoint"
    OPTIONS = ("radius", "speed", "pause", "wrap")

    def __init__(self, radius: float = 0.1, speed=(0.001, 0.005), pause: int = 3, wrap: bool = True):
        lo, hi = (float(speed), float(speed)) if np.isscalar(speed) else (float(speed[0]), float(speed[1]))
        if not (0 < radius and math.isfinite(radius)):
            raise TokendistError(f"mobility radius must be a finite positive number, got {radius}")
        if wrap and radius >= 0.5:
            raise TokendistError("mobility radius must be < 0.5 with wrap-around borders")
        if not (math.isfinite(hi) and 0 <= lo <= hi):
            raise TokendistError(f"mobility speeds need finite 0 <= low <= high, got {lo}..{hi}")
        if isinstance(pause, bool) or int(pause) != pause or not 0 <= pause <= MAX_PAUSE:
            raise TokendistError(f"mobility pause must be an integer from 0 to {MAX_PAUSE:,}, got {pause}")
        self.radius, self.speed, self.pause, self.wrap = float(radius), (lo, hi), int(pause), bool(wrap)

    @classmethod
    def from_options(cls, options: dict) -> "RandomWaypoint":
        """Build from strings, e.g. ``{"radius": "0.1", "speed": "0.001..0.005", "pause": "3", "wrap": "true"}``."""
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise TokendistError(f"--mobility: unknown key {unknown[0]!r} (keys: {', '.join(cls.OPTIONS)})")
        for key, value in options.items():
            if not value.isascii() or "_" in value:  # float() and int() also read non-ASCII digits, '0_1' as 1
                raise TokendistError(f"--mobility {key}= expects ASCII digits, got {value!r}")
        kw = {}
        if "radius" in options:
            try:
                kw["radius"] = float(options["radius"])
            except ValueError:
                raise TokendistError(f"--mobility radius= expects a number, got {options['radius']!r}") from None
        if "speed" in options:
            kw["speed"] = _parse_range("speed", options["speed"])
        if "pause" in options:
            try:
                if not options["pause"].strip().isascii():
                    raise ValueError(options["pause"])
                kw["pause"] = int(options["pause"])
            except ValueError:
                raise TokendistError(f"--mobility pause= expects an integer, got {options['pause']!r}") from None
        if "wrap" in options:
            low = options["wrap"].strip().lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise TokendistError(f"--mobility wrap= expects true or false, got {options['wrap']!r}")
            kw["wrap"] = low in ("true", "1", "yes")
        return cls(**kw)

    def expected_edges(self, n: int) -> int:
        """The expected number of edges of a disc graph of ``n`` uniform nodes (an upper bound without
        wrap-around, where discs are cut by the border): ``n (n - 1) / 2 * min(1, pi r^2)``."""
        return int(n * (n - 1) / 2 * min(1.0, math.pi * self.radius ** 2))

    def reset(self, graph, rng):
        n = graph.n
        # Every step rebuilds the disc graph: refuse one that would not fit in memory, or whose
        # rebuild alone would take more than MAX_STEP_SECONDS (torus:100x100 with radius=10 took 60 s
        # and 4.8 GB a step), before the first allocation, in one line with the estimate.
        m = self.expected_edges(n)
        spec = f"--mobility radius={self.radius:g} on {n:,} nodes"
        check_size(spec, n, m)
        seconds = m * DISC_SECONDS_PER_EDGE
        if seconds > MAX_STEP_SECONDS:
            raise TokendistError(f"{spec}: each step's disc graph has about {m:,} edges, about {seconds:.0f} s to "
                                 f"build every step (limit {MAX_STEP_SECONDS} s); use a smaller radius")
        super().reset(graph, rng)
        self.positions = rng.random((n, 2))
        self.waypoints = rng.random((n, 2))
        self.velocity = rng.uniform(self.speed[0], self.speed[1], size=n)
        self.pausing = np.zeros(n, dtype=np.int64)
        self.steps = 0

    def _displacement(self, target):
        d = target - self.positions
        if self.wrap:
            d = (d + 0.5) % 1.0 - 0.5
        return d

    def advance(self) -> None:
        """Move every node one step (pausing nodes wait; arrived nodes start their pause)."""
        n = self.positions.shape[0]
        waiting = self.pausing > 0
        self.pausing[waiting] -= 1
        renew = waiting & (self.pausing == 0)
        k = int(renew.sum())
        if k:
            self.waypoints[renew] = self.rng.random((k, 2))
            self.velocity[renew] = self.rng.uniform(self.speed[0], self.speed[1], size=k)
        moving = ~waiting
        d = self._displacement(self.waypoints)
        dist = np.sqrt((d * d).sum(axis=1))
        arrive = moving & (dist <= self.velocity)
        go = moving & ~arrive
        step = np.zeros((n, 2))
        step[go] = d[go] * (self.velocity[go] / dist[go])[:, None]
        step[arrive] = d[arrive]
        pos = self.positions + step
        if self.wrap:
            pos %= 1.0
            pos[pos >= 1.0] = 0.0  # (-tiny) % 1.0 can round to 1.0
        else:
            pos = np.clip(pos, 0.0, 1.0)
        self.positions = pos
        self.pausing[arrive] = self.pause
        if self.pause == 0:
            k = int(arrive.sum())
            if k:
                self.waypoints[arrive] = self.rng.random((k, 2))
                self.velocity[arrive] = self.rng.uniform(self.speed[0], self.speed[1], size=k)

    def graph_at(self, t):
        g = disc_graph(self.positions, self.radius, wrap=self.wrap, spec=f"random-waypoint@{t}",
                       speeds=self.base.speeds)
        self.advance()
        self.steps += 1
        return g

    def describe(self):
        return {"name": self.name, "radius": self.radius, "speed": list(self.speed), "pause": self.pause,
                "wrap": self.wrap}
