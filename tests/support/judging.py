"""An evaluation profile with one stand-in judge, and the judge replies it expects."""

from __future__ import annotations

import json
from typing import Any

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.workspace import Workspace, write_yaml

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
JUDGE = "judge/j1"


def judge_requests(standin: StandIn) -> int:
    """Judge requests the stand-in answered one by one (at /chat/completions)."""
    return sum(1 for r in standin.requests if r["model"] == JUDGE)


def build(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    """`claw build` of the standard campaign with the evaluation profile: (exit code, its JSON report)."""
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def judge_reply(score: float) -> dict[str, Any]:
    body = {"summary": f"scored {score}", "overall": {"evidence": ["seen"], "score": score},
            "dimensions": {d: {"evidence": ["seen"], "score": score} for d in DIMS}}
    return text(json.dumps(body))


def eval_profile(ws: Workspace, repetitions: int = 3, method: str = "median", threshold: float | None = 0.5,
                 **extra: Any) -> None:
    doc: dict[str, Any] = {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judge_system_prompt": "You are a strict judge. Answer in JSON.",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": JUDGE, "retries": 0}],
        "judge_runs": [{"judge_run_id": "main", "judge_id": "j1", "repetitions": repetitions}],
        "aggregation": {"method": method, "pass_threshold": threshold},
    }
    doc.update(extra)
    write_yaml(ws.configs / "evaluation_profiles" / "ev.yaml", doc)
