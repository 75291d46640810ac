"""The Subramanian-Scherson reproductions run (quick versions) and report what the docs state."""

import pytest

from tokendist.experiments._reproduce import ReproContext, run_reproduction


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    return lambda name: run_reproduction(name, ReproContext(out=out, quick=True))


def test_fig3_and_fig4_exact_examples(quick):
    for name in ("subramanian-fig3", "subramanian-fig4"):
        rep = quick(name)
        assert rep.claims and all(c.holds for c in rep.claims), [c.detail for c in rep.claims if not c.holds]
    rep = quick("subramanian-fig4")
    assert rep.tables[0].rows == [[0, "0 2 0 2"], [1, "2 0 2 0"], [2, "0 2 0 2"]]


def test_fig1_bounds_table_and_error_bound_plot(quick):
    rep = quick("subramanian-fig1")
    claims = {c.statement.split(":")[0]: c.holds for c in rep.claims}
    assert all(claims.values()), claims
    assert len(rep.figures) == 1 and rep.figures[0].endswith(".png")
    row = rep.tables[0].rows[0]  # ring:8: worst start needs exactly the Error Bound's T
    assert row[0] == "ring:8" and row[6] == row[7]


def test_roundings_claims_are_reported_as_measured(quick):
    rep = quick("subramanian-roundings")
    holds = {c.statement.split(":")[0]: c.holds for c in rep.claims}
    assert holds["floor"] and holds["ceiling"]
    assert holds["st-orientation rounding 'guarantees convergence to the balanced distribution'"] is False
