"""Provider numbers are input: each malformed reply fails its run clearly, is not cached, is retried by the
next build; a good answer whose usage breaks the bounds is kept with its tokens and cost unknown (never 0, never
paid for again); `claw query` keeps working on that store (real `claw` processes, the stand-in server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from clawstore.values.canonical import canonical_json
from tests.hostile.attack import forge_run_record, run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

BUILD = ("build", "--suite", "main", "--run-profile", "rp")

# a good answer whose usage breaks the bounds -> the field its `usage_rejected` must name
BAD_USAGE: dict[str, tuple[dict[str, Any], str]] = {
    "completion_tokens 1e30": (text("4", usage={"completion_tokens": 1e30}), "usage.completion_tokens"),
    "prompt_tokens -5": (text("4", usage={"prompt_tokens": -5}), "usage.prompt_tokens"),
    "total_tokens as a string": (text("4", usage={"total_tokens": "12"}), "usage.total_tokens"),
    "cached tokens 1e12": (text("4", usage={"prompt_tokens_details": {"cached_tokens": 10**12}}),
                           "usage.prompt_tokens_details.cached_tokens"),
    'cost "NaN"': (text("4", usage={"cost": "NaN"}), "usage.cost"),
    'cost "0.5"': (text("4", usage={"cost": "0.5"}), "usage.cost"),
    "cost -1e9": (text("4", usage={"cost": -1e9}), "usage.cost"),
    "cost 1e300": (text("4", usage={"cost": 1e300}), "usage.cost"),
}

# malformed reply -> the field the failure must name
BAD_REPLIES: dict[str, tuple[dict[str, Any], str]] = {
    # JSON has no NaN or Infinity (Python's parser takes them): refused as the body is read, wherever they
    # are. In a field nothing checked, one made the run's record unwritable: a paid run failed, and was
    # paid again at every build.
    "cost NaN (bare JSON)": (text("4", usage={"cost": float("nan")}), "NaN is not a JSON number"),
    "cost Infinity (bare JSON)": (text("4", usage={"cost": float("inf")}), "Infinity is not a JSON number"),
    "NaN where nothing checks": ({"body": {"choices": [{"message": {"role": "assistant", "content": "4"},
                                                        "logprobs": float("nan")}]}}, "NaN is not a JSON number"),
    "a number too large for a float": (
        {"raw": '{"choices": [{"message": {"role": "assistant", "content": "4"}}], "x": 1e999}'}, "1e999 is too large"),
    "content 12345": (text(12345), "choices[0].message.content"),  # type: ignore[arg-type]
    "content 12345 beside a bad usage": (text(12345, usage={"cost": "0.5"}),  # type: ignore[arg-type]
                                         "choices[0].message.content"),
    "content a list": (text(["4"]), "choices[0].message.content"),  # type: ignore[arg-type]
    "content null without tool calls": ({"content": None}, "choices[0].message.content"),
    "tool_calls a string": ({"body": {"choices": [{"message": {"role": "assistant", "content": "4",
                                                               "tool_calls": "rm -rf /"}}]}},
                            "choices[0].message.tool_calls"),
}


def _query(root: Path, sql: str) -> tuple[Any, str]:
    done = run_claw(root, "query", sql, "--format", "json")
    assert done.code == 0 and "Traceback" not in done.stderr, done
    return json.loads(done.stdout), done.stderr


def _build_each_attack(workspace: Workspace, standin: StandIn, replies: dict[str, Any]) -> tuple[dict[str, str], Any]:
    """One build, one model per attack (and one that behaves): every attack in the same real processes."""
    attacks = {f"m{i:02d}": attack for i, attack in enumerate(sorted(replies))}
    workspace.suite("main", [*attacks, "good"])
    for model, attack in attacks.items():
        standin.script(f"vendor/{model}", replies[attack][0])
    return attacks, run_claw(workspace.root, *BUILD)


def test_each_bad_provider_number_fails_its_run_and_is_retried(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    attacks, first = _build_each_attack(ws, standin, BAD_REPLIES)
    assert first.code == 1 and "Traceback" not in first.stdout + first.stderr, first
    rows = [line.split() for line in first.stdout.splitlines() if line.startswith(("m", "good "))]
    assert sorted((row[0], "fail" in row and "provider_error" in row) for row in rows) == sorted(
        [(model, True) for model in attacks for _ in "ab"] + [("good", False)] * 2), first.stdout
    runs, _ = _query(ws.root, "select model_id, status, error_message, cost_usd from runs order by 1, 2")
    assert len(runs) == 2 * len(attacks) + 2
    assert all(r["cost_usd"] is None or 0 <= r["cost_usd"] < 1 for r in runs)
    assert [r["status"] for r in runs if r["model_id"] == "good"] == ["success"] * 2
    for model, attack in attacks.items():
        failed = [r for r in runs if r["model_id"] == model]
        field = BAD_REPLIES[attack][1]
        assert [r["status"] for r in failed] == ["provider_error"] * 2, (attack, failed)
        assert all("malformed reply from" in r["error_message"] and field in r["error_message"] for r in failed), (
            attack, failed)
    # not cached: once the provider behaves, the next build sends the failed runs again, and only them
    standin.reset()
    second = run_claw(ws.root, *BUILD)
    assert second.code == 0, second
    assert sorted(r["model"] for r in standin.requests) == sorted(f"vendor/{model}" for model in attacks for _ in "ab")


def test_an_answer_whose_usage_breaks_the_bounds_is_kept_with_its_cost_unknown(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    attacks, first = _build_each_attack(ws, standin, BAD_USAGE)
    assert first.code == 0 and "Traceback" not in first.stdout + first.stderr, first
    for model in attacks:  # the build's line says the cost is unknown, never 0
        lines = [line for line in first.stdout.splitlines() if line.startswith(f"{model} ")]
        assert len(lines) == 2 and all(line.split()[4] == "success" and line.split()[-1] == "?" for line in lines), \
            first.stdout
    assert f"({2 * len(attacks)} of {2 * len(attacks) + 2} unknown)" in first.stdout, first.stdout
    runs, _ = _query(ws.root, "select model_id, status, cost_usd, cost_source, input_tokens, output_tokens, record_id "
                              "from runs order by 1, 2")
    assert [r["status"] for r in runs] == ["success"] * (2 * len(attacks) + 2)
    store = Store(Path(env["CLAW_STORE"]))
    for run in runs:
        record = store.get_json(run["record_id"])
        usage = store.get_json(record["outputs"]["artifact"])["usage"]
        if run["model_id"] == "good":
            assert run["cost_source"] == "reported" and run["input_tokens"] > 0 and "usage_rejected" not in usage
            continue
        field = BAD_USAGE[attacks[run["model_id"]]][1]
        # none of its numbers believed: tokens and cost unknown (NULL), and the artifact says why
        assert (run["cost_usd"], run["cost_source"], run["input_tokens"], run["output_tokens"]) == (
            None, "unknown", None, None), run
        assert record["metrics"]["cost_source"] == "unknown" and record["metrics"]["cost_usd"] is None
        assert usage["usage_rejected"].startswith(field + ":") and usage["cost_source"] == "unknown", usage
        assert usage["cost_usd"] is None and usage["raw_provider_usage"] == []
    report = run_claw(ws.root, "report", "--suite", "main", "--run-profile", "rp")
    assert report.code == 0, report
    rows = [line.split() for line in report.stdout.splitlines() if line.split()[:1] == ["m00"]]
    assert rows and all("?" in row for row in rows), report.stdout
    # kept: the next build sends nothing (each answer was paid for once)
    standin.reset()
    second = run_claw(ws.root, *BUILD)
    assert second.code == 0 and standin.requests == [], (second, standin.requests)


def test_a_judgement_whose_usage_breaks_the_bounds_is_kept_with_its_cost_unknown(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    eval_profile(ws, repetitions=1)
    bad = judge_reply(7.0)
    bad["usage"] = {"cost": "0.5"}
    standin.script(JUDGE, bad)
    first = run_claw(ws.root, *BUILD, "--evaluation-profile", "ev")
    assert first.code == 0 and "Traceback" not in first.stdout + first.stderr, first
    rows, _ = _query(ws.root, "select status, overall_score, cost_usd, cost_source, input_tokens, record_id "
                              "from judgements")
    assert len(rows) == 4 and all(
        (r["status"], r["overall_score"], r["cost_usd"], r["cost_source"], r["input_tokens"]) ==
        ("success", 7.0, None, "unknown", None) for r in rows), rows
    store = Store(Path(env["CLAW_STORE"]))
    judgement = store.get_json(store.get_json(rows[0]["record_id"])["outputs"]["judgement"])
    assert judgement["usage"]["usage_rejected"].startswith("usage.cost:") and judgement["usage"]["cost_usd"] is None
    assert any("usage not believed" in warning for warning in judgement["warnings"]), judgement["warnings"]
    standin.reset()  # kept: asked once
    assert run_claw(ws.root, *BUILD, "--evaluation-profile", "ev").code == 0 and standin.requests == []


def test_a_forged_record_is_named_and_left_out_of_the_query(ws: Workspace, standin: StandIn,  # noqa: F811
                                                             env: dict[str, str]) -> None:  # noqa: F811
    assert run_here(ws.root, *BUILD).code == 0  # (prepares the record forged: in this process)

    def forge(record: dict[str, Any]) -> bytes:
        record["metrics"]["output_tokens"] = 1e30  # what an older claw stored from a hostile reply
        return canonical_json(record)

    forged = forge_run_record(Path(env["CLAW_STORE"]), forge)
    runs, warning = _query(ws.root, "select count(*) as n from run_history")
    assert forged in warning and "metrics.output_tokens" in warning and "left out" in warning
    assert runs == [{"n": 7}]  # 4 of the first build + 3 of the forged log: only the bad record is out
    assert _query(ws.root, "select count(*) as n from runs")[0] == [{"n": 4}]
