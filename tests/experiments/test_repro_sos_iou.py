"""``tokendist reproduce sos-iou-readings --quick`` : the three readings of sos-iou measured."""

import json

import numpy as np

from tokendist.cli import main
import tokendist.experiments._repro_sos_iou as repro_mod
from tokendist.experiments import ReproContext, run_reproduction
from tokendist.experiments._repro_sos_iou import QUICK_GRAPHS
from tokendist.protocols.heterogeneous._sos_readings import IDEAL_READINGS


def test_sos_iou_readings_quick():
    rep = run_reproduction("sos-iou-readings", ReproContext(quick=True, seed=1))
    runs = rep.data["runs"]
    assert len(runs) == len(QUICK_GRAPHS) * len(IDEAL_READINGS) == len(rep.tables[0].rows)
    by = {(m["graph"], m["ideal"]): m for m in runs}
    for m in runs:
        assert m["steps"] == rep.data["steps"] == 300
        assert len(m["discrepancy_at"]) == len(m["iou_units_at"]) == 3
        assert m["discrepancy_at"][-1] == m["final_discrepancy"]
        assert m["theorem1_l2_bound_O"] > 0 and 1 < m["beta"] < 2
    # On the quick tori: the driven reading keeps a large imbalance and keeps
    # moving many tokens a step; the default (shadow) ends near balance within Theorem 1's bound.
    for side in (16, 32):
        g = f"torus:{side}x{side}"
        sh, dr = by[(g, "shadow")], by[(g, "driven")]
        assert sh["final_discrepancy"] <= 9 and sh["final_l2_error"] <= sh["theorem1_l2_bound_O"]
        assert dr["final_discrepancy"] > 2 * sh["final_discrepancy"]
        assert dr["moved_per_step_tail"] > 10 * max(sh["moved_per_step_tail"], 1.0)
    assert all(c.holds for c in rep.claims), [c.detail for c in rep.claims if not c.holds]
    assert any("Theorem 1" in n for n in rep.notes)


def test_sos_iou_readings_cli_json(capsys, monkeypatch):
    # The CLI entry (registered like the other reproductions); a tiny graph set keeps it quick.
    monkeypatch.setattr(repro_mod, "QUICK_GRAPHS", ("torus:6x6",))
    assert main(["reproduce", "sos-iou-readings", "--quick", "--seed", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    doc = out[0] if isinstance(out, list) else out
    assert doc["name"] == "sos-iou-readings"
    assert [r[1] for r in doc["tables"][0]["rows"]] == list(IDEAL_READINGS)
    assert np.all(np.array([m["tokens"] for m in doc["data"]["runs"]]) == doc["data"]["runs"][0]["tokens"])
