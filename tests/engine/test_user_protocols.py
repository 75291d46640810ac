"""Users' own protocols: file and module references, plug-ins, the contract, one-line errors."""

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tokendist as td
from tokendist.cli import main
from tokendist.engine import check_protocol, make_protocol, resolve_protocol
from tokendist.errors import TokendistError

EXAMPLE = pathlib.Path(__file__).parent.parent.parent / "examples" / "custom_protocol.py"
REF = f"{EXAMPLE}:Greedy"

RULES = textwrap.dedent('''
    import numpy as np
    import tokendist as td

    class Halver(td.Protocol):
        """Each edge moves half the difference (floor) from the heavier end: not feasible in general."""
        model = "flow"
        may_go_negative = True
        def step(self, t, graph, loads):
            d = loads[graph.u] - loads[graph.v]
            flows = np.sign(d) * (np.abs(d) // (2 * graph.max_degree))
            out = loads.copy()
            np.subtract.at(out, graph.u, flows)
            np.add.at(out, graph.v, flows)
            return td.Step(out, moved=int(np.abs(flows).sum()), flows=flows)

    class Creator(td.Protocol):
        def step(self, t, graph, loads):
            return td.Step(loads + 1)

    class WrongShape(td.Protocol):
        def step(self, t, graph, loads):
            return td.Step(loads[:-1])

    class NotAStep(td.Protocol):
        def step(self, t, graph, loads):
            return loads

    class Floats(td.Protocol):
        def step(self, t, graph, loads):
            return td.Step(loads.astype(float))

    class NoStep(td.Protocol):
        pass

    class NotAProtocol:
        def step(self, t, graph, loads):
            return loads

    class Named(td.Protocol):
        name = "multi-port"
        def step(self, t, graph, loads):
            return td.Step(loads.copy())
''')


@pytest.fixture
def rules(tmp_path):
    path = tmp_path / "my_rules.py"
    path.write_text(RULES)
    return path


def test_example_protocol_passes_the_conformance_checks():
    checks = check_protocol(REF)
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert {c.check for c in checks} >= {"conservation", "no negative loads", "same seed, same trace",
                                        "balanced stays balanced"}


def test_every_registered_protocol_passes_the_public_check_on_a_ring():
    # The same function users run; the full zoo is the conformance suite's job.
    for name in ("multi-port", "diffusion-floor", "threshold2"):
        checks = check_protocol(name, graphs=["ring:9", "path:7"], steps=30)
        assert checks and all(c.passed for c in checks), name


@pytest.mark.parametrize("name", ["rotor-router", "randomized-diffusion", "stratified-diffusion"])
def test_public_check_does_not_ask_balance_of_a_rule_that_moves_from_balance(name):
    # keeps_balance = False: the published rule moves tokens from a balanced start
    # (tests/protocols/test_modern_balance.py shows it does), so that check is not made.
    checks = check_protocol(name, graphs=["torus:4x4"], steps=20)
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert "balanced stays balanced" not in {c.check for c in checks}
    assert "conservation" in {c.check for c in checks}


def test_file_reference_runs_like_a_builtin_and_equals_the_instance_run():
    by_ref = td.simulate("torus:6x6", REF, "random:0..50", seed=3, max_steps=200, check=True)
    cls = resolve_protocol(REF)
    by_cls = td.simulate("torus:6x6", cls(), "random:0..50", seed=3, max_steps=200)
    np.testing.assert_array_equal(by_ref.loads, by_cls.loads)
    assert by_ref.tokens == by_ref.loads.sum() and by_ref.loads.min() >= 0
    assert make_protocol(REF).name == "greedy"


def test_module_reference(rules, monkeypatch):
    monkeypatch.syspath_prepend(str(rules.parent))
    p = make_protocol("my_rules:Halver")
    assert p.name == "my_rules:Halver"  # an unnamed class is named by its reference
    r = td.simulate("ring:8", p, "point:80", seed=1, max_steps=50, allow_infeasible=True)
    assert r.loads.sum() == 80


@pytest.mark.parametrize("cls, message", [
    ("Creator", "broke token conservation at step 0"),
    ("WrongShape", "returned loads of shape"),
    ("NotAStep", "must return a tokendist.Step"),
    ("Floats", "tokens are integers"),
])
def test_a_broken_rule_fails_with_one_line(rules, cls, message, capsys):
    code = main(["run", "--graph", "ring:6", "--algo", f"{rules}:{cls}", "--init", "uniform:6", "--max-steps", "3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("ref, message", [
    ("{rules}:NoStep", "defines no step"),
    ("{rules}:NotAProtocol", "is not a protocol"),
    ("{rules}:Missing", "has no 'Missing'"),
    ("{rules}:Named", "is a built-in protocol's"),
    ("nowhere/file.py:X", "not found"),
    ("no_such_module_xyz:X", "cannot import protocol module"),
    ("{rules}:", "bad protocol reference"),
])
def test_bad_references_are_one_line(rules, ref, message, capsys):
    code = main(["run", "--graph", "ring:6", "--algo", ref.format(rules=rules), "--init", "uniform:6"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    with pytest.raises(TokendistError, match=message.split("'")[0]):
        resolve_protocol(ref.format(rules=rules))


def test_run_and_compare_from_the_cli(tmp_path, capsys):
    assert main(["run", "--graph", "torus:8x8", "--algo", REF, "--init", "random:0..50", "--seed", "2",
                 "--check", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["tokens"] == sum(td.make_loads("random:0..50", td.make_graph("torus:8x8"), 2))
    assert main(["compare", "--graph", "torus:8x8", "--init", "random:0..50", "--algos", f"multi-port,{REF}",
                 "--out", str(tmp_path / "c"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = [row["algorithm"] if "algorithm" in row else row.get("name") for row in out["rows"]]
    assert REF in names and "multi-port" in names


def test_entry_point_plugin_is_registered(tmp_path):
    pkg = tmp_path / "plugin_rules"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(RULES.replace("class Halver(td.Protocol):", "class Halver(td.Protocol):\n    name = 'x'"))
    dist = tmp_path / "plugin_rules-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-rules\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tokendist.protocols]\nhalver = plugin_rules:Halver\n"
                                           "broken = plugin_rules:NoStep\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tokendist as td; "
            "print('halver' in td.PROTOCOLS, td.make_protocol('halver').name)\n"
            "try:\n    td.make_protocol('broken')\nexcept td.TokendistError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[0] == "True halver"
    assert "failed to load" in lines[1] and "defines no step" in lines[1]
