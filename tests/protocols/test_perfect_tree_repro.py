"""tokendist reproduce margara (quick): every claim as the docs state it, the figure written."""

from tokendist.experiments import ReproContext, run_reproduction


def test_reproduce_margara_quick(tmp_path):
    rep = run_reproduction("margara", ReproContext(out=tmp_path, quick=True, seed=0))
    verdict = {c.statement: c.holds for c in rep.claims}
    literal = {s for s in verdict if s.startswith("Sec. 5 as stated")}
    assert len(literal) == 2 and not any(verdict[s] for s in literal)  # fail at T = 0 / T mod N = 0 (docs item 7)
    assert all(holds for s, holds in verdict.items() if s not in literal)
    assert rep.figures and (tmp_path / "margara-bounds.png").stat().st_size > 0
    runs = rep.data["runs"]
    assert {r["shape"] for r in runs} == {"path", "star", "caterpillar", "binary", "random"}
    assert all(r["exchanges"] >= r["optimum"] for r in runs)
