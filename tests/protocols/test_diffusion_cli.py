"""The documented commands of docs/protocols/diffusion.md: outputs and one-line errors."""

import json

from tokendist.cli import main


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_oriented_counterexample_and_cycle(capsys, tmp_path):
    loads = tmp_path / "ring4.txt"
    loads.write_text("0\n3\n2\n1\n")
    code, out, _ = _run(capsys, ["run", "--graph", "ring:4", "--algo", "diffusion-oriented", "--init", f"file:{loads}",
                                 "--json"])
    d = json.loads(out)
    assert code == 0 and d["stop_reason"] == "stable" and d["final"]["discrepancy"] == 3 and d["tokens_moved"] == 0
    code, out, _ = _run(capsys, ["run", "--graph", "torus:8x8", "--algo", "diffusion-oriented", "--init", "random:0..20",
                                 "--seed", "2", "--json"])
    d = json.loads(out)
    assert (d["stop_reason"], d["cycle_length"], d["final"]["discrepancy"]) == ("cycle", 12, 9)


def test_cli_errors_are_one_line(capsys):
    code, _, err = _run(capsys, ["run", "--graph", "star:3", "--algo", "diffusion-ceil", "--init", "point:1"])
    assert code == 2 and "infeasible step 0: node 0 holds 1 tokens" in err and err.count("\n") == 1
    code, out, _ = _run(capsys, ["run", "--graph", "star:3", "--algo", "diffusion-ceil", "--init", "point:1",
                                 "--allow-infeasible", "--json"])
    d = json.loads(out)
    assert code == 0 and d["infeasible_steps"] >= 1 and d["report"]["min_load"] == -2
    code, _, err = _run(capsys, ["run", "--graph", "ring:4", "--algo", "diffusion", "--init", "point:8",
                                 "--param", "matrix=uniform:0.3"])
    assert code == 2 and "< 0.5 (Sec. 2 asks P_ii >= 1/2" in err and err.count("\n") == 1
    code, _, err = _run(capsys, ["run", "--graph", "ring:4", "--algo", "diffusion-floor", "--init", "point:8",
                                 "--param", "min_diag=1/0"])
    assert code == 2 and "min_diag expects number" in err


def test_cli_figure3_with_fractions(capsys, tmp_path):
    loads = tmp_path / "l.txt"
    loads.write_text("1\n2\n3\n2\n")
    code, out, _ = _run(capsys, ["run", "--graph", "ring:4", "--algo", "diffusion-floor", "--init", f"file:{loads}",
                                 "--param", "matrix=uniform:1/3", "--param", "min_diag=1/3", "--json"])
    d = json.loads(out)
    assert code == 0 and d["stop_reason"] == "stable" and d["final"]["discrepancy"] == 2


def test_cli_bounds_prints_the_error_bound_prediction(capsys):
    code, out, _ = _run(capsys, ["bounds", "--graph", "torus:4x4", "--algo", "diffusion", "--init", "point:1600",
                                 "--max-steps", "40", "--json"])
    d = json.loads(out)
    assert code == 0 and abs(d["predicted"]["gamma"] - 0.75) < 1e-12
    assert abs(d["predicted"]["mesh_lambda2"] - 0.75) < 1e-12 and d["measured"]["steps"] == 40
