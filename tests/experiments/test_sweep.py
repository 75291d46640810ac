"""tokendist sweep: validation, determinism across Dask workers, rows = `run --json`, resume, failures,
report statistics, an external scheduler."""

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

pytest.importorskip("distributed")
pq = pytest.importorskip("pyarrow.parquet")

from tokendist.cli import main  # noqa: E402
from tokendist.errors import TokendistError  # noqa: E402
from tokendist.experiments.sweep import (Store, biggest_first, level_steps, load_sweep, run_sweep,  # noqa: E402
                                         sweep_from_dict)
from tokendist.experiments.sweep import _store  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"
# Tiny graphs, numpy kernels (no numba compilation in each fresh worker process), a deterministic and
# a randomised protocol, 3 seeds: 12 tasks.
SWEEP = """
[sweep]
name = "tiny"
graphs = ["torus:4x4", "ring:12"]
inits = ["random:0..20"]
algos = ["multi-port", "single-port"]
seeds = 3
max_steps = 200
levels = [4, 1]
[params.multi-port]
kernel = "numpy"
[params.single-port]
kernel = "numpy"
"""
WALL = {"seconds", "wall_seconds"}


def _rows(folder):
    return pq.read_table(Path(folder) / "runs.parquet").to_pylist()


def _without_wall(rows):
    return [{k: v for k, v in r.items() if k not in WALL} for r in rows]


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "tiny.toml"
    path.write_text(SWEEP)
    return path


@pytest.fixture(scope="module")
def two_worker_run(sweep_file, client2, tmp_path_factory):
    out = tmp_path_factory.mktemp("two")
    outcome = run_sweep(load_sweep(sweep_file), out, client=client2, traces=True)
    return out, outcome


# ------------------------------------------------------------------------------------------ validation

BAD = [
    ('algos = ["multi-port", "no-such-algo"]', "sweep.algos[1] = 'no-such-algo'"),
    ('graphs = ["torus:4x4", "torus:4xq"]', "sweep.graphs[1] = 'torus:4xq'"),
    ('inits = ["point:10@99"]', "sweep.inits[0] = 'point:10@99'"),
    ('seeds = -2', "sweep.seeds = -2"),
    ('levels = [1, "x"]', "sweep.levels = 'x'"),
    ('colour = "red"', "sweep.colour"),
]


def _bad_sweep(tmp_path, line=None, extra=""):
    lines = SWEEP.splitlines()
    if line is not None:
        key = line.split("=")[0].strip()
        lines = [ln for ln in lines if not ln.startswith(key + " ")]
        lines.insert(2, line)
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def _one_line_error(capsys, argv, needle):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert needle in err, err
    return err


