"""A lone surrogate escape (`"\\ud800"`) is valid JSON that no UTF-8 text can hold. From a provider it
failed the run it came in (already paid for) when its record was written, and the next build paid
again; in a stored record (pulled or imported from a hostile store) it stopped `claw query` indexing.
Now the reply (and an agent's text unwrapped from its JSON) keeps a U+FFFD in its place, and the
manifest shows one. Real `claw` processes, the stand-in server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.evaluate.evidence import visible_text
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import Outcome, run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

BUILD = ("build", "--suite", "main", "--run-profile", "rp")
# A high and a low surrogate alone, then a pair (one character, kept), then an escaped backslash before
# "ud800" (plain text, kept).
REPLY = "high \ud800, low \udc00, pair \U0001f600, text \\ud800"
KEPT = "high \ufffd, low \ufffd, pair \U0001f600, text \\ud800"


def _clean(outcome: Outcome) -> bool:
    return "Traceback" not in outcome.stdout + outcome.stderr


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def test_a_reply_holding_lone_surrogates_is_kept_with_replacement_characters(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    standin.set_default(text(REPLY))  # (the stand-in writes JSON with escapes: "\ud800")
    first = run_claw(ws.root, *BUILD)
    assert first.code == 0 and _clean(first), first
    assert len(standin.requests) == 4
    store = Store(Path(env["CLAW_STORE"]))
    query = run_claw(ws.root, "query", "select record_id, status from runs", "--format", "json")
    assert query.code == 0 and _clean(query), query
    runs = json.loads(query.stdout)
    assert [run["status"] for run in runs] == ["success"] * 4
    for run in runs:
        outputs = store.get_json(run["record_id"])["outputs"]
        # the answer, with U+FFFD where each lone surrogate was
        assert KEPT in _strings(store.get_json(outputs["artifact"])), outputs
    again = run_claw(ws.root, *BUILD)
    assert again.code == 0 and len(standin.requests) == 4, again  # stored: not paid for again
    for command in (("report", "--suite", "main", "--run-profile", "rp"),
                    ("view", "--suite", "main", "--run-profile", "rp", "-o", "page.html"), ("fsck",)):
        done = run_claw(ws.root, *command)
        assert done.code == 0 and _clean(done), (command, done)


def test_a_stored_record_holding_a_lone_surrogate_is_indexed_with_a_replacement_character(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    assert run_claw(ws.root, *BUILD).code == 0
    store = Store(Path(env["CLAW_STORE"]))
    logs = sorted((Path(env["CLAW_STORE"]) / "builds").glob("*.json"))
    log = json.loads(logs[0].read_text())
    node = next(n for n in log["nodes"] if n["kind"] == "run")
    record = store.get_json(node["record"])
    record["error"] = {"code": "forged", "message": "lone \ud800 surrogate"}
    # As a hostile store's record arrives: JSON with the escape (claw never writes one).
    forged = store.put_bytes(json.dumps(record, sort_keys=True, separators=(",", ":")).encode("ascii"))
    assert b"\\ud800" in store.get_bytes(str(forged))
    node["record"] = str(forged)
    log["build_id"] = log["build_id"][:-4] + "beef"
    (logs[0].parent / f"{log['build_id']}.json").write_text(json.dumps(log))
    done = run_claw(ws.root, "query", "select error_message from run_history where error_code = 'forged'",
                    "--format", "json")
    assert done.code == 0 and _clean(done), done
    assert json.loads(done.stdout) == [{"error_message": "lone \ufffd surrogate"}], done.stdout


@pytest.mark.parametrize("output", ['{"text": "agent \\ud800 said"}',
                                    'log line\n{"finalAssistantVisibleText": "agent \\ud800 said", "meta": {}}'])
def test_text_unwrapped_from_an_agents_json_holds_no_lone_surrogate(output: str) -> None:
    # (the visible text goes into checks and the judge's input document, hashed as UTF-8)
    assert visible_text(output) == ("agent \ufffd said", False)
