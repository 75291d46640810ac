"""The ``tokendist reproduce`` entries of Houle, Symvonis and Wood (2004), quick versions."""

import pytest

from tokendist.experiments._repro_houle import FIG1_ORDERINGS, recover_colouring_from_orderings
from tokendist.experiments._reproduce import ReproContext, run_reproduction


@pytest.mark.parametrize("name", ["houle-sg1", "houle-fig1", "houle-stars-paths"])
def test_reproduction_claims_hold(name):
    r = run_reproduction(name, ReproContext(quick=True))
    assert r.claims and all(c.holds for c in r.claims), [c for c in r.claims if not c.holds]


def test_kary_msd_reproduction_reports_the_degenerate_theorem16_case():
    r = run_reproduction("houle-kary-msd", ReproContext(quick=True))
    by = {c.statement.split(":")[0][:20]: c for c in r.claims}
    assert r.claims[0].holds and r.claims[1].holds  # conjecture, Lemma 17
    t16 = r.claims[2]
    assert not t16.holds and "k=1, h=1, n=2" in t16.detail and "k=2" not in t16.detail
    assert by
    beyond = r.claims[3]
    assert not beyond.holds and "k=7, h=6, n=137257: MSD 17 < 18" in beyond.detail


def test_fig1_colouring_is_recovered_uniquely():
    sols = recover_colouring_from_orderings(FIG1_ORDERINGS)
    assert len(sols) == 1
    edges = sols[0]["edges"]
    assert ("a", "b", 0) in edges and ("a", "i", 1) in edges and len(edges) == 14


def test_termination_reproduction_measures_the_unsafe_rule():
    r = run_reproduction("houle-termination", ReproContext(quick=True))
    assert r.tables[0].rows[0] == ["8-node", 128, 24, 0, 4]
    assert not r.claims[0].holds and not r.claims[1].holds
    assert r.data["runs"] == 40 and r.data["unsafe_stop_runs"] >= 1
