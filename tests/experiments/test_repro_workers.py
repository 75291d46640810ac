"""tokendist reproduce --workers/--scheduler: the independent runs of a reproduction on Dask give the
same tables, claims and data as the sequential run; bad options are one-line errors (exit 2); the
measured wall times are stored with the entries."""

import json
import time

import pytest

pytest.importorskip("distributed")

from tokendist.cli import main  # noqa: E402
from tokendist.cli._reproduce import duration  # noqa: E402
from tokendist.experiments import REPRODUCTIONS, ReproContext, run_reproduction  # noqa: E402
from tokendist.experiments import _modules  # noqa: E402,F401
from tokendist.experiments._repro_times import WALL_SECONDS  # noqa: E402


def _slow_square(x):
    # Module-level, so that workers receive it by reference; the later items finish first.
    time.sleep(0.02 * (5 - x))
    return x * x


@pytest.fixture(scope="module")
def sequential():
    """The quick reproductions that hand their runs to ReproContext.map, run here one by one."""
    return {name: run_reproduction(name, ReproContext(quick=True)).to_json()
            for name in ("ghosh-scaling", "elsasser-fig4")}


def test_map_keeps_input_order_and_reports_every_result(client2):
    for client in (None, client2):
        seen = []
        ctx = ReproContext(client=client, progress=lambda done, total: seen.append((done, total)))
        assert ctx.map(_slow_square, range(5)) == [0, 1, 4, 9, 16]
        assert seen == [(k, 5) for k in range(1, 6)]


@pytest.mark.parametrize("name", ["ghosh-scaling", "elsasser-fig4"])
def test_two_workers_give_the_sequential_reproduction(name, client2, sequential):
    got = run_reproduction(name, ReproContext(quick=True, client=client2)).to_json()
    assert got == sequential[name]
    assert got["tables"][0]["rows"]  # a real table was compared, not two empty ones


def test_one_worker_gives_the_sequential_reproduction(client1, sequential):
    got = run_reproduction("ghosh-scaling", ReproContext(quick=True, client=client1)).to_json()
    assert got == sequential["ghosh-scaling"]


def test_cli_on_a_scheduler_address_prints_the_sequential_json(capsys, client2, sequential):
    # --scheduler ADDRESS: here the address of the two-worker cluster above.
    assert main(["reproduce", "ghosh-scaling", "--quick", "--json", "--scheduler", client2.scheduler.address]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(sequential["ghosh-scaling"]))


@pytest.mark.parametrize("argv, needle", [
    (["--workers", "0"], "--workers"),
    (["--workers", "two"], "--workers"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "not both"),
    (["--scheduler", "tcp://127.0.0.1:1"], "cannot reach the dask scheduler at tcp://127.0.0.1:1"),
], ids=["zero", "not-a-number", "both", "unreachable"])
def test_bad_workers_or_scheduler_is_one_line_exit_2(capsys, argv, needle):
    code = main(["reproduce", "houle-sg1", "--quick", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert needle in err, err


def test_list_shows_the_stored_wall_times(capsys):
    assert main(["reproduce", "list", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == REPRODUCTIONS.names()
    assert set(WALL_SECONDS) <= set(REPRODUCTIONS.names())  # no figure for an entry that does not exist
    for e in entries:
        assert (e["seconds"], e["quick_seconds"]) == WALL_SECONDS.get(e["name"], (None, None))
        assert all(x is None or x > 0 for x in (e["seconds"], e["quick_seconds"])), e
    assert main(["reproduce", "list", "--wide"]) == 0
    shown = capsys.readouterr().out
    for e in entries:
        assert duration(e["seconds"]) in shown


def test_duration_reads_as_a_person_would_say_it():
    got = [duration(x) for x in (None, 0.4, 89.6, 90, 599, 1620)]
    assert got == ["-", "0 s", "90 s", "1.5 min", "10 min", "27 min"]