@pytest.mark.parametrize("line, needle", BAD, ids=["algo", "graph", "init", "seeds", "levels", "key"])
def test_validation_error_is_one_line_exit_2(tmp_path, capsys, line, needle):
    _one_line_error(capsys, ["sweep", str(_bad_sweep(tmp_path, line)), "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o" / "runs.parquet").exists()


@pytest.mark.parametrize("extra, needle", [
    ('[params.single-port]\nprobability = "lots"\n', "params.single-port.probability = 'lots'"),
    ('[params.multi-port]\nspeed = 3\n', "params.multi-port.speed = 3: multi-port: unknown parameter 'speed'"),
    ('[params.sos]\nbeta = 1.5\n', "[params.sos]: 'sos' is not in sweep.algos"),
], ids=["bad-param-value", "unknown-param", "param-of-absent-algo"])
def test_bad_parameter_is_one_line_exit_2(tmp_path, capsys, extra, needle):
    text = SWEEP.split("[params.multi-port]")[0] + extra
    path = tmp_path / "bad.toml"
    path.write_text(text)
    _one_line_error(capsys, ["sweep", str(path), "--out", str(tmp_path / "o")], needle)


def test_cli_usage_errors(tmp_path, capsys, sweep_file):
    _one_line_error(capsys, ["sweep", str(sweep_file)], "--out DIR is required")
    _one_line_error(capsys, ["sweep", "report", str(tmp_path)], "no runs.parquet")
    _one_line_error(capsys, ["sweep", str(tmp_path / "missing.toml"), "--out", str(tmp_path)], "missing.toml: no such file")


def test_task_keys_are_stable_and_resolved():
    base = {"sweep": {"name": "a", "graphs": ["ring:6"], "inits": ["point:60"], "algos": ["sos"], "seeds": 2}}
    renamed = {"sweep": {**base["sweep"], "name": "b"}, "params": {"sos": {"beta": 0}}}  # beta=0 is the default
    a, b = sweep_from_dict(base), sweep_from_dict(renamed)
    assert [t.key for t in a.tasks] == [t.key for t in b.tasks]
    more = sweep_from_dict({"sweep": {**base["sweep"], "seeds": 3}})
    assert {t.key for t in a.tasks} < {t.key for t in more.tasks}
    axis = sweep_from_dict({**base, "params": {"sos": {"beta": [0, 1.5]}}})
    assert len(axis.tasks) == 4 and len({t.key for t in axis.tasks}) == 4
    with pytest.raises(TokendistError, match="same run twice"):
        sweep_from_dict({**base, "params": {"sos": {"beta": [0, 0.0]}}})


def test_the_example_sweep_is_valid():
    s = load_sweep(SRC.parent / "examples" / "sweeps" / "torus-scaling.toml")
    assert len(s.tasks) == len(s.graphs) * len(s.inits) * len(s.algos) * len(s.seeds)
    assert len({t.key for t in s.tasks}) == len(s.tasks)


# ------------------------------------------------------------------------------------------ steps to levels

@given(st.lists(st.integers(0, 12), min_size=1, max_size=30), st.sampled_from([0, 1, 2.5, 7]))
def test_level_steps_match_a_naive_scan(disc, level):
    steps = np.arange(len(disc))
    got = level_steps(steps, np.asarray(disc, dtype=float), [level])
    first = next((t for t, d in enumerate(disc) if d <= level), None)
    settled = next((t for t in range(len(disc)) if all(d <= level for d in disc[t:])), None)
    name = f"{float(level):g}"
    assert got[f"steps_to_{name}"] == first
    assert got[f"settled_{name}"] == settled


# ------------------------------------------------------------------------------------------ store

def test_store_writes_atomically_and_keeps_mixed_columns(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.add([{"key": "a", "param_threads": 1}, {"key": "b", "param_threads": "auto", "extra": 2.5}])
    assert _rows(tmp_path) == [{"key": "a", "param_threads": "1", "extra": None},
                               {"key": "b", "param_threads": "auto", "extra": 2.5}]

    def torn(table, where):
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(_store.pq, "write_table", torn)
    with pytest.raises(OSError):
        store.add([{"key": "c", "param_threads": 2}])
    assert [r["key"] for r in _rows(tmp_path)] == ["a", "b"]  # the previous file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.parquet"]  # no temporary file left


# ------------------------------------------------------------------------------------------ runs

def test_one_and_two_workers_give_identical_rows(sweep_file, client1, two_worker_run, tmp_path):
    out2, outcome2 = two_worker_run
    assert outcome2.ran == 12 and outcome2.already_done == 0
    out1 = tmp_path / "one"
    run_sweep(load_sweep(sweep_file), out1, client=client1)
    rows1, rows2 = _rows(out1), _rows(out2)
    assert len(rows1) == 12 and all(r["status"] == "ok" for r in rows1)
    assert _without_wall(rows1) == _without_wall(rows2)


def test_a_row_equals_run_json(capsys, two_worker_run):
    rows = _rows(two_worker_run[0])
    for r in (rows[3], rows[-1]):  # multi-port and single-port (randomised) rows
        code = main(["run", "--graph", r["graph"], "--init", r["init"], "--algo", r["algo"], "--param",
                     "kernel=numpy", "--seed", str(r["seed"]), "--max-steps", str(r["max_steps"]), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        d = json.loads(out)
        assert (r["graph"], r["n"], r["m"], r["heterogeneous"]) == (d["graph"]["spec"], d["graph"]["n"],
                                                                    d["graph"]["m"], d["graph"]["heterogeneous"])
        assert r["algo"] == d["algorithm"]
        assert json.loads(r["params"]) == d["params"]
        assert all(r[f"param_{k}"] == v for k, v in d["params"].items())
        for k in ("seed", "steps", "stop_reason", "cycle_length", "tokens", "tokens_moved", "messages",
                  "infeasible_steps"):
            assert r[k] == d[k], k
        for k, v in d["initial"].items():
            assert r[f"initial_{k}"] == v
        for k, v in d["final"].items():
            assert r[f"final_{k}"] == v
        assert json.loads(r["report"]) == d["report"]


def test_traces_match_rows(two_worker_run):
    out = two_worker_run[0]
    for r in _rows(out):
        trace = pq.read_table(out / "traces" / f"{r['key']}.parquet").to_pydict()
        assert set(trace["key"]) == {r["key"]}
        assert trace["step"][-1] == r["steps"]
        assert trace["discrepancy"][-1] == r["final_discrepancy"]
        hit = [s for s, d in zip(trace["step"], trace["discrepancy"]) if d <= 4]
        assert r["steps_to_4"] == (hit[0] if hit else None)


def test_resume_skips_finished_tasks_and_force_reruns(sweep_file, client2, two_worker_run, capsys, tmp_path):
    out = tmp_path / "resume"
    out.mkdir()
    shutil.copy(two_worker_run[0] / "runs.parquet", out / "runs.parquet")  # a finished sweep
    before = _rows(out)
    # Nothing left: the CLI says so without starting a cluster.
    assert main(["sweep", str(sweep_file), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "12 of 12 task(s) already in" in text and "every task is done" in text
    # One more seed: only its 4 tasks run, the old rows are kept as they were.
    grown = sweep_file.with_name("grown.toml")
    grown.write_text(SWEEP.replace("seeds = 3", "seeds = 4"))
    more = run_sweep(load_sweep(grown), out, client=client2)
    assert (more.already_done, more.ran) == (12, 4)
    after = _rows(out)
    assert len(after) == 16 and {r["seed"] for r in after} == {0, 1, 2, 3}
    assert _without_wall(after[:3] + after[4:7] + after[8:11] + after[12:15]) == _without_wall(before)
    # --force re-runs (here: the 4 tasks of seed 0) and replaces their rows, which come out the same.
    seed0 = sweep_file.with_name("seed0.toml")
    seed0.write_text(SWEEP.replace("seeds = 3", "seeds = [0]"))
    forced = run_sweep(load_sweep(seed0), out, client=client2, force=True)
    assert (forced.ran, forced.rerun, forced.already_done) == (4, 4, 0)
    by_key = {r["key"]: r for r in _without_wall(after)}
    assert {r["key"]: r for r in _without_wall(_rows(out))} == by_key


def test_interrupt_saves_finished_rows(sweep_file, client1, tmp_path):
    def progress(done, total, failures):
        if done == 2:
            raise KeyboardInterrupt

    out = tmp_path / "cut"
    outcome = run_sweep(load_sweep(sweep_file), out, client=client1, progress=progress)
    assert outcome.interrupted and outcome.ran == 2
    assert len(_rows(out)) == 2
    rest = run_sweep(load_sweep(sweep_file), out, client=client1)
    assert (rest.already_done, rest.ran) == (2, 10)


def test_failing_tasks_are_recorded_and_the_sweep_goes_on(client1, tmp_path):
    sweep = sweep_from_dict({
        "sweep": {"name": "fails", "graphs": ["torus:4x4"], "inits": ["point:1000"],
                  "algos": ["threshold1", "sos", "multi-port"], "seeds": 1, "max_steps": 50},
        "params": {"sos": {"kernel": "numpy", "beta": 1.5}, "multi-port": {"kernel": "numpy"},
                   "threshold1": {"spanning_tree": "none"}}})  # none: refuse a graph that is not a tree
    outcome = run_sweep(sweep, tmp_path, client=client1)
    assert outcome.failures == 2
    rows = {r["algo"]: r for r in _rows(tmp_path)}
    assert rows["threshold1"]["status"] == "skipped" and "runs on trees" in rows["threshold1"]["reason"]
    assert rows["sos"]["status"] == "infeasible" and rows["sos"]["reason"].startswith("infeasible step 1")
    assert "\n" not in rows["sos"]["reason"] and rows["sos"]["steps"] is None
    assert rows["multi-port"]["status"] == "ok" and rows["multi-port"]["tokens"] == 1000


# ------------------------------------------------------------------------------------------ report

def test_report_statistics_match_numpy_and_scipy(two_worker_run, capsys):
    out = two_worker_run[0]
    assert main(["sweep", "report", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = _rows(out)
    assert report["runs"] == 12 and len(report["summary"]) == 4
    checked = 0
    for g in report["summary"]:
        rs = [r for r in rows if (r["graph"], r["init"], r["variant"]) == (g["graph"], g["init"], g["variant"])]
        assert g["runs"] == len(rs) == 3
        for metric in ("steps_to_4", "steps_to_1", "settled_1", "final_discrepancy"):
            vals = np.array([r[metric] for r in rs if r[metric] is not None], dtype=float)
            d = g["metrics"][metric]
            assert d["count"] == vals.size
            if vals.size == 0:
                assert d["mean"] is None
                continue
            assert d["mean"] == pytest.approx(np.mean(vals)) and d["median"] == pytest.approx(np.median(vals))
            if vals.size >= 2 and np.std(vals) > 0:
                lo, hi = stats.t.interval(0.95, vals.size - 1, loc=np.mean(vals), scale=stats.sem(vals))
                assert (d["ci_low"], d["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
                checked += 1
    assert checked  # at least one interval of positive width was compared
    for w in report["wins"]:
        col = f"steps_to_{w['level']}"
        expected = {v: 0 for v in w["wins"]}
        seeds = 0
        for seed in {r["seed"] for r in rows}:
            rs = [r for r in rows if (r["graph"], r["init"], r["seed"]) == (w["graph"], w["init"], seed)
                  and r[col] is not None]
            if rs:
                seeds += 1
                best = min(r[col] for r in rs)
                for r in rs:
                    expected[r["variant"]] += r[col] == best
        assert (w["seeds"], w["wins"]) == (seeds, expected)
    for f in report["files"]:
        assert Path(f).stat().st_size > 0
    assert {Path(f).name for f in report["files"]} >= {"report.json", "summary.parquet", "scaling-1.png", "scaling-1.svg",
                                                   "final-discrepancy.png", "wins.svg"}


# ------------------------------------------------------------------------------------------ report figures
# Rows made here, not by a sweep: several graph families (long specs for the layout), two inits,
# levels some runs never reach, a failed run; no Dask cluster needed.

def _synthetic_rows(seed=5):
    rng = np.random.default_rng(seed)
    rows = []
    graphs = [("torus:4x4", 16), ("torus:8x8", 64), ("torus:16x16", 256), ("hypercube:4", 16), ("hypercube:8", 256),
              ("random-regular:64,4", 64)]
    for graph, n in graphs:
        for init in ("random:0..100", "ramp:0..100"):
            for algo, variant, rate in (("fos", "fos", 1.0), ("sos", "sos beta=1.5", 0.3), ("diffusion-random",
                                                                                             "diffusion-random", 3.0)):
                for seed_ in range(3):
                    row = {"key": f"{graph}/{init}/{variant}/{seed_}", "graph": graph, "n": n, "init": init,
                           "algo": algo, "variant": variant, "seed": seed_, "status": "ok", "reason": None}
                    base = rate * n ** 0.8 * rng.uniform(0.7, 1.3)
                    for lv, f in (("10", 1.0), ("1", 4.0)):
                        reached = not (variant == "diffusion-random" and lv == "1" and seed_ != 0)
                        row[f"steps_to_{lv}"] = int(base * f) + 1 if reached else None
                        row[f"settled_{lv}"] = int(base * f * 1.1) + 1 if reached else None
                    row["final_discrepancy"] = int(rng.integers(0, 5)) if variant == "diffusion-random" else 0
                    rows.append(row)
    failed = dict(rows[0], key="failed", seed=3, status="failed", reason="boom")
    for k in failed:
        if k.startswith(("steps_to_", "settled_", "final_")):
            failed[k] = None
    return rows + [failed]


@pytest.fixture(scope="module")
def synthetic_report():
    from tokendist.experiments.sweep import _report

    rows = _synthetic_rows()
    return rows, _report.summarize(rows), _report.wins(rows), _report._levels(rows)


def _figures(synthetic_report):
    from tokendist.experiments.sweep import _plots

    return dict(_plots.figures(*synthetic_report))


@given(st.lists(st.integers(0, 10_000), min_size=2, max_size=40))
def test_describe_interval_is_scipys_t_interval(values):
    from tokendist.experiments.sweep import describe

    d = describe(values)
    a = np.asarray(values, dtype=float)
    s = a.std(ddof=1)
    # The same float as scipy.stats.t.ppf (report.json does not change with the cheaper import) ...
    half = float(stats.t.ppf(0.975, a.size - 1)) * s / np.sqrt(a.size)
    assert (d["ci_low"], d["ci_high"]) == (a.mean() - half, a.mean() + half)
    # ... which is the 95% interval scipy gives.
    if s > 0:
        lo, hi = stats.t.interval(0.95, a.size - 1, loc=a.mean(), scale=stats.sem(a))
        assert (d["ci_low"], d["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))


@settings(max_examples=30, deadline=None)
@given(st.floats(-2, 6), st.floats(0.05, 4))
def test_log_axes_draw_matplotlibs_ticks_with_plain_labels(low, decades):
    """The report's log axes: matplotlib's default ticks in view, labelled on the same ticks, each label its number."""
    from matplotlib.figure import Figure

    from tokendist.experiments.sweep import _plots

    drawn = []
    for plain in (False, True):
        fig = Figure(figsize=(4, 3))
        ax = fig.subplots()
        ax.plot([10 ** low, 10 ** (low + decades)], [1, 2])
        ax.set_xscale("log")
        if plain:
            _plots._plain_log_ticks(ax)
        fig.draw_without_rendering()
        lo, hi = np.log10(sorted(ax.xaxis.get_view_interval()))
        ticks = ax.xaxis.get_major_ticks() + ax.xaxis.get_minor_ticks()
        drawn.append({round(float(t.get_loc()), 9): t.label1.get_text() for t in ticks
                      if lo - 1e-9 <= np.log10(t.get_loc()) <= hi + 1e-9})
    default, plain = drawn
    assert set(plain) == set(default)  # the same ticks ...
    assert {k for k, v in plain.items() if v} == {k for k, v in default.items() if v}  # ... labelled alike
    for loc, text in plain.items():
        assert "$" not in text and (not text or float(text) == pytest.approx(loc, rel=1e-5))


def test_report_figures_keep_their_content(synthetic_report):
    rows, summary, table, levels = synthetic_report
    figs = _figures(synthetic_report)
    assert list(figs) == [f"scaling-{lv}" for lv in levels] + ["final-discrepancy", "wins"]
    inits = list(dict.fromkeys(r["init"] for r in rows))
    families = sorted({g["graph"].split(":")[0] for g in summary})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for lv in levels:
        axes = figs[f"scaling-{lv}"].axes
        assert [ax.get_title() for ax in axes] == [f"init {i}" for i in inits]
        for ax in axes:
            labels = [t.get_text() for t in ax.get_legend().get_texts()]
            # One line per variant and family (each reaches L in some run), with the slope of
            # log(steps) on log(n) where the family has two sizes or more.
            sizes = {f: {g["n"] for g in summary if g["graph"].startswith(f + ":")} for f in families}
            assert sorted(lab.split(", slope ")[0] for lab in labels) == sorted(
                f"{v} ({f})" for v in variants for f in families)
            for lab in labels:
                fam = lab.split("(")[1].split(")")[0]
                assert (", slope " in lab) == (len(sizes[fam]) > 1), lab
            assert ax.get_xscale() == ax.get_yscale() == "log"
            assert len(ax.collections) == len(labels)  # one 95% band per line
    for ax in figs["final-discrepancy"].axes:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == variants
        assert [t.get_text() for t in ax.get_xticklabels()] == list(dict.fromkeys(r["graph"] for r in rows))
    wins_axes = figs["wins"].axes
    assert [ax.get_title() for ax in wins_axes] == [f"first to discrepancy <= {lv}" for lv in levels]
    for ax, lv in zip(wins_axes, levels):
        cells = [w for w in table if w["level"] == lv and w["seeds"]]
        assert len(ax.texts) == sum(len(w["wins"]) for w in cells)


def test_report_layout_once_is_the_layout_savefig_would_make(synthetic_report):
    """Laid out once for both files: the positions the engine gives when savefig runs it itself."""
    import io

    from tokendist.experiments.sweep import _plots

    once = _figures(synthetic_report)
    for stem, fig in _plots.figures(*synthetic_report):
        fig.savefig(io.BytesIO(), format="png", dpi=_plots.DPI)  # the engine on, as before
        _plots.lay_out(once[stem])
        for a, b in zip(once[stem].axes, fig.axes):
            assert a.get_position().bounds == b.get_position().bounds, stem
        assert once[stem].get_layout_engine() is None


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_report_text_is_inside_the_figure_and_panels_do_not_overlap(synthetic_report, fmt):
    """In both files: laid out once at the PNG's dpi, the SVG's (unhinted, 72 dpi) text must fit too."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.backends.backend_svg import RendererSVG

    from tokendist.experiments.sweep import _plots

    for stem, fig in _figures(synthetic_report).items():
        _plots.lay_out(fig)
        if fmt == "png":
            fig.set_dpi(_plots.DPI)  # as savefig does
            renderer = FigureCanvasAgg(fig).get_renderer()
        else:
            fig.set_dpi(72)  # as savefig does for an SVG
            renderer = RendererSVG(*(fig.get_size_inches() * 72), io.StringIO())
        fig.draw(renderer)
        frame = fig.bbox
        texts = []
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                lo, hi = sorted(axis.get_view_interval())
                texts += [t.label1 for t in axis.get_major_ticks() + axis.get_minor_ticks()
                          if lo <= t.get_loc() <= hi]  # the ticks drawn
            texts += [ax.xaxis.label, ax.yaxis.label, ax.title]
            texts += ax.get_legend().get_texts() if ax.get_legend() else []
        for t in texts:
            if t.get_visible() and t.get_text():
                box = t.get_window_extent(renderer)
                assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, (stem, t.get_text())
                assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, (stem, t.get_text())
        boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
        for i in range(len(boxes) - 1):
            assert boxes[i].x1 <= boxes[i + 1].x0 + 1, (stem, i)  # panels side by side, labels included


def test_report_without_plots_imports_no_matplotlib(tmp_path):
    """Statistics only: neither matplotlib nor scipy.stats (a second of imports between them)."""
    _store.write_table(_store.to_table(_synthetic_rows()), tmp_path / "runs.parquet")
    code = ("import sys; from tokendist.experiments.sweep import write_report; "
            f"r = write_report({str(tmp_path)!r}, plots=False); "
            "print(len(r.files), sorted(m for m in ('matplotlib', 'scipy.stats') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "[]"]


def test_report_needs_no_dask_and_a_sweep_without_it_is_a_one_line_error(tmp_path, sweep_file):
    """dask is imported by the runner only: ``sweep report`` works without it, ``sweep FILE`` says what is missing."""
    _store.write_table(_store.to_table(_synthetic_rows()), tmp_path / "runs.parquet")
    block = "import sys; sys.modules['distributed'] = None; from tokendist.cli import main; "
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    report = subprocess.run([sys.executable, "-c", block + f"sys.exit(main(['sweep', 'report', {str(tmp_path)!r}, "
                             "'--json']))"], capture_output=True, text=True, timeout=300, env=env)
    assert report.returncode == 0, report.stderr
    assert {Path(f).name for f in json.loads(report.stdout)["files"]} >= {"wins.png", "scaling-1.svg"}
    run = subprocess.run([sys.executable, "-c", block + f"sys.exit(main(['sweep', {str(sweep_file)!r}, '--out', "
                          f"{str(tmp_path / 'out')!r}]))"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "tokendist[sweep]" in run.stderr


# ------------------------------------------------------------------------------------------ external cluster

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def external_cluster():
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1, started and stopped here."""
    dask = Path(sys.executable).with_name("dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "NUMBA_NUM_THREADS": "1"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    procs = [subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], **quiet)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen([str(dask), "worker", address, "--nthreads", "1",
                                           "--no-nanny", "--host", "127.0.0.1", "--no-dashboard"], **quiet))
        from distributed import Client

        deadline = time.monotonic() + 90
        while True:
            try:
                with Client(address, timeout="5s") as c:
                    c.wait_for_workers(2, timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        # The workers run without a nanny, so killing them leaves no orphan; then the scheduler.
        for p in procs[1:]:
            p.kill()
        procs[0].terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_external_scheduler_gives_the_same_rows(sweep_file, two_worker_run, external_cluster, tmp_path):
    out = tmp_path / "ext"
    outcome = run_sweep(load_sweep(sweep_file), out, scheduler=external_cluster)
    assert (outcome.ran, outcome.failures) == (12, 0)
    assert _without_wall(_rows(out)) == _without_wall(_rows(two_worker_run[0]))


# ------------------------------------------------------------------------------------------ start and stop

def test_the_sweep_api_imports_dask_and_matplotlib_when_used():
    # The main process imports distributed after it has started the fork server, and the report's
    # matplotlib while the workers start (prepare_report); a worker needs neither to run a task.
    code = ("import sys, tokendist.cli, tokendist.experiments.sweep as s\n"
            "late = ('dask', 'distributed', 'matplotlib', 'tokendist.experiments.sweep._run')\n"
            "print([m for m in late if m in sys.modules])\n"
            "s.run_sweep\n"
            "print([m for m in late if m in sys.modules])\n"
            "s.prepare_report()\n"
            "print([m for m in late if m in sys.modules])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['tokendist.experiments.sweep._run']",
                                       "['matplotlib', 'tokendist.experiments.sweep._run']"]


def _worker_state():
    # Run in each worker (by reference: this module is importable there).
    import signal as _signal

    import numba

    return {"fork server": "tokendist.experiments.sweep._forkserver" in sys.modules,
            "sweep runner": "tokendist.experiments.sweep._run" in sys.modules,
            "numba threads": numba.config.NUMBA_NUM_THREADS,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "SIGINT ignored": _signal.getsignal(_signal.SIGINT) == _signal.SIG_IGN,
            "parent": os.getppid()}


def test_local_workers_are_forked_warm_from_the_fork_server(client2):
    states = list(client2.run(_worker_state).values())
    assert len(states) == 2
    for s in states:
        assert s["fork server"] and s["sweep runner"], s  # imported before the first task, once
        assert s["numba threads"] == 1 and s["OMP_NUM_THREADS"] == "1", s  # one core each
        assert s["SIGINT ignored"], s  # Ctrl-C is the sweep's own process's to handle
        assert s["parent"] != os.getpid()  # forked by the fork server, not spawned by this process
    assert states[0]["parent"] == states[1]["parent"]


def _group_gone(pgid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


LONG_SWEEP = SWEEP.replace('graphs = ["torus:4x4", "ring:12"]', 'graphs = ["torus:12x12"]').replace(
    "seeds = 3", "seeds = 300").replace("max_steps = 200", "max_steps = 3000")


@pytest.mark.slow
@pytest.mark.parametrize("when", ["starting", "running"])
def test_ctrl_c_in_a_terminal_exits_130_saves_rows_and_leaves_no_process(tmp_path, when):
    """Ctrl-C reaches the whole process group (the command, the fork server, the workers): one line
    on stderr, exit code 130, the finished rows saved, and every process gone."""
    path = tmp_path / "long.toml"
    path.write_text(LONG_SWEEP)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "tokendist.cli", "sweep", str(path), "--out", str(out),
                             "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        if when == "starting":
            time.sleep(2.0)  # the command is importing, or its workers are starting
        else:
            deadline = time.monotonic() + 120
            while not (out / "runs.parquet").exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert (out / "runs.parquet").exists(), "no rows saved within 2 minutes"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    if when == "running":
        saved = len(_rows(out))
        assert 0 < saved < 600
        assert stderr.startswith(f"interrupted: {saved} task(s) finished and saved"), stderr
    assert _group_gone(proc.pid, 20), "a process of the sweep outlived it"


def test_sweep_sizes_are_the_validated_graphs():
    s = load_sweep(SRC.parent / "examples" / "sweeps" / "torus-scaling.toml")
    assert s.sizes == {f"torus:{k}x{k}": (k * k, 2 * k * k) for k in (8, 16, 32)}


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "unknown"]), st.integers(0, 50)), max_size=30))
def test_biggest_first_orders_by_estimated_cost_and_keeps_ties_in_order(specs):
    sizes = {"a": (4, 4), "b": (16, 32), "c": (3, 5)}  # a and c cost alike per step
    tasks = [SimpleNamespace(graph=g, max_steps=s, i=i) for i, (g, s) in enumerate(specs)]
    got = biggest_first(tasks, sizes)
    assert sorted(t.i for t in got) == list(range(len(tasks)))  # every task, once
    cost = [sum(sizes.get(t.graph, (0, 0))) * t.max_steps for t in got]
    assert cost == sorted(cost, reverse=True)
    for x, y in zip(got, got[1:]):
        if sum(sizes.get(x.graph, (0, 0))) * x.max_steps == sum(sizes.get(y.graph, (0, 0))) * y.max_steps:
            assert x.i < y.i  # ties in the sweep's order


def test_while_starting_is_called_once_before_the_tasks(sweep_file, client1, tmp_path):
    calls = []

    def progress(done, total, failures):
        calls.append(("progress", done))

    outcome = run_sweep(load_sweep(sweep_file), tmp_path, client=client1, progress=progress,
                        while_starting=lambda: calls.append(("while_starting", None)))
    assert outcome.ran == 12
    assert [c for c in calls if c[0] == "while_starting"] == [("while_starting", None)]
    first_done = calls.index(("progress", 1))
    assert calls.index(("while_starting", None)) < first_done  # before the first finished task


def test_ctrl_c_inside_a_write_counts_the_rows_written(sweep_file, client1, tmp_path, monkeypatch):
    # Ctrl-C right after a batch is written, before it is counted: the outcome still says what the
    # file holds (the interrupted command's message tells how many rows it saved).
    add, hits = _store.Store.add, []

    def add_then_interrupt(self, rows, order=None):
        add(self, rows, order)
        if rows and not hits:
            hits.append(len(rows))
            raise KeyboardInterrupt

    monkeypatch.setattr(_store.Store, "add", add_then_interrupt)
    outcome = run_sweep(load_sweep(sweep_file), tmp_path, client=client1, batch_seconds=0)
    assert outcome.interrupted and hits
    assert outcome.ran == len(_rows(tmp_path)) >= hits[0]


def _interrupted_sync(loop, monkeypatch):
    """distributed's ``sync`` on ``loop``, interrupted by Ctrl-C in its first wait before the
    coroutine it runs has started, then a plain ``sync`` so that the loop has run the callbacks
    the interrupt scheduled. The loop is held meanwhile, so the order is certain: sync's coroutine,
    up to its first yield, then the ``cancel`` the interrupt scheduled (callbacks run in order)."""
    import asyncio
    import threading
    import types

    import distributed.utils as du

    class InterruptedEvent(threading.Event):
        def wait(self, timeout=None):
            raise KeyboardInterrupt

    # Only sync's own look-up of threading.Event sees the interrupting event.
    patched = types.SimpleNamespace(**{k: getattr(threading, k) for k in dir(threading) if not k.startswith("__")})
    patched.Event = InterruptedEvent
    gate = threading.Event()
    loop.add_callback(gate.wait, 10)
    try:
        with monkeypatch.context() as m:
            m.setattr(du, "threading", patched)
            with pytest.raises(KeyboardInterrupt):
                du.sync(loop, asyncio.sleep, 0)
    finally:
        gate.set()
    du.sync(loop, asyncio.sleep, 0.05)


def test_an_interrupted_wait_leaves_no_traceback_under_the_one_line(client1, monkeypatch, caplog):
    """Ctrl-C while distributed's ``sync`` waits, before its coroutine has started: distributed's
    ``cancel`` callback then raises NameError on the client's loop, which tornado logs with a
    traceback (the stderr of the Ctrl-C test, now and then). ``open_client`` drops that record,
    and only that one."""
    from tokendist.experiments.sweep._run import InterruptedSyncFilter

    loop_log = logging.getLogger("tornado.application")
    ours = [f for f in loop_log.filters if isinstance(f, InterruptedSyncFilter)]
    assert ours  # installed by open_client for its client's lifetime (one per client open)

    def name_errors():
        return [r for r in caplog.records if r.name == "tornado.application" and r.exc_info
                and isinstance(r.exc_info[1], NameError)]

    with caplog.at_level(logging.ERROR, logger="tornado.application"):
        for f in ours:
            loop_log.removeFilter(f)
        try:
            _interrupted_sync(client1.loop, monkeypatch)
        finally:
            for f in ours:
                loop_log.addFilter(f)
        unfiltered = name_errors()
        if not unfiltered:
            pytest.skip("this distributed's sync no longer logs a NameError when interrupted")
        assert "sync.<locals>.cancel" in unfiltered[0].getMessage()
        caplog.clear()
        _interrupted_sync(client1.loop, monkeypatch)
        assert name_errors() == []
        # Any other record of the loop's still gets through.
        loop_log.error("Exception in callback other", exc_info=(NameError, NameError("x"), None))
        assert len(name_errors()) == 1
