"""tokendist reproduce <modern entry> --quick: every entry runs, marks each claim, and the claims that are
invariants of the rules (not asymptotic trends) hold. Each entry runs once per session."""

import pytest

from tokendist.experiments import ReproContext, run_reproduction

ENTRIES = ["quasirandom", "rotor-router", "randomized-diffusion", "random-matching", "flow-imitation",
           "stratified-diffusion", "pairwise-averaging", "rsw-lower-bound", "modern-vs-classic"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("modern")
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = run_reproduction(name, ReproContext(out=out, quick=True, seed=0))
        return cache[name]

    get.out = out
    return get


@pytest.mark.parametrize("name", ENTRIES)
def test_entry_marks_every_claim(name, quick):
    rep = quick(name)
    assert rep.claims and rep.tables
    for c in rep.claims:
        assert isinstance(c.holds, bool) and c.detail
    assert rep.to_json()["claims"]


def test_quasirandom_errors_within_half(quick):
    rep = quick("quasirandom")
    rows = rep.data["tori"] + [r for r in rep.data["hypercubes"] if r["init"] == "random"]
    assert all(r["max_abs_error"] <= 0.5 and r["held_back"] == 0 for r in rows)
    assert rep.claims[0].holds


def test_rsw_fixed_point_and_flow_imitation_bound(quick):
    rsw = quick("rsw-lower-bound")
    assert all(r["moved"] == 0 and r["discrepancy"] == r["Delta_x_diam"] for r in rsw.data["rows"])
    fi = quick("flow-imitation")
    assert all(r["max_minus_avg"] <= r["bound_2d"] and r["max_flow_gap"] < 1 for r in fi.data["rows"])


def test_modern_vs_classic_covers_both_families(quick):
    rep = quick("modern-vs-classic")
    fams = {r["family"] for r in rep.data["rows"] if r.get("status") == "ok"}
    assert fams == {"modern", "classic"}
    assert rep.claims[0].holds  # conservation and non-negativity of every modern run
    assert rep.figures and (quick.out / "modern-vs-classic.png").stat().st_size > 0
