"""``tokendist tree msd | orderings | worst-case | conjecture``."""

import json

import numpy as np
import pytest

from tokendist.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_tree_msd_json_keys(capsys):
    out = _json(capsys, ["tree", "msd", "kary:2,3", "--json", "--sg1"])
    assert out["n"] == 15 and out["max_degree"] == 3 and out["msd"] == 2
    assert out["bound_theorem16"] == 5 and out["bound_lemma17"] == 4 and out["sg1"] == [1, 3, 7, 8, 12, 14]
    out = _json(capsys, ["tree", "msd", "random-tree:50", "--json"])
    assert out["bound_lemma17"] is None and "sg1" not in out


def test_tree_msd_table_and_error(capsys):
    assert main(["tree", "msd", "star:9"]) == 0
    assert "msd" in capsys.readouterr().out
    assert main(["tree", "msd", "ring:5"]) == 2
    assert "not a tree" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["kary:50,50", "kary:1000,1000", "star:100000000000000000000",
                                  "path:100000000000000000000", "path:0"])
def test_tree_msd_closed_forms_keep_the_size_limits(spec, capsys):
    # msd_of_spec skips building kary/star/path trees, so it checks their sizes itself (kary:50,50
    # was an OverflowError, path:0 a result with max_degree -1).
    assert main(["tree", "msd", spec, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad spec") and err.count("\n") == 1 and len(err) < 200


def test_tree_orderings(capsys):
    out = _json(capsys, ["tree", "orderings", "kary:2,2", "--json", "--tour"])
    assert out["chi"] == 3 and len(out["orderings"]) == 3 and len(out["tour"]) == 21
    for o in out["orderings"]:
        assert sorted(o) == list(range(7)) and o[0] == 0
    assert main(["tree", "orderings", "path:4"]) == 0


def test_tree_worst_case_writes_a_stable_distribution(tmp_path, capsys):
    f = tmp_path / "w.txt"
    out = _json(capsys, ["tree", "worst-case", "star:7", "--colour-start", "1", "--node", "3",
                         "--save-loads", str(f), "--json"])
    loads = np.loadtxt(f, dtype=int)
    assert out["msd"] == 4 == loads.max() - loads.min() and loads[3] == 0
    run = _json(capsys, ["run", "--graph", "star:7", "--algo", "threshold1", "--init", f"file:{f}",
                         "--param", "colour_start=1", "--json"])
    assert run["final"]["discrepancy"] == 4


def test_tree_conjecture(capsys):
    out = _json(capsys, ["tree", "conjecture", "--k-max", "3", "--h-max", "4", "--json"])
    assert out["holds"] and len(out["rows"]) == 12
    row = next(r for r in out["rows"] if r["k"] == 2 and r["h"] == 3)
    assert row["n"] == 15 and row["msd"] == 2
