"""An OpenClaw agent that deletes its `workspace/` is recorded with an empty tree (runners/openclaw/runner.py): that
tree goes through everything a run's workspace does — its checks and judge, `claw view`'s diff, an archive's export
and import, and the next build's reuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.builder.test_build_openclaw import docker, oc, rows  # noqa: F401 - the OpenClaw campaign fixtures
from tests.openclaw.conftest import FakeDocker, payload
from tests.support.claw import Claw
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


def test_a_deleted_workspace_is_checked_judged_viewed_archived_and_reused(
        oc: Workspace, claw: Claw, docker: FakeDocker, standin: StandIn,  # noqa: F811
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docker.script(turns=[{"remove": ["workspace"], "payload": payload("done")}])
    eval_profile(oc, repetitions=1)
    standin.script("judge/j1", judge_reply(2))
    code, out, err = claw("build", *CAMPAIGN, "--model", "m1", "--case", "oc_a", "--output", "json")
    assert "Traceback" not in err, out + err
    row = rows(out)[("m1", "oc_a")]
    assert (row["run"], row["status"], row["score"]) == ("exec", "success", 2.0), row  # checked and judged
    code, out, err = claw("query", "select check_id, outcome from checks", "--format", "json")
    assert code == 0 and json.loads(out) == [{"check_id": "report", "outcome": "failed"}], out + err

    page = tmp_path / "page.html"
    code, out, err = claw("view", *CAMPAIGN, "-o", str(page))
    assert code == 0, out + err
    [shard] = (tmp_path / "page.html.d").iterdir()
    [run] = [d for d in json.loads(shard.read_text().split(",", 2)[2].rsplit(")", 1)[0]) if d["case_id"] == "oc_a"]
    assert "--- template/AGENTS.md" in run["workspace_diff"] and "+++ /dev/null" in run["workspace_diff"], run

    archive = tmp_path / "campaign.claw"
    code, out, err = claw("archive", "export", *CAMPAIGN, "-o", str(archive))
    assert code == 0, out + err
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "elsewhere"))  # a fresh store: the archive's alone
    code, out, err = claw("archive", "import", str(archive))
    assert code == 0, out + err
    code, out, err = claw("fsck")
    assert code == 0, out + err

    asked, containers = len(standin.requests), len(docker.calls("run"))
    code, out, err = claw("build", *CAMPAIGN, "--model", "m1", "--case", "oc_a", "--output", "json")
    assert rows(out)[("m1", "oc_a")]["run"] == "reuse", out + err
    assert (len(standin.requests), len(docker.calls("run"))) == (asked, containers)
    code, out, err = claw("query", "select record_id from runs", "--format", "json")
    [record] = [r["record_id"] for r in json.loads(out)]
    tree = json.loads(Store(tmp_path / "elsewhere").get_bytes(record))["outputs"]["workspace"]
    code, out, err = claw("checkout", tree, str(tmp_path / "left"))  # what the agent left: nothing
    assert code == 0 and list((tmp_path / "left").iterdir()) == [], out + err
