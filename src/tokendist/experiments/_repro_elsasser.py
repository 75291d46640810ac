"""Reproductions of Elsässer, Monien, Schamberger (2006), Section 4: Figures 1 to 5.

Figures 1-3 (Sec. 4.1): TORUS(16x16), RAMAN-Q(3,17) (``lps-quotient:3,17``, 306 nodes) and HYP(8);
``|V|^2`` tokens on node 0, every edge fails with probability 0.1 in every step, node speeds uniform
in 0.8..1.2. Figures 4-5 (Sec. 4.2): 256 mobile nodes, random waypoint in the unit square with
wrap-around, radius 0.1, node movement 0.001..0.005 per step (slow) and ten times that (fast),
pause 3, averaged over 25 runs. Each figure plots the maximal weighted load and the l2 error over
the steps for integer FOS (``fos(int)``, ``fos-floor``), real FOS (``fos(real)``), and the
randomized algorithm (``rnd(int)``) with its real-valued estimate (``rnd(real)``).

Choices the paper leaves open, with the defaults used (see docs/protocols/heterogeneous.md):
``c = 2`` (``c in (1, 2]``), speeds used as given in M (``speed_scale=raw``), the switch when the
estimate is within ``1/n^2`` of the ideal loads (max norm), speeds 0.8..1.2 and ``|V|^2`` tokens on
one node also in the mobile setting. The entry ``elsasser-choices`` shows how the curves depend on
c and on the switch rule.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..engine import EdgeFailures, simulate
from ..engine._mobility import RandomWaypoint
from ..graphs import make_graph
from ._reproduce import Claim, ReproContext, Reproduction, Table, reproduction

__all__ = ["static_figure", "mobile_figure"]

PAPER = "Elsässer, Monien, Schamberger 2006, Sec. 4"
SPEEDS = "uniform:0.8..1.2"
FAIL = 0.1


def _curves(runs: dict) -> dict:
    """The four curves of a figure from the runs of fos-floor, fos and random-walk."""
    out = {}
    for key, algo in (("fos(int)", "fos-floor"), ("fos(real)", "fos"), ("rnd(int)", "random-walk")):
        r = runs[algo]
        out[key] = {"step": r.trace["step"], "max_weighted_load": r.trace["max_weighted_load"],
                    "l2_error": r.trace["l2_error"]}
    rw = runs["random-walk"]
    series = rw.report["series"]
    steps = np.arange(len(series["estimate_l2_error"]) + 1)
    out["rnd(real)"] = {
        "step": steps,
        "max_weighted_load": np.concatenate([[rw.initial["max_weighted_load"]], series["estimate_max_weighted_load"]]),
        "l2_error": np.concatenate([[rw.initial["l2_error"]], series["estimate_l2_error"]]),
    }
    return out


def _plot(curves: dict, path, title: str, switch=None, ideal_max=None):
    if path is None:
        return None
    from ..plotting._traces import new_figure
    import matplotlib.pyplot as plt

    fig, axes = new_figure(2)
    styles = {"fos(int)": ("tab:blue", "-"), "fos(real)": ("tab:blue", ":"), "rnd(int)": ("tab:red", "-"),
              "rnd(real)": ("tab:red", ":")}
    for key, c in curves.items():
        colour, ls = styles[key]
        for ax, metric in zip(axes, ("max_weighted_load", "l2_error")):
            y = np.asarray(c[metric], dtype=float)
            ax.plot(c["step"], np.where(y > 0, y, np.nan), color=colour, ls=ls, lw=1.3, label=f"{key}")
    for ax, metric in zip(axes, ("maximal weighted load", "l2 error")):
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        if switch is not None:
            ax.axvline(switch, color="grey", lw=0.8, ls="--")
    if ideal_max is not None:
        axes[0].axhline(ideal_max, color="black", lw=0.6, ls="-.", label="ideal W/n")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def _static_runs(spec: str, steps: int, seed: int, params: dict | None = None, algos=("fos-floor", "fos", "random-walk")):
    graph = make_graph(spec, seed=seed)
    tokens = graph.n ** 2
    runs = {}
    for algo in algos:
        p = dict(params or {}) if algo == "random-walk" else {k: v for k, v in (params or {}).items()
                                                              if k in ("c", "speed_scale")}
        runs[algo] = simulate(graph, algo, f"point:{tokens}", seed=seed, max_steps=steps, speeds=SPEEDS,
                              dynamics=EdgeFailures(FAIL), params=p)
    return graph, runs


def _summary_rows(curves: dict) -> list:
    rows = []
    for key, c in curves.items():
        mwl, l2 = np.asarray(c["max_weighted_load"]), np.asarray(c["l2_error"])
        rows.append([key, round(float(mwl[-1]), 3), round(float(mwl.min()), 3), float(f"{l2[-1]:.4g}"),
                     float(f"{l2.min():.4g}")])
    return rows


def static_figure(ctx: ReproContext, number: int, spec: str, quick_spec: str, label: str, steps: int,
                  quick_steps: int) -> Reproduction:
    """One of Figures 1-3: edge failures 0.1, speeds 0.8..1.2, |V|^2 tokens on one node."""
    spec_used = quick_spec if ctx.quick else spec
    steps = quick_steps if ctx.quick else steps
    graph, runs = _static_runs(spec_used, steps, ctx.seed)
    n = graph.n
    curves = _curves(runs)
    rw = runs["random-walk"].report
    fos_int, rnd = runs["fos-floor"], runs["random-walk"]
    rep = Reproduction(f"elsasser-fig{number}", f"Figure {number}: balancing tokens on {label}", PAPER)
    rep.tables.append(Table(f"{label} as {spec_used} (n={n}, {n * n} tokens, p_fail={FAIL}, speeds 0.8..1.2, "
                            f"seed {ctx.seed}, {steps} steps)",
                            ["curve", "final max weighted load", "min max weighted load", "final l2 error",
                             "min l2 error"], _summary_rows(curves)))
    # A quick run says what it ran, not the paper's network (its title once read TORUS(16x16) over 8x8).
    shown = f"{spec_used} (quick; the paper: {label})" if ctx.quick else f"{label} ({spec_used})"
    path = _plot(curves, ctx.figure_path(f"elsasser_fig{number}.png"),
                 f"Fig. {number}: {shown}, edge failure {FAIL}", rw["switch_step"], float(n))
    if path:
        rep.figures.append(path)
    fos_floor_best = float(np.min(fos_int.trace["max_weighted_load"]))
    final_rnd = float(rnd.final["max_weighted_load"])
    rep.claims.append(Claim(
        "integer FOS stagnates at an l2 error level while real FOS converges steadily (Sec. 4.1)",
        bool(fos_int.final["l2_error"] > 1.0 and runs["fos"].final["l2_error"] < 1e-3),
        f"fos(int) final l2 error {fos_int.final['l2_error']:.4g} (minimum over the run "
        f"{np.min(fos_int.trace['l2_error']):.4g}); fos(real) final {runs['fos'].final['l2_error']:.3g}"))
    rep.claims.append(Claim(
        "the randomized algorithm reaches a smaller maximal weighted load than FOS can ever achieve",
        bool(rw["phase"] == 3 and final_rnd < fos_floor_best),
        f"rnd(int) final {final_rnd:.3f} vs fos(int) best over the run {fos_floor_best:.3f} (ideal {n})"))
    speeds = rnd.graph.speeds
    sbar = speeds * n / speeds.sum()
    ideal = n * n * speeds / speeds.sum()
    overload = float(((rnd.loads - ideal) / sbar).max())
    rep.claims.append(Claim(
        "Theorem 2: the weighted max load ends at wbar_i/sbar_i + O(1) (here: every node at most at its target "
        "ceil(wbar_i) + ceil(2 sbar_i))",
        bool(rw["phase"] == 3 and overload <= float(((np.ceil(ideal) + np.ceil(2 * sbar) - ideal) / sbar).max()) + 1e-9),
        f"max_i (w_i - wbar_i)/sbar_i = {overload:.3f}; phase 2 done at step {rw['done_step']}"))
    est_at_end = curves["rnd(real)"]["l2_error"][-1]
    rep.claims.append(Claim(
        "'the error of the unit-size token distribution (rnd(int)) cannot exceed the one of the approximated "
        "solution (rnd(real))', read literally",
        bool(rnd.final["l2_error"] <= est_at_end),
        f"rnd(int) final l2 error {rnd.final['l2_error']:.4g}, rnd(real) {est_at_end:.3g}; the integer error cannot "
        "fall below the rounding floor, so the sentence likely means 'cannot fall below'"))
    rep.notes.append(f"switch to random walk at iteration {rw['switch_step']} (rule {rw['switch_rule']}, tolerance "
                     f"{rw['switch_tol']:.3g} = 1/n^2); phase 2 ended at iteration {rw['done_step']}; "
                     f"{rw['initial_marked']} marked and {rw['initial_negative']} negative tokens at the switch, "
                     f"{rw['overdraw_events']} overdraw events")
    rep.notes.append(f"fos(int) l2 error stagnates at about {np.median(fos_int.trace['l2_error'][-max(10, steps // 10):]):.4g} "
                     "(median over the last tenth of the run)")
    rep.data = {"graph": spec_used, "n": n, "switch_step": rw["switch_step"], "done_step": rw["done_step"],
                "initial_marked": rw["initial_marked"], "initial_negative": rw["initial_negative"],
                "marked_series": rw["series"]["marked"][::max(1, steps // 500)],
                "negative_series": rw["series"]["negative"][::max(1, steps // 500)],
                "fos_int_final_l2_error": fos_int.final["l2_error"],
                "fos_int_final_max_weighted_load": fos_int.final["max_weighted_load"],
                "rnd_final_max_weighted_load": final_rnd, "rnd_final_l2_error": rnd.final["l2_error"]}
    return rep


@reproduction("elsasser-fig1", "Figure 1: tokens on the 16x16 torus (edge failures, speeds 0.8..1.2)", PAPER)
def figure1(ctx: ReproContext) -> Reproduction:
    return static_figure(ctx, 1, "torus:16x16", "torus:8x8", "TORUS(16x16)", 2500, 700)


@reproduction("elsasser-fig2", "Figure 2: tokens on the Ramanujan graph RAMAN-Q(3,17)", PAPER)
def figure2(ctx: ReproContext) -> Reproduction:
    return static_figure(ctx, 2, "lps-quotient:3,17", "lps-quotient:3,5", "RAMAN-Q(3,17)", 800, 300)


@reproduction("elsasser-fig3", "Figure 3: tokens on the hypercube HYP(8)", PAPER)
def figure3(ctx: ReproContext) -> Reproduction:
    return static_figure(ctx, 3, "hypercube:8", "hypercube:5", "HYP(8)", 800, 300)


# ---------------------------------------------------------------------- mobile ad-hoc networks
def _mobile_run(task: tuple) -> SimpleNamespace:
    """One run of Figure 4 or 5: ``(n, radius, speed, steps, record, seed, algo)`` -> what
    :func:`_curves` reads of it (trace, initial metrics, report). Module-level so that Dask workers
    can run it; the seed is the run's own (the reproduction's seed + the run's index)."""
    n, radius, speed, steps, record, seed, algo = task
    dyn = RandomWaypoint(radius=radius, speed=speed, pause=3, wrap=True)
    r = simulate(f"ring:{n}", algo, f"point:{n * n}", seed=seed, max_steps=steps, speeds=SPEEDS,
                 dynamics=dyn, record_every=record)
    return SimpleNamespace(trace={k: r.trace[k] for k in ("step", "max_weighted_load", "l2_error")},
                           initial=r.initial, report=r.report)


