"""Out of credit at a provider batch: a final 402 (no Retry-After) answering a batch's file upload or its creation says
the provider will not serve this key, as a chat request's does (tests/builder/test_out_of_credit.py). Before session 76
it stopped nothing: the build's error ended it with no summary of what was sent and what was not (or, for a batch
refused at its creation, its document stood for its nodes until a later build created it). Now nothing more goes to that
endpoint in this build: no other batch, no direct request; the build ends with the one 'out of credit' line naming the
endpoint and what was not sent, exit 1, and the next build, the credit topped up, sends exactly that."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clawstore.builder import batch_doc
from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.builder.test_out_of_credit import OUT_OF_CREDIT
from tests.support.claw import Claw
from tests.support.judging import JUDGE, build, eval_profile, judge_reply, judge_requests
from tests.support.workspace import Workspace


def _tool_case(ws: Workspace) -> None:
    """A case whose runs use a tool: they go one by one (a direct request each), never by batch."""
    ws.case("tools", "Use the tools.", input={"messages": [{"role": "user", "content": "Use the tools."}],
                                              "context": {"llm_probe": {"tools": ["read_file"]}}})


@pytest.mark.parametrize("refuse_after", [0, 1], ids=["upload_refused", "creation_refused"])
def test_a_final_402_answering_a_batch_stops_every_request_to_its_endpoint(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch, refuse_after: int) -> None:
    """3 cases x 2 models: 4 runs by batch (one file per model: two submissions), 2 with a tool one by one. The first
    submission is refused: the second is not made and the two direct runs not sent."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    _tool_case(ws)
    standin.script("*", text("4"))
    standin.batch_settings(refuse_after=refuse_after)
    code, out, err = claw.build("--batch", "--output", "json")
    assert code == 1 and out, out + err
    stats = standin.batch_stats()
    assert stats["refused"] == 1 and stats["batches"] == 0, stats  # nothing asked after the refusal
    assert stats["files"] == refuse_after
    assert standin.requests == []  # no run sent one by one either
    report = json.loads(out)
    stopped = report["stopped"]
    assert stopped is not None and standin.base_url in stopped and "402" in stopped, report
    assert "not sent 6 runs" in stopped, stopped
    print(stopped)  # the 4 of the batches and the 2 one by one
    assert batch_doc.pending(Store(Path(os.environ["CLAW_STORE"]))) == [], "a refused batch stands for nothing"

    # credit topped up: the next build sends what was not sent, and nothing twice
    standin.batch_settings(refuse_after=None)
    code, out, err = claw.build("--batch", "--wait", "--output", "json")
    assert code == 0, out + err
    stats = standin.batch_stats()
    assert stats["batches"] == 2 and stats["lines"] == 4, stats
    assert len(standin.requests) == 2, standin.requests  # the two tool runs, one request each (answered at once)


def test_judgements_refused_by_batch_are_not_sent_one_by_one(ws: Workspace, claw: Claw, standin: StandIn,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs built, the judgements' batch refused at its upload: none of the 12 judgements is sent one by one (the
    judge's endpoint is the runs': out of credit); the next build, its credit topped up, submits the 12, only them."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    standin.script("*", text("4"))
    assert claw.build()[0] == 0
    runs = len(standin.requests)
    standin.batch_settings(refuse_after=0)
    code, report = build(claw, "--batch")
    assert code == 1, report
    assert judge_requests(standin) == 0 and len(standin.requests) == runs
    assert standin.batch_stats()["refused"] == 1
    assert standin.base_url in report["stopped"] and "not sent 12 judgements" in report["stopped"], report["stopped"]
    standin.batch_settings(refuse_after=None)
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}, (report["failures"], report["stopped"])
    assert standin.batch_stats()["lines"] == 12 and judge_requests(standin) == 0


def test_batch_lines_answered_402_stop_the_direct_requests_to_their_endpoint(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batches made, their lines answered HTTP 402 inside the output (the provider out of credit as it ran them):
    the 4 runs they stood for fail with it, and the 2 runs that go one by one are not sent (before: sent, 2 402s)."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    _tool_case(ws)
    standin.script("*", OUT_OF_CREDIT)
    code, out, err = claw.build("--batch", "--wait", "--output", "json")
    assert code == 1, out + err
    assert standin.batch_stats()["lines"] == 4 and standin.requests == [], [r["model"] for r in standin.requests]
    report = json.loads(out)
    assert len([f for f in report["failures"] if "402" in f["reason"]]) == 4, report["failures"]
    assert standin.base_url in (report["stopped"] or "") and "not sent 2 runs" in report["stopped"], report
