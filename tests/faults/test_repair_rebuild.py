"""fsck --repair leads to a rebuild of exactly what it quarantined; reuse never trusts what it cannot see."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.faults.helpers import build_report, head_nodes
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.storefiles import flip_in_frame, lose_object
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
CID = "main__rp__ev"


def _executed(store: Store, build_id: str) -> list[tuple[str, str, str]]:
    log = json.loads((store.root / "builds" / f"{build_id}.json").read_text())
    return sorted((n["kind"], n["address"]["model_id"], n["address"]["case_id"])
                  for n in log["nodes"] if n["action"] == "exec")


def _run_outputs(store: Store) -> dict[tuple[str, str], dict[str, str]]:
    return {(n["address"]["model_id"], n["address"]["case_id"]): store.get_json(n["record"])["outputs"]
            for n in head_nodes(store, CID) if n["kind"] == "run"}


def test_repair_then_build_rebuilds_exactly_the_quarantined_nodes(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], tmp_path: Path) -> None:
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    code, first, err = build_report(claw, *CAMPAIGN)
    assert code == 0, err
    store = Store(env["CLAW_STORE"], create=False)
    outputs = _run_outputs(store)
    damaged = [("m1", "alpha"), ("m2", "beta")]
    for address in damaged:  # (sandbox trees are shared: every run here left the same empty one)
        flip_in_frame(store, outputs[address]["artifact"], -5)

    code, out, _ = claw("fsck")
    assert code == 1 and out.count("is corrupt") >= 4, out  # 2 objects, 2 entries, 2 head nodes
    code, out, err = claw("fsck", "--repair")
    assert code == 0, out + err
    quarantined = out.count("quarantined action-cache entry")
    assert quarantined == 2 and "2 node(s) whose record or outputs are gone" in out, out

    code, out, err = claw("explain", *CAMPAIGN)
    assert "quarantined by claw fsck --repair" in out, out + err

    requests = len(standin.requests)
    code, second, err = build_report(claw, *CAMPAIGN)
    assert code == 0, err
    executed = _executed(store, second["build_id"])
    runs = [e for e in executed if e[0] == "run"]
    # Exactly the quarantined runs re-execute; their new answers give their evaluation new inputs,
    # so only those addresses are re-evaluated. Everything else is reused.
    assert runs == [("run", m, c) for m, c in damaged] and len(runs) == quarantined
    assert {(m, c) for _, m, c in executed} == set(damaged)
    assert second["counts"]["reused"] + len(executed) == first["counts"]["executed"]
    run_requests = [r for r in standin.requests[requests:] if r["body"]["model"] != JUDGE]
    assert len(run_requests) == quarantined  # one provider request per rebuilt run, no more

    code, out, err = claw("fsck")
    assert code == 0 and "problem" not in out, out + err
    code, out, err = claw("archive", "export", *CAMPAIGN, "-o", str(tmp_path / "after.claw"))
    assert code == 0, err
    ws.edit("cases/alpha/test.yaml", lambda doc: doc.update(
        deterministic_checks=[{"check_id": "said", "declarative": {"kind": "final_response_present"}}]))
    code, third, err = build_report(claw, *CAMPAIGN)
    assert code == 0, err
    assert third["counts"]["failed"] == 0


def test_reuse_skips_a_record_whose_output_is_gone_and_explain_says_so(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    code, _, err = build_report(claw, "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    store = Store(env["CLAW_STORE"], create=False)
    run = next(n for n in head_nodes(store, "main__rp__none") if n["address"]["case_id"] == "beta")
    artifact = store.get_json(run["record"])["outputs"]["artifact"]
    lose_object(store, artifact)  # gone without fsck (by hand, a bad disk, another tool)

    code, out, err = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert f"its output artifact {artifact} is no longer in the store" in out, out + err
    requests = len(standin.requests)
    code, report, err = build_report(claw, "--suite", "main", "--run-profile", "rp")
    assert code == 0, err
    assert report["counts"]["executed"] == 1 and report["counts"]["reused"] == 3
    assert len(standin.requests) == requests + 1
