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
from clawstore.store.headdoc import inline_nodes, write_head
from clawstore.testing.standin import StandIn, text
from tests.hostile.attack import Outcome, forge_run_record, run_claw
from tests.support.claw import Claw, env, ws  # noqa: F401 - fixtures
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
    assert Claw(ws.root)(*BUILD)[0] == 0  # (preparing: in process, tests/support/claw.py)

    def forge(record: dict[str, Any]) -> bytes:
        record["error"] = {"code": "forged", "message": "lone \ud800 surrogate"}
        # As a hostile store's record arrives: JSON with the escape (claw never writes one).
        return json.dumps(record, sort_keys=True, separators=(",", ":")).encode("ascii")

    forged = forge_run_record(Path(env["CLAW_STORE"]), forge)
    assert b"\\ud800" in Store(Path(env["CLAW_STORE"])).get_bytes(forged)
    done = run_claw(ws.root, "query", "select error_message from run_history where error_code = 'forged'",
                    "--format", "json")
    assert done.code == 0 and _clean(done), done
    assert json.loads(done.stdout) == [{"error_message": "lone \ufffd surrogate"}], done.stdout


@pytest.mark.parametrize("output", ['{"text": "agent \\ud800 said"}',
                                    'log line\n{"finalAssistantVisibleText": "agent \\ud800 said", "meta": {}}'])
def test_text_unwrapped_from_an_agents_json_holds_no_lone_surrogate(output: str) -> None:
    # (the visible text goes into checks and the judge's input document, hashed as UTF-8)
    assert visible_text(output) == ("agent \ufffd said", False)


def test_a_page_showing_a_stored_answer_with_a_lone_surrogate_is_written(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    # A campaign head whose run's answer holds one, as a pull of a hostile store (kept apart, shown by
    # `claw view`) brings it: the page's data keeps it as a JSON escape (valid UTF-8; a browser shows
    # U+FFFD), and the page is written.
    standin.set_default(text("the answer"))
    assert Claw(ws.root)(*BUILD)[0] == 0  # (preparing: in process, tests/support/claw.py)
    store = Store(Path(env["CLAW_STORE"]))
    ref = "campaigns/main__rp__none"
    head = inline_nodes(store.get_json(store.get_ref(ref)), store.get_json)
    node = next(n for n in head["nodes"] if n["kind"] == "run" and n.get("record"))
    record = store.get_json(node["record"])
    artifact = json.dumps(store.get_json(record["outputs"]["artifact"]), sort_keys=True)
    assert '"the answer"' in artifact
    record["outputs"]["artifact"] = str(store.put_bytes(artifact.replace('"the answer"', '"the \\ud800 answer"')
                                                       .encode("ascii")))
    node["record"] = str(store.put_json(record))
    node["record_doc"]["outputs"] = record["outputs"]  # (the head's planning view of it, which the page reads)
    store.set_ref(ref, write_head(store, {k: v for k, v in head.items() if k != "nodes"}, head["nodes"]))
    for command in (("view", "--suite", "main", "--run-profile", "rp", "-o", "page.html"),
                    ("report", "--suite", "main", "--run-profile", "rp"), ("query", "select * from runs"),
                    ("fsck",)):
        done = run_claw(ws.root, *command)
        assert done.code == 0 and _clean(done), (command, done)
    shard = (ws.root / "page.html.d" / "details-00000.js").read_text(encoding="utf-8")  # the run's details
    assert '"the \\ud800 answer"' in shard
