"""An OpenClaw run planned before its case ran (`default`, `model-rate`) is estimated from the case's prompt alone,
while the agent sends OpenClaw's own system prompt and the workspace with every request (session 78: 12 tokens planned,
3,078 used): the plan shows its tokens and cost as a floor (`≥`), and `--max-cost` says so (docs/plan.md)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from tests.builder.test_build_openclaw import FakeDocker, docker, oc  # noqa: F401
from tests.builder.test_progress import child_env, claw_command
from tests.support.claw import Claw
from tests.support.terminal import Terminal, terminal  # noqa: F401
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def priced(ws: Workspace) -> None:
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 1.0, "output": 2.0}) for m in d["models"]])


def plan_json(claw: Claw, *extra: str) -> dict[str, Any]:
    code, out, err = claw("plan", *CAMPAIGN, "--output", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def run_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("run ")]


def test_an_agent_never_run_is_planned_as_a_floor(oc: Workspace, claw: Claw, docker: FakeDocker) -> None:  # noqa: F811
    priced(oc)
    planned = plan_json(claw)
    assert planned["requests"] == 4 and planned["estimated_cost_usd"] > 0
    assert planned["cost_minimum"] is True and planned["tokens_minimum"] is True, planned
    assert all(line["cost_minimum"] and line["tokens_minimum"] for line in planned["lines"]), planned["lines"]
    code, text, err = claw("plan", *CAMPAIGN)
    assert code == 0, err
    rows = run_rows(text)
    assert len(rows) == 2, text
    for row in rows:  # tokens in, out and cost each `≥`; the note says why
        assert len(re.findall(r"≥\d", row)) == 3, row
        assert "default:2, a floor: the agent's own prompt and workspace are not counted" in row, row
    assert re.search(r"estimated cost ≥\d+\.\d+ USD", text), text


def test_an_agent_that_ran_its_case_is_planned_as_before(oc: Workspace, claw: Claw,  # noqa: F811
                                                         docker: FakeDocker) -> None:  # noqa: F811
    priced(oc)
    code, out, err = claw.build("--case", "oc_a")
    assert code == 0, out + err
    planned = plan_json(claw)  # oc_b from the rate of each model's oc_a run: still the prompt alone, a floor
    assert planned["requests"] == 2 and planned["cost_minimum"] is True, planned
    assert all(line["token_sources"] == {"model-rate": 1} and line["tokens_minimum"] for line in planned["lines"])
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    planned = plan_json(claw, "--force")  # every run again, each case's own history: same-case
    assert planned["requests"] == 4 and planned["cost_minimum"] is False and planned["tokens_minimum"] is False
    assert all(line["token_sources"] == {"same-case": 2} for line in planned["lines"]), planned["lines"]
    code, text, err = claw("plan", *CAMPAIGN, "--force")
    assert code == 0 and "≥0" not in text and "a floor" not in text, text


def test_max_cost_refuses_a_floor_above_it_and_starts_one_below_saying_so(oc: Workspace, claw: Claw,  # noqa: F811
                                                                         docker: FakeDocker) -> None:  # noqa: F811
    priced(oc)
    floor = plan_json(claw)["estimated_cost_usd"]
    code, out, err = claw.build("--max-cost", f"{floor / 2:.9f}")
    assert code == 2 and "nothing was sent" in err, out + err
    assert re.search(r"estimated cost ≥\d+\.\d{6} USD \(a floor", err), err
    assert docker.calls("run") == []
    code, out, err = claw.build("--max-cost", f"{floor * 1000:.9f}")
    assert code == 0, out + err
    said = r"--max-cost [\d.]+ USD: the plan's estimate ≥\d+\.\d{6} USD is a floor: .* the build stops at the limit"
    assert re.search(said, err), err


def test_the_live_display_shows_a_floor_as_one(oc: Workspace, claw: Claw, docker: FakeDocker,  # noqa: F811
                                                env: dict[str, str], terminal: Terminal) -> None:  # noqa: F811
    """`of ~x planned` beside the spend read as the build's likely cost; an agent's plan is a floor: `of ≥x planned`."""
    priced(oc)
    child = {**child_env(env), **{name: os.environ[name] for name in ("FAKE_DOCKER_STATE", "FAKE_DOCKER_SCENARIO")}}
    terminal.start(claw_command("build", *CAMPAIGN), oc.root, child)
    final = terminal.wait_for(lambda s: "EXIT=" in s)
    assert "EXIT=0" in final, final
    assert re.search(r"cost .* of ≥\$\d+\.\d+ planned", final) and "~$" not in final, final