def mobile_figure(ctx: ReproContext, number: int, speed: tuple, label: str) -> Reproduction:
    """Figure 4 or 5: random-waypoint mobility, traces averaged over the runs."""
    n, radius, runs_count, steps = (64, 0.2, 2, 300) if ctx.quick else (256, 0.1, 25, 2000)
    record = 1 if ctx.quick else 5
    acc: dict = {}
    reports = []
    algos = ("fos-floor", "fos", "random-walk")
    # Every (run, algorithm) is independent: ctx.map runs them here or on Dask workers, and the
    # averages below are summed in run order either way, so the figure is the same to the last bit.
    tasks = [(n, radius, speed, steps, record, ctx.seed + r_i, algo) for r_i in range(runs_count) for algo in algos]
    done_runs = ctx.map(_mobile_run, tasks)
    for r_i in range(runs_count):
        runs = dict(zip(algos, done_runs[3 * r_i: 3 * r_i + 3]))
        reports.append(runs["random-walk"].report)
        curves = _curves(runs)
        for key, c in curves.items():
            if key == "rnd(real)":
                c = {k: np.asarray(v)[::record] for k, v in c.items()}
            slot = acc.setdefault(key, {"step": np.asarray(c["step"]), "max_weighted_load": 0.0, "l2_error": 0.0})
            slot["max_weighted_load"] = slot["max_weighted_load"] + np.asarray(c["max_weighted_load"]) / runs_count
            slot["l2_error"] = slot["l2_error"] + np.asarray(c["l2_error"]) / runs_count
    switch = [r["switch_step"] for r in reports]
    done = [r["done_step"] for r in reports]
    rep = Reproduction(f"elsasser-fig{number}", f"Figure {number}: mobile ad-hoc network, {label} movement", PAPER)
    rep.tables.append(Table(f"{n} nodes, radius {radius}, movement {speed[0]}..{speed[1]} per step, pause 3, "
                            f"wrap-around, {n * n} tokens, speeds 0.8..1.2, mean of {runs_count} runs, {steps} steps",
                            ["curve", "final max weighted load", "min max weighted load", "final l2 error",
                             "min l2 error"], _summary_rows(acc)))
    path = _plot(acc, ctx.figure_path(f"elsasser_fig{number}.png"),
                 f"Fig. {number}: mobile ad-hoc network, {label} movement (mean of {runs_count} runs"
                 + (f", quick: {n} nodes)" if ctx.quick else ")"),
                 float(np.mean([s for s in switch if s is not None])) if any(s is not None for s in switch) else None,
                 float(n))
    if path:
        rep.figures.append(path)
    fi, fr, ri = (acc[k]["max_weighted_load"] for k in ("fos(int)", "fos(real)", "rnd(int)"))
    # "Almost equalized": within 6 of W/n in weighted load. The targets of phase 2 allow
    # ceil(wbar_i) + ceil(2 sbar_i) <= wbar_i + 4 tokens, i.e. about W/n + 4/sbar_i weighted.
    level = float(n) + 6.0
    reach = {k: (int(acc[k]["step"][np.argmax(acc[k]["max_weighted_load"] <= level)])
                 if np.any(acc[k]["max_weighted_load"] <= level) else None) for k in ("fos(int)", "rnd(int)")}
    rep.claims.append(Claim(
        "the randomized algorithm reaches an almost equalized state (mean max weighted load <= W/n + 6) "
        "earlier than FOS",
        reach["rnd(int)"] is not None and (reach["fos(int)"] is None or reach["rnd(int)"] < reach["fos(int)"]),
        f"first step with mean max weighted load <= {level:.1f}: rnd(int) {reach['rnd(int)']}, fos(int) {reach['fos(int)']}"))
    levels = (8.0, 6.0, 4.0, 3.0)
    first = {}
    for key in ("fos(int)", "rnd(int)"):
        y = acc[key]["max_weighted_load"]
        first[key] = [int(acc[key]["step"][np.argmax(y <= n + k)]) if np.any(y <= n + k) else None for k in levels]
    rep.tables.append(Table("first iteration with mean max weighted load <= W/n + k",
                            ["curve", *[f"k={k:g}" for k in levels]],
                            [[key, *first[key]] for key in ("fos(int)", "rnd(int)")]))
    rep.claims.append(Claim(
        "with mobility, FOS alone balances better than on the static topologies (movement spreads tokens)",
        bool(acc["fos(int)"]["max_weighted_load"][-1] < 1.2 * n),
        f"fos(int) final mean max weighted load {fi[-1]:.2f} (ideal {n}); rnd(int) {ri[-1]:.2f}; fos(real) {fr[-1]:.2f}"))
    rep.notes.append(f"switch steps {switch}; phase 2 done at {done}")
    rep.data = {"switch_steps": switch, "done_steps": done, "n": n, "radius": radius, "speed": list(speed),
                "runs": runs_count}
    return rep


