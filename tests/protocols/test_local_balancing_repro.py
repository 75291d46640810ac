"""The Ghosh et al. 1995 reproductions (quick versions): they run, write figures and report claims."""

import pytest

from tokendist.experiments._reproduce import ReproContext, run_reproduction


@pytest.mark.parametrize("name", ["ghosh-scaling", "ghosh-local-balance", "ghosh-dynamic"])
def test_ghosh_reproductions_quick(name, tmp_path):
    r = run_reproduction(name, ReproContext(out=tmp_path, quick=True, seed=0))
    assert r.tables and r.tables[0].rows
    assert r.claims and all(c.holds for c in r.claims), [c for c in r.claims if not c.holds]
    for f in r.figures:
        assert (tmp_path / f.split("/")[-1]).exists()
