"""The answers themselves in SQL: final_response, turns and tool calls in `runs`, each conversation in
`messages`, the judge's summary and per-dimension evidence (query/answers.py), from a real build."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawstore.query.answers import cache_path, run_answer
from clawstore.query.engine import run_query
from clawstore.query.manifest import index_current, index_pending
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text, tool_call
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile
from tests.support.workspace import Workspace

JUDGE_REPLY = {"summary": "right number, no working shown",
               "dimensions": {d: {"score": 4 if d == "task" else 7, "evidence": [f"{d}: quoted the answer", "second"]}
                              for d in ("task", "process", "autonomy", "closeness", "efficiency", "spark")},
               "overall": {"score": 6, "evidence": ["overall: fine"]}}


def _evaluated(ws: Workspace) -> None:
    ws.case("tools", "Use the tools.", input={
        "messages": [{"role": "user", "content": "Write a note, then say done."}],
        "context": {"llm_probe": {"tools": ["write_file"]}}})
    ws.suite("main", ["m1", "m2"], case_selection={"include_case_ids": ["alpha", "tools"]})
    eval_profile(ws, repetitions=1)


def _query(store: Path, sql: str) -> list[dict]:
    """As `claw query` runs it: the current heads indexed, then the SQL."""
    opened = Store(store, create=False)
    index_current(opened)
    result = run_query(store, sql, store=opened)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def test_answers_conversations_and_judge_evidence_are_rows(ws: Workspace, claw: Claw, standin: StandIn,
                                                             env: dict[str, str]) -> None:
    _evaluated(ws)
    standin.script(JUDGE, text(json.dumps(JUDGE_REPLY)))
    standin.script("vendor/m1", tool_call("write_file", {"path": "note.txt", "content": "hi"}), text("done: wrote it"),
                   match="Write a note")
    standin.script("vendor/m2", text(""), match="Write a note")  # no answer: an invalid run, final_response NULL
    standin.script("*", text("4"))
    code, out, err = claw.build("--evaluation-profile", "ev")
    assert code in (0, 1), out + err
    store = Path(env["CLAW_STORE"])

    runs = {(r["model_id"], r["case_id"]): r for r in _query(
        store, "select model_id, case_id, final_response, turns, tool_calls, status from runs")}
    assert runs[("m1", "tools")] == {"model_id": "m1", "case_id": "tools", "final_response": "done: wrote it",
                                     "turns": 2, "tool_calls": 1, "status": "success"}
    assert runs[("m1", "alpha")]["final_response"] == "4" and runs[("m1", "alpha")]["turns"] == 1
    assert runs[("m2", "tools")]["final_response"] is None and runs[("m2", "tools")]["status"] == "invalid"

    said = _query(store, "select turn, kind, role, content, tool_name, tool_arguments, tool_status, tool_result "
                         "from messages where model_id = 'm1' and case_id = 'tools' order by position")
    assert [(m["turn"], m["kind"], m["role"]) for m in said] == [
        (0, "message", "user"), (1, "message", "assistant"), (1, "tool_call", "assistant"),
        (1, "tool_result", "tool"), (2, "message", "assistant")]
    assert said[0]["content"] == "Write a note, then say done."
    assert said[2]["tool_name"] == "write_file" and json.loads(said[2]["tool_arguments"])["content"] == "hi"
    assert said[3]["tool_name"] == "write_file" and said[3]["tool_status"] == "success" and said[3]["tool_result"]
    assert said[4]["content"] == "done: wrote it"

    [judged] = _query(store, "select summary from judgements where model_id = 'm1' and case_id = 'alpha'")
    assert judged["summary"] == "right number, no working shown"
    dims = {d["dimension"]: d for d in _query(store, "select dimension, score, evidence from judgement_dimensions "
                                                     "where model_id = 'm1' and case_id = 'alpha'")}
    assert set(dims) == {"task", "process", "autonomy", "closeness", "efficiency", "spark", "overall"}
    assert dims["task"] == {"dimension": "task", "score": 4.0, "evidence": "task: quoted the answer\nsecond"}
    assert dims["overall"]["score"] == 6.0 and dims["overall"]["evidence"] == "overall: fine"
    # the question the issue asks: what did the model say, and why did the judge give it 4
    [why] = _query(store, "select r.final_response, d.score, d.evidence from runs r join judgement_dimensions d "
                          "on d.run_key = r.key and d.campaign_id = r.campaign_id "
                          "where r.model_id = 'm1' and r.case_id = 'alpha' and d.dimension = 'task'")
    assert why == {"final_response": "4", "score": 4.0, "evidence": "task: quoted the answer\nsecond"}


def test_answers_are_read_from_the_store_once(ws: Workspace, claw: Claw, standin: StandIn,
                                              env: dict[str, str]) -> None:
    standin.script("*", text("four"))
    assert claw.build()[0] == 0
    store = Path(env["CLAW_STORE"])
    cache = cache_path(store / "manifest", "runs")
    assert not cache.exists()  # nothing read before a query asks
    assert _query(store, "select count(*) as n from results")  # (no view of answers named: none read)
    assert not cache.exists()
    assert {r["final_response"] for r in _query(store, "select final_response from runs")} == {"four"}
    written = cache.stat().st_mtime_ns
    assert _query(store, "select count(*) as n from messages") == [{"n": 12}]  # 4 runs: system, user, assistant
    assert cache.stat().st_mtime_ns == written  # nothing new to read: the cache is not rewritten

    ws.case("gamma", "Third?")
    assert claw.build()[0] == 0
    assert len(_query(store, "select final_response from runs where final_response = 'four'")) == 6
    assert cache.stat().st_mtime_ns != written  # the two new runs' artifacts were added
    opened = Store(store, create=False)
    index_pending(opened)  # (what `claw query` does first for SQL naming a history view)
    history = run_query(store, "select final_response, count(*) from run_history group by 1", store=opened).rows
    assert history == [("four", 10)]  # 4 runs of the first build, 6 of the second (its head's reused too)


def test_a_trace_gives_turns_tool_calls_and_one_row_per_entry() -> None:
    trace = [
        {"event_type": "message", "role": "system", "content": "sys"},
        {"event_type": "message", "role": "assistant", "content": None},
        {"event_type": "tool_call", "call_id": "c1", "tool_name": "exec_shell", "parsed_arguments": None,
         "raw_arguments": "{not json"},
        {"event_type": "tool_result", "call_id": "c1", "status": "error", "output": {"why": "bad"}},
        {"event_type": "message", "role": "tool", "content": "echo of the result"},
        {"event_type": "runner", "name": "provider_retry", "detail": "attempt 0 failed"},
        {"event_type": "message", "role": "assistant", "content": "final"},
        {"event_type": "final_output", "content": "final"},
    ]
    row = run_answer("blake3:x", {"trace": trace})
    assert (row["final_response"], row["turns"], row["tool_calls"]) == ("final", 2, 1)
    kinds = [(m["kind"], m["turn"]) for m in row["messages"]]
    assert kinds == [("message", 0), ("message", 1), ("tool_call", 1), ("tool_result", 1), ("runner", 1),
                     ("message", 2)]
    assert row["messages"][2]["tool_arguments"] == "{not json"  # unparsable arguments kept as sent
    assert row["messages"][3]["tool_name"] == "exec_shell" and json.loads(row["messages"][3]["tool_result"]) == {
        "why": "bad"}
    blank = {"trace": [{"event_type": "final_output", "content": "  "}]}
    assert run_answer("blake3:y", blank)["final_response"] is None
    assert run_answer("blake3:z", None) == {"artifact_id": "blake3:z", "final_response": None, "turns": 0,
                                            "tool_calls": 0, "messages": []}


def test_an_openclaw_runs_turns_and_tool_calls_are_unknown_not_0() -> None:
    """OpenClaw runs its own agent loop in its container: the trace holds none of its model replies or tool calls
    (only runner events and each turn's final answer). Before session 60 `claw query` said turns 0, tool_calls 0 for
    an agent that had written three files with its `write` tool."""
    trace = [{"event_type": "runner", "name": "agent_invoked", "detail": None},
             {"event_type": "final_output", "content": "Done: files written."}]
    row = run_answer("blake3:oc", {"identity": {"runner_type": "openclaw"}, "trace": trace})
    assert (row["final_response"], row["turns"], row["tool_calls"]) == ("Done: files written.", None, None)
    assert run_answer("blake3:lp", {"identity": {"runner_type": "llm_probe"}, "trace": trace})["tool_calls"] == 0


def test_a_cache_file_of_an_older_version_is_removed_when_its_successor_is_written(
        claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    """The answers cache is renamed when what it caches changes (runs.v2.parquet: OpenClaw's turns NULL); the file of
    the version before holds every answer read so far (final responses, whole conversations) and nothing reads it."""
    standin.script("*", text("four"))
    assert claw.build()[0] == 0
    store = Path(env["CLAW_STORE"])
    answers = cache_path(store / "manifest", "runs").parent
    answers.mkdir(parents=True)
    older = [answers / "runs.parquet", answers / "judgements.parquet"]
    for path in older:
        path.write_bytes(b"PAR1 an older claw's cache")
    assert {r["final_response"] for r in _query(store, "select final_response from runs")} == {"four"}
    assert cache_path(store / "manifest", "runs").exists()
    assert not older[0].exists(), "the runs cache of the version before stays on disk forever"
    assert older[1].exists()  # (the judgements cache is rewritten, and its old file removed, when a query reads it)


def test_an_openclaw_run_recorded_before_session_78_gives_its_one_turns_tool_calls() -> None:
    """A run recorded before the runner summed its turns' tool calls: with one turn started, its observable summary
    (the last turn's `meta.toolSummary`) is the whole run's; with two, the sum is not known."""
    def artifact(steps: list[str], calls: Any) -> dict[str, Any]:
        meta = {"invocations": [{"step": s} for s in steps],
                "observable_summary": {"tool_summary": {"calls": calls, "tools": ["write"]}}}
        return {"identity": {"runner_type": "openclaw"}, "runner_metadata": {"openclaw": {"metadata": meta}}}

    assert run_answer("blake3:a", artifact(["validate", "turn1"], 2))["tool_calls"] == 2
    assert run_answer("blake3:b", artifact(["validate", "turn1", "turn2"], 2))["tool_calls"] is None
    assert run_answer("blake3:c", artifact(["validate", "turn1"], "2"))["tool_calls"] is None
    summed = artifact(["validate", "turn1", "turn2"], 1)
    summed["runner_metadata"]["openclaw"]["metadata"]["tool_calls"] = 3
    assert run_answer("blake3:d", summed)["tool_calls"] == 3
