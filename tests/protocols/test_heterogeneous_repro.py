"""Quick versions of the Elsässer et al. reproductions (Figures 1-5 and the open choices)."""

import pytest

from tokendist.experiments import ReproContext, run_reproduction


def test_figure1_quick(tmp_path):
    rep = run_reproduction("elsasser-fig1", ReproContext(out=tmp_path, quick=True, seed=0))
    assert rep.figures and (tmp_path / "elsasser-fig1.png").exists()
    claims = {c.statement[:40]: c.holds for c in rep.claims}
    assert sum(claims.values()) >= 3
    assert rep.data["switch_step"] is not None and rep.data["done_step"] >= rep.data["switch_step"]
    assert rep.data["rnd_final_max_weighted_load"] < rep.data["fos_int_final_max_weighted_load"]


def test_figure4_quick(tmp_path):
    rep = run_reproduction("elsasser-fig4", ReproContext(out=tmp_path, quick=True, seed=1))
    assert (tmp_path / "elsasser-fig4.png").exists()
    assert len(rep.data["switch_steps"]) == rep.data["runs"]
    assert len(rep.tables[0].rows) == 4


@pytest.mark.slow
def test_choices_quick(tmp_path):
    rep = run_reproduction("elsasser-choices", ReproContext(out=None, quick=True, seed=0))
    assert len(rep.tables[0].rows) == 6
    assert "negative diagonal" in rep.notes[0]
