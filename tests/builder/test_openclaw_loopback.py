"""`claw build` of an OpenClaw case whose model server is on this machine's loopback (here the stand-in on 127.0.0.1),
the containers on the engine's default network: each run failed only after OpenClaw's retries (106 s a turn), its
cost `?`. It now fails at once, no container started, and the summary, `claw report` and `claw query` say why and that
it cost 0; once CLAW_OPENCLAW_NETWORK=host is set, the next build runs it (the failure is retried, not kept)."""

from __future__ import annotations

import json

import pytest

from clawstore.testing.standin import StandIn
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.openclaw.conftest import FakeDocker
from tests.support.claw import Claw
from tests.support.workspace import Workspace

CODE = "openclaw_endpoint_unreachable"


def test_a_loopback_model_server_fails_each_run_at_once_and_says_the_fix(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_OPENCLAW_NETWORK", raising=False)
    code, out, err = claw.build("--model", "m1", "--case", "oc_a", "--output", "json")
    assert code == 1 and "Traceback" not in err, out + err
    assert docker.calls("run") == [] and standin.requests == []
    row = rows(out)[("m1", "oc_a")]
    assert row["run"] == "fail" and row["status"] == "failed", row
    assert CODE in out + err and "CLAW_OPENCLAW_NETWORK=host" in out + err, out + err

    code, query, err = claw("query", "select error_code, cost_usd, cost_source from runs", "--format", "json")
    assert code == 0, query + err
    assert json.loads(query) == [{"error_code": CODE, "cost_usd": 0.0, "cost_source": "priced"}], query

    code, report, err = claw("report", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and CODE in report, report + err
    line = next(ln for ln in report.splitlines() if "oc_a" in ln)
    assert "?" not in line, report

    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    code, out, err = claw.build("--model", "m1", "--case", "oc_a", "--output", "json")
    assert code == 0, out + err
    assert rows(out)[("m1", "oc_a")]["run"] == "exec" and len(docker.calls("run")) >= 1


def test_plan_and_dry_run_warn_before_anything_runs(oc: Workspace, claw: Claw, docker: FakeDocker,  # noqa: F811
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check on the configs and the machine's setting, no engine asked: `claw plan`, `build --dry-run`,
    `status` and `explain` say it once per endpoint; with CLAW_OPENCLAW_NETWORK=host, or an endpoint off loopback,
    they do not."""
    monkeypatch.delenv("CLAW_OPENCLAW_NETWORK", raising=False)
    campaign = ("--suite", "main", "--run-profile", "rp")
    for command in (("plan", *campaign), ("build", *campaign, "--dry-run"), ("status", *campaign),
                    ("explain", *campaign)):
        code, out, err = claw(*command)
        assert "Traceback" not in err, out + err
        said = [line for line in err.splitlines() if line.startswith("warning:") and CODE in line]
        assert len(said) == 1 and "CLAW_OPENCLAW_NETWORK=host" in said[0] and "m1, m2" in said[0], (command, err)
        assert docker.calls("run") == []
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "host")
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and CODE not in err, out + err
    monkeypatch.delenv("CLAW_OPENCLAW_NETWORK")
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://10.1.2.3:8000/v1")
    code, out, err = claw("plan", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and CODE not in err, out + err
