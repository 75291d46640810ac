"""``tokendist offline`` (Ghosh et al. 1995, Sec. 6)."""

import json
import subprocess
import sys

import pytest

from tokendist.cli._app import main


def test_offline_json(capsys):
    assert main(["offline", "--graph", "path:3", "--init", "file:/dev/null", "--json"]) == 2  # bad loads file
    capsys.readouterr()
    assert main(["offline", "--graph", "torus:4x4", "--init", "point:160", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 38 and out["slack"] == 0 and out["model"] == "multi-port" and out["exact"] is True
    # 150 of the 160 tokens leave node 0 over its 4 edges: ceil(150 / 4) = 38 steps.


@pytest.mark.parametrize("model,exact", [("single-port", False), ("multi-port", True)])
def test_offline_models_and_slack(capsys, model, exact):
    assert main(["offline", "--graph", "ring:6", "--init", "point:60", "--model", model, "--slack", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exact"] is exact and out["slack"] == 2 and out["target_max_load"] == 12
    assert out["steps"] == (48 if model == "single-port" else 24)


def test_offline_user_errors_are_one_line():
    p = subprocess.run([sys.executable, "-m", "tokendist.cli", "offline", "--graph", "ring:4", "--init",
                        "point:10", "--model", "two-port"], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([sys.executable, "-m", "tokendist.cli", "offline", "--graph", "ring:4", "--init",
                        "point:10", "--max-steps", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: offline:")
