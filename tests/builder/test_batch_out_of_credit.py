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


STATUS = ("batch", "status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev", "--output", "json")


def _judged_once(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch,
                 judge: dict[str, object]) -> None:
    """4 runs built one by one; their 12 judgements not yet made (the judge answers `judge`)."""
    monkeypatch.setenv("CLAW_BATCH_POLL_S", "0.1")
    eval_profile(ws)
    standin.script(JUDGE, judge)
    assert claw.build()[0] == 0


def test_batch_status_stops_at_a_re_creation_answered_402_and_says_so(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build died between recording the judgements' batch and creating it; `claw batch status` creates it, and the
    provider answers a final 402. Before session 76's fix the command noted nothing: it said nothing of it, its batch
    stood for the 12 judgements still, and every `batch status` after asked again (with --wait: for ever)."""
    doc = _recorded_not_created(ws, claw, standin, monkeypatch)
    assert doc.batch_id is None and len(doc.covered) == 12
    standin.batch_settings(refuse_after=1)  # the file is there: its batch's creation is refused
    code, out, err = claw(*STATUS)
    assert code == 1 and out, out + err
    shown = json.loads(out)
    assert shown["pending"] == 0 and shown["batches"] == [], shown  # not made: it stands for nothing
    assert standin.base_url in (shown["stopped"] or "") and "402" in shown["stopped"], shown
    assert claw(*STATUS, "--wait")[0] == 0  # nothing left to ask (before: --wait asked again every poll, for ever)
    assert standin.batch_stats()["refused"] == 1 and judge_requests(standin) == 0
    standin.batch_settings(refuse_after=None)  # credit topped up: the next build sends the 12, once
    code, report = build(claw, "--batch", "--wait")
    assert code == 0 and {r["score"] for r in report["rows"]} == {7.0}, report["stopped"]
    assert standin.batch_stats()["batches"] == 1 and judge_requests(standin) == 0


def test_batch_status_says_which_endpoint_answered_its_lines_402(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judgements' batch made, its lines answered HTTP 402 (out of credit as the provider ran them): `claw batch
    status` records the 12 failures and names the endpoint out of credit, as a build's summary does (before: it said
    '12 line(s) recorded' and exit 0, nothing of the 402), and asks nothing one by one."""
    _judged_once(ws, claw, standin, monkeypatch, OUT_OF_CREDIT)
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    standin.batch_settings(delay=0.2)
    code, out, err = claw(*STATUS[:-2], "--wait")
    assert code == 1, out + err
    assert "12 line(s) recorded now" in out and standin.base_url in out and "HTTP 402" in out, out
    assert judge_requests(standin) == 0
    # the line says where nothing more was sent: no build ran (before session 77: "in this build")
    [line] = [line for line in out.splitlines() if line.startswith("out of credit: ")]
    assert "build:" not in line and "Nothing more was sent there while collecting the campaign's batches" in line, line


def test_claw_status_says_which_endpoint_answered_the_lines_it_collects_402(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """`claw status` collects finished batch lines too (with the same refusals): it notes the endpoint out of credit
    (before: nothing), and still exits 0 (it reports; the failures are the judgements' records)."""
    _judged_once(ws, claw, standin, monkeypatch, OUT_OF_CREDIT)
    standin.batch_settings(delay=60)
    assert build(claw, "--batch")[0] == 0
    standin.batch_settings(delay=0)  # finished now
    code, out, err = claw("status", *STATUS[2:])
    assert code == 0, out + err
    assert f"claw: note: out of credit: {standin.base_url}" in err and "HTTP 402" in err, err
    [line] = [line for line in err.splitlines() if line.startswith("claw: note: out of credit: ")]
    assert "build:" not in line and "Nothing more was sent there while collecting the campaign's batches" in line, line
    assert batch_doc.pending(Store(Path(os.environ["CLAW_STORE"]))) == [] and judge_requests(standin) == 0


def test_a_re_creation_refused_with_no_key_set_stops_the_endpoint_under_one_name(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """`$OPENROUTER_BASE_URL` set and no `$OPENROUTER_API_KEY` (no key sent: the default endpoint's key is optional).
    A build died between recording the judgements' batch and creating it; the next `claw build --batch` creates it and
    the provider answers a final 402. Before session 77 the refusal was filed under the key the batch's record keeps
    (none in use) while the judgements ask under the one declared ($OPENROUTER_API_KEY): the same endpoint was asked
    again (a second upload, a second 402) and the summary named it twice, once with a key that is not set."""
    monkeypatch.delenv("OPENROUTER_API_KEY")
    doc = _recorded_not_created(ws, claw, standin, monkeypatch)
    assert doc.batch_id is None and doc.api_key_env is None  # (the key in use: none)
    standin.batch_settings(refuse_after=1)  # the file is there: its batch's creation is refused, and all after it
    code, report = build(claw, "--batch")
    assert code == 1, report
    stopped = report["stopped"] or ""
    assert standin.batch_stats()["refused"] == 1, (standin.batch_stats(), stopped)  # nothing asked after the 402
    assert stopped.count(standin.base_url) == 1 and "$OPENROUTER_API_KEY" not in stopped, stopped
    assert "not sent 12 judgements" in stopped and judge_requests(standin) == 0, stopped


def _recorded_not_created(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch
                          ) -> batch_doc.BatchDoc:
    """Runs judged once, then a `--batch` build of the judgements that dies (Ctrl-C) between recording their batch and
    creating it: the batch's record, pending with no id."""
    from clawstore.providers.batch_api import BatchApi

    _judged_once(ws, claw, standin, monkeypatch, judge_reply(7))
    original = BatchApi.create

    def dies(self: BatchApi, input_file_id: str, metadata: dict[str, str]) -> dict[str, object]:
        raise KeyboardInterrupt

    monkeypatch.setattr(BatchApi, "create", dies)
    assert claw.build("--evaluation-profile", "ev", "--batch")[0] == 130
    monkeypatch.setattr(BatchApi, "create", original)
    [doc] = batch_doc.pending(Store(Path(os.environ["CLAW_STORE"])))
    return doc
