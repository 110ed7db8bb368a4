"""Bad input to build/status/explain: one line, exit 2, nothing sent, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace


@pytest.mark.parametrize("args, needle", [
    (("build", "--suite", "nope", "--run-profile", "rp"), "nope"),
    (("build", "--suite", "main", "--run-profile", "missing"), "missing"),
    (("status", "--suite", "main", "--run-profile", "rp", "--case", "no_such_case"), "no_such_case"),
    (("explain", "--suite", "main", "--run-profile", "rp", "--model", "no_such_model"), "no_such_model"),
    (("build", "--suite", "main", "--run-profile", "rp", "--max-concurrency", "0"), "max-concurrency"),
])
def test_bad_references_are_one_line_exit_2(ws: Workspace, claw: Claw, standin: StandIn, args, needle) -> None:
    proc = claw.popen(*args)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert needle in err and "Traceback" not in err
    assert standin.requests == []


def test_missing_api_key_fails_before_any_request(ws: Workspace, claw: Claw, standin: StandIn,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"claw: error: environment variable OPENROUTER_API_KEY is not set (API key for {standin.base_url})"]
    assert standin.requests == []
    assert not list((Path(os.environ["CLAW_STORE"]) / "builds").glob("*.json"))


def test_broken_case_of_the_campaign_is_a_config_error(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.edit("cases/alpha/test.yaml", lambda d: d["runner"].update(type="gpt"))
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "cases/alpha/test.yaml" in err and "runner.type" in err and "Traceback" not in err
    assert standin.requests == []


def test_a_model_on_its_own_endpoint(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A suite model may name another OpenAI-compatible server; no key needed; the URL is in the key."""
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=standin.base_url + "/"))
    code, out, err = claw.build()
    assert code == 0, err
    request = standin.requests[0]
    assert request["authorization"] is False
    ws.edit("suites/main.yaml", lambda d: d["models"][0].update(base_url=standin.url + "/other/v1"))
    code, out, _ = claw("explain", "--suite", "main", "--run-profile", "rp")
    assert "model.endpoint.base_url" in out
