"""Make semantics of `claw build` against the stand-in server, counting the requests it receives."""

from __future__ import annotations

import json
from typing import Any

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _json_build(claw: Claw, *extra: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build("--output", "json", *extra, **kw)
    assert out, err
    return code, json.loads(out)


def _actions(report: dict[str, Any]) -> dict[tuple[str, str, int], str]:
    return {(r["model_id"], r["case_id"], r["repetition"]): r["run"] for r in report["rows"]}


def test_first_build_executes_everything_second_sends_nothing(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    code, report = _json_build(claw)
    assert code == 0, report
    assert set(_actions(report).values()) == {"exec"}
    assert len(report["rows"]) == 4
    assert len(standin.requests) == 4
    assert {r["status"] for r in report["rows"]} == {"success"}

    code, report = _json_build(claw)
    assert code == 0
    assert set(_actions(report).values()) == {"reuse"}
    assert len(standin.requests) == 4  # zero new requests


def test_same_case_and_model_in_another_suite_is_reused(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    assert claw.build()[0] == 0
    ws.suite("other", ["m1"], title="Another suite", case_selection={"include_case_ids": ["alpha"]})
    code, report = _json_build(claw, suite="other")
    assert code == 0
    assert _actions(report) == {("m1", "alpha", 0): "reuse"}
    assert len(standin.requests) == 4


def test_policy_titles_tags_and_expectations_do_not_rebuild(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    assert claw.build()[0] == 0
    ws.run_profile(concurrency=7, title="Renamed profile", fail_fast=True)
    ws.edit("suites/main.yaml", lambda d: d.update(title="Renamed suite"))
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(
        title="New title", tags=["other"], expectations={"soft_expectations": [{"text": "Short."}]}))
    ws.edit("run_profiles/rp.yaml", lambda d: d["execution_policy"].update(stop_on_runner_error=True))
    code, report = _json_build(claw)
    assert code == 0
    assert set(_actions(report).values()) == {"reuse"}
    assert len(standin.requests) == 4


def test_changing_one_message_reruns_exactly_that_case(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.run_profile(repetitions=2)
    assert claw.build()[0] == 0
    assert len(standin.requests) == 8
    ws.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    code, report = _json_build(claw)
    assert code == 0
    executed = {k for k, v in _actions(report).items() if v == "exec"}
    assert executed == {(m, "beta", r) for m in ("m1", "m2") for r in (0, 1)}
    assert len(standin.requests) == 12


def test_more_repetitions_run_only_the_new_one_and_a_new_model_only_itself(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.run_profile(repetitions=2)
    assert claw.build()[0] == 0
    ws.run_profile(repetitions=3)
    code, report = _json_build(claw)
    assert code == 0
    assert {k for k, v in _actions(report).items() if v == "exec"} == {(m, c, 2) for m in ("m1", "m2")
                                                                      for c in ("alpha", "beta")}
    assert len(standin.requests) == 12
    ws.suite("main", ["m1", "m2", "m3"])
    code, report = _json_build(claw)
    assert {k for k, v in _actions(report).items() if v == "exec"} == {("m3", c, r) for c in ("alpha", "beta")
                                                                      for r in range(3)}
    assert len(standin.requests) == 18
    assert all(r["model"] == "vendor/m3" for r in standin.requests[12:])


def test_dry_run_and_explain_name_the_change_and_send_nothing(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    code, out, _ = claw.build("--dry-run")
    assert code == 0 and "4 node(s) would execute" in out and "never built" in out
    assert standin.requests == []
    assert claw.build()[0] == 0
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(temperature=0.2))
    before = len(standin.requests)
    code, out, _ = claw.build("--dry-run", "--case", "alpha")
    assert code == 0
    assert "input.messages[1].content" in out and "runner.temperature 0 -> 0.2" in out
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp", "--model", "m1")
    assert code == 0
    assert "run m1 alpha rep 0 (stale):" in out
    assert "input.messages[1].content 'What is 2 + 2?' -> 'What is 3 + 3?'" in out
    assert "runner.temperature 0 -> 0.2" in out
    code, out, _ = claw("status", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and "STALE" in out
    assert len(standin.requests) == before


def test_attachment_change_is_explained_by_object_id(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    data = ws.configs / "cases" / "alpha" / "data.csv"
    data.write_text("a,b\n1,2\n")
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["data.csv"]))
    assert claw.build()[0] == 0
    assert any("--- BEGIN ATTACHMENT data.csv ---" in (m.get("content") or "")
               for r in standin.requests for m in r["messages"])
    data.write_text("a,b\n1,3\n")
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp", "--case", "alpha")
    assert "attachment data.csv: blake3:" in out and " -> blake3:" in out
    assert "input.messages" not in out  # the attachment is reported once, by content


def test_status_counts_per_model(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    code, out, _ = claw("status", "--suite", "main", "--run-profile", "rp", "--output", "json")
    columns = ("fresh", "stale", "failed", "never-built")
    m1 = json.loads(out)["models"]["m1"]
    assert {c: m1[c] for c in columns} == {"fresh": 0, "stale": 0, "failed": 0, "never-built": 2}
    assert claw.build()[0] == 0
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="changed"))
    code, out, _ = claw("status", "--suite", "main", "--run-profile", "rp", "--output", "json")
    m2 = json.loads(out)["models"]["m2"]
    assert {c: m2[c] for c in columns} == {"fresh": 1, "stale": 1, "failed": 0, "never-built": 0}
