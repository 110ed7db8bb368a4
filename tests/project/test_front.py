"""The front (clawstore/project/front.py) as a library: one campaign load per command, whatever it asks
for; what it says goes to `say`, never to stderr; a refused budget is a typed error carrying its plan.

A real workspace, the stand-in provider on 127.0.0.1, a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

import clawstore.config
from clawstore.builder.api import CampaignRequest
from clawstore.errors import UsageError
from clawstore.project.front import BudgetRefused, BuildSettings, Project
from clawstore.testing.standin import StandIn
from tests.support.workspace import SECRET, Workspace, standard


@pytest.fixture
def ws(tmp_path: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.delenv("CLAW_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    standin.set_default({"content": "4"})
    workspace = standard(tmp_path / "ws")
    # Attachments big enough for the configs' warning (config/campaign.py), priced so a budget applies.
    (workspace.configs / "cases" / "alpha" / "data.txt").write_bytes(b"word " * 1_000_000)
    workspace.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["data.txt"]))
    workspace.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0, "output": 2.0})
                                                  for m in d["models"]])
    return workspace


def _project(ws: Workspace, said: list[str], **flags: tuple[str, ...]) -> Project:
    return Project(None, said.append, CampaignRequest(ws.root, "main", "rp", None, **flags))


def test_status_plan_and_a_budgeted_build_load_the_configs_once(ws: Workspace, standin: StandIn,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    loads = []
    real = clawstore.config.resolve_campaign
    monkeypatch.setattr(clawstore.config, "resolve_campaign", lambda *a, **k: loads.append(a) or real(*a, **k))
    said: list[str] = []
    project = _project(ws, said)
    assert project.status().never_built is not None
    assert project.plan().requests == 4
    built = project.build(BuildSettings(max_cost=100.0, progress="none"))
    assert built.exit_code == 0 and built.counts["executed"] == 4 and len(standin.requests) == 4
    assert len(loads) == 1
    # Said once, to `say`; nothing printed by the library itself.
    assert [line for line in said if line.startswith("warning: attachments alone send about")] == [said[0]]
    assert len(said) == 1
    assert capfd.readouterr().err == ""


def test_a_budget_the_plan_exceeds_is_refused_with_the_plan_and_nothing_sent(ws: Workspace,
                                                                            standin: StandIn) -> None:
    project = _project(ws, [])
    with pytest.raises(BudgetRefused) as refused:
        project.build(BuildSettings(max_cost=0.01, progress="none"))
    assert isinstance(refused.value, UsageError) and refused.value.exit_code == 2
    assert refused.value.plan.requests == 4 and refused.value.plan.estimated_cost_usd > 0.01
    assert str(refused.value).endswith("exceeds --max-cost 0.01 USD; nothing was sent")
    assert standin.requests == [] and not (ws.root / "store" / "refs" / "campaigns").exists()


def test_pin_and_export_cover_a_whole_campaign(ws: Workspace, tmp_path: Path) -> None:
    assert _project(ws, []).build(BuildSettings(progress="none")).exit_code == 0
    narrowed = _project(ws, [], cases=("alpha",))
    with pytest.raises(UsageError, match="claw pin covers a whole campaign"):
        narrowed.pin("release", force=False)
    pinned, campaign_id = _project(ws, []).pin("release", force=False)
    assert pinned.moved and pinned.ref == "pins/release" and campaign_id == "main__rp__none"
    again, _ = _project(ws, []).pin("release", force=False)
    assert not again.moved and again.head == pinned.head
    summary, _, _ = _project(ws, []).export(tmp_path / "a.claw")
    assert summary.objects > 0 and (tmp_path / "a.claw").is_file()
