"""JSON nested a hundred thousand levels deep, from everywhere claw reads JSON it did not write: a model's
answer and tool calls, a judge's reply, an agent's output, a remote's listing, an archive's records.

Python's parser gives up on such a document with RecursionError, which escaped every `except
ValueError` around it: a build recorded the node as failed with "RecursionError" (and retried, paying
again, at the next build) instead of an invalid answer; a pull or an archive import ended in a
traceback. Each is now malformed JSON like any other (clawstore/values/jsontext.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clawstore.evaluate.evidence import visible_text
from clawstore.evaluate.judge_contract import JudgeContractError, extract_json_object
from clawstore.evaluate.judge_evidence import content_type
from clawstore.runners.openclaw.evidence import find_payload
from clawstore.testing.standin import StandIn, malformed, text, tool_call
from clawstore.values.jsontext import REPLY_MAX_DEPTH, first_json_object, json_objects_in, loads_reply
from tests.config.workspace_builder import _claw_command
from tests.faults.forge import Forgery
from tests.hostile.conftest import RUNS, User
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 (fixtures)
from tests.support.workspace import Workspace, standard

DEEP = "[" * 100_000
DEEP_OBJECT = '{"answer": ' + DEEP


def _one_line_refusal(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert what in done.stderr, done.stderr


def test_deep_json_in_a_model_or_agent_answer_is_just_text() -> None:
    assert content_type(DEEP) == "text"
    assert first_json_object(DEEP_OBJECT) is None
    assert find_payload(DEEP_OBJECT + "}") is None
    assert visible_text(DEEP_OBJECT + "}") == (DEEP_OBJECT + "}", False)
    with pytest.raises(JudgeContractError):
        extract_json_object(DEEP_OBJECT)


def test_a_reply_built_to_make_the_object_search_quadratic_is_searched_in_bounded_time() -> None:
    # Objects nested 150 deep that never close, each level a thousand items long: the parse tried at
    # every brace read to the end of its block. 2.7 MB took 18 s (a 64 MB reply: hours).
    text = "".join('{"a":[' + "1," * 1000 for _ in range(150)) * 9
    started = time.monotonic()
    assert first_json_object(text) is None
    assert time.monotonic() - started < 8
    assert list(json_objects_in('a {"x": {"y": 1}} b {not json} {"z": 2}')) == [{"x": {"y": 1}}, {"y": 1}, {"z": 2}]


def test_a_deep_provider_reply_is_an_invalid_answer_not_a_crash(ws: Workspace, claw: Claw,  # noqa: F811
                                                                 standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", malformed(DEEP))
    code, out, _ = claw.build("--output", "json")
    row = json.loads(out)["rows"][0]
    assert code == 1 and row["status"] == "provider_error", row
    assert "Recursion" not in out


def test_a_deep_tool_call_is_an_unparsed_call_not_a_crash(ws: Workspace, claw: Claw,  # noqa: F811
                                                          standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": DEEP}}
    standin.script("vendor/m1", {"body": {"id": "x", "choices": [{"index": 0, "finish_reason": "tool_calls",
                                                                   "message": {"role": "assistant", "content": None,
                                                                               "tool_calls": [call]}}]}})
    code, out, _ = claw.build("--output", "json")
    assert "Recursion" not in out and json.loads(out)["rows"][0]["status"] != "failed", out[-2000:]


# Between the depth Python's parser reaches and the one its encoder reaches deeper in the stack: tool
# call arguments that parsed, then failed the run as "RecursionError" when its record was written. The
# tokens were paid, the build showed them as 0, and the next build paid for the run again.
NEAR_THE_LIMIT = range(900, 1000, 10)


def test_a_reply_nested_deeper_than_any_real_one_is_malformed() -> None:
    assert loads_reply("[" * REPLY_MAX_DEPTH + "]" * REPLY_MAX_DEPTH) is not None
    with pytest.raises(ValueError, match="levels deep"):
        loads_reply("[" * (REPLY_MAX_DEPTH + 1) + "]" * (REPLY_MAX_DEPTH + 1))
    assert loads_reply(json.dumps({"text": "[{" * 5000})) == {"text": "[{" * 5000}  # brackets in a string
    deep = '{"a": ' + "[" * 980 + "]" * 980 + "}"
    assert list(json_objects_in(f"log {deep} then {{\"ok\": 1}}")) == [{"ok": 1}]


def test_tool_calls_nested_near_the_parsers_limit_are_unparsed_calls_not_failed_runs(
        ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    tools = {"llm_probe": {"tools": ["write_file", "read_file"]}}
    ws.case("tooly", "Read it.", input={"messages": [{"role": "user", "content": "Read it."}], "context": tools})
    models = [f"m{depth}" for depth in NEAR_THE_LIMIT]
    ws.suite("main", models, case_selection={"include_case_ids": ["tooly"]})
    for depth, model in zip(NEAR_THE_LIMIT, models, strict=True):
        arguments = '{"path": ' + "[" * depth + "]" * depth + "}"
        standin.script(f"vendor/{model}", tool_call("read_file", arguments), text("done"))
    code, out, _ = claw.build("--output", "json")
    rows = json.loads(out)["rows"]
    assert code == 0 and [row["status"] for row in rows] == ["success"] * len(models), out[-2000:]
    assert all(row["cost_usd"] for row in rows)
    assert claw.build("--output", "json")[0] == 0 and len(standin.requests) == 2 * len(models)  # none again


def test_a_deep_listing_on_a_remote_is_refused_in_one_line(alice: User, tmp_path: Path) -> None:
    a = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=a.root)
    remote = tmp_path / "share" / "remote"
    alice.here("push", str(remote), cwd=a.root)
    listing = sorted((remote / "packs").glob("*.ids"))[0]
    listing.write_text(DEEP)
    b = standard(tmp_path / "bob")
    done = subprocess.run([*_claw_command(), "pull", str(remote)], cwd=b.root, env=alice.env, capture_output=True,
                          text=True, timeout=120)
    _one_line_refusal(done, "is not JSON")


def test_an_archive_entry_pointing_at_a_deep_record_is_refused_in_one_line(ws: Workspace, claw: Claw,  # noqa: F811
                                                                           tmp_path: Path) -> None:
    code, _, err = claw("build", *RUNS)
    assert code == 0, err
    exported = tmp_path / "good.claw"
    assert claw("archive", "export", *RUNS, "-o", str(exported))[0] == 0
    forgery = Forgery.read(exported)
    forgery.manifest["actions"][forgery.add({"input": 1})] = forgery.add(DEEP.encode())
    forgery.resign()
    forged = forgery.write(tmp_path / "deep.claw")
    done = subprocess.run([*_claw_command(), "archive", "import", str(forged), "--store", str(tmp_path / "target")],
                          cwd=ws.root, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    _one_line_refusal(done, "its record is not a record")