@reproduction("elsasser-fig4", "Figure 4: mobile ad-hoc network, slow node movement (0.001..0.005)", PAPER)
def figure4(ctx: ReproContext) -> Reproduction:
    return mobile_figure(ctx, 4, (0.001, 0.005), "slow")


@reproduction("elsasser-fig5", "Figure 5: mobile ad-hoc network, fast node movement (0.01..0.05)", PAPER)
def figure5(ctx: ReproContext) -> Reproduction:
    return mobile_figure(ctx, 5, (0.01, 0.05), "fast")


# ---------------------------------------------------------------------- open choices
@reproduction("elsasser-choices", "Open choices of Sec. 3-4: the constant c and the switch rule", PAPER)
def choices(ctx: ReproContext) -> Reproduction:
    """How Figure 1's curves depend on c (with speed_scale) and on the switch rule and tolerance."""
    spec, steps = ("torus:8x8", 700) if ctx.quick else ("torus:16x16", 2500)
    n = make_graph(spec).n
    variants = [
        ("c=2 (default), switch error<=1/n^2", {"c": 2.0}),
        ("c=1.5, switch error<=1/n^2", {"c": 1.5}),
        ("c=1.1, speed_scale=min, switch error<=1/n^2", {"c": 1.1, "speed_scale": "min"}),
        ("c=2, switch error<=0.5", {"switch_tol": 0.5}),
        ("c=2, switch error<=5", {"switch_tol": 5.0}),
        ("c=2, switch local<=1/n^2", {"switch": "local"}),
    ]
    rows, curves = [], {}
    for label, params in variants:
        _, runs = _static_runs(spec, steps, ctx.seed, params, algos=("fos-floor", "random-walk"))
        rw, ff = runs["random-walk"], runs["fos-floor"]
        rows.append([label, rw.report["switch_step"], rw.report["done_step"],
                     round(float(rw.final["max_weighted_load"]), 3), round(float(rw.final["l2_error"]), 3),
                     round(float(np.min(ff.trace["max_weighted_load"])), 3), round(float(ff.final["l2_error"]), 3),
                     rw.report["overdraw_events"]])
        curves[label] = rw.trace
    try:
        _static_runs(spec, 1, ctx.seed, {"c": 1.1}, algos=("fos-floor",))
        refused = "ran"
    except Exception as exc:  # the validity check of M
        refused = str(exc)
    rep = Reproduction("elsasser-choices", "Dependence on c and on the switch rule (Figure 1 setting)", PAPER)
    rep.tables.append(Table(f"{spec}, {n * n} tokens, p_fail={FAIL}, speeds 0.8..1.2, seed {ctx.seed}, {steps} steps",
                            ["variant", "switch step", "done step", "rnd final max weighted load", "rnd final l2",
                             "fos(int) best max weighted load", "fos(int) final l2", "overdraw events"], rows))
    rep.notes.append(f"c=1.1 with raw speeds 0.8..1.2: {refused}")
    path = ctx.figure_path("elsasser_choices.png")
    if path is not None:
        from ..plotting._traces import new_figure
        import matplotlib.pyplot as plt

        fig, axes = new_figure(2)
        for label, tr in curves.items():
            axes[0].plot(tr["step"], tr["max_weighted_load"], lw=1.1, label=label)
            axes[1].plot(tr["step"], np.where(tr["l2_error"] > 0, tr["l2_error"], np.nan), lw=1.1, label=label)
        for ax, name in zip(axes, ("maximal weighted load", "l2 error")):
            ax.set_yscale("log")
            ax.set_xlabel("iteration")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"rnd(int) on {spec}: dependence on c and the switch rule")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        rep.figures.append(str(path))
    rep.claims.append(Claim("every variant ends phase 2 with every node under its target", all(r[2] is not None for r in rows),
                            "done step per variant: " + ", ".join(str(r[2]) for r in rows)))
    rep.data = {"rows": rows}
    return rep
