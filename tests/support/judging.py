"""An evaluation profile with one stand-in judge, the judge replies it expects, and a workspace to judge."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.once import copied, made_once
from tests.support.workspace import SECRET, Workspace, standard, write_yaml

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


WORSE = "WORSE ANSWER"


def worse_m1_workspace(ws: Workspace, standin: StandIn, cases: list[str], degraded: set[str]) -> None:
    """`cases` added to the standard workspace, and suite `other`: its m1 is another model that answers
    worse on the `degraded` cases (same model_id, so campaigns main and other compare); runs 2
    repetitions, one request at a time, so that a scripted judge's noise is reproducible."""
    for case in cases:
        ws.case(case, f"Question {case}: name something.")
    ws.suite("other", ["m1", "m2"])
    ws.edit("suites/other.yaml", lambda d: d["models"][0].update(requested_model="vendor/m1-worse"))
    for case in degraded:
        standin.script("vendor/m1-worse", text(WORSE), match="2 + 2" if case == "alpha" else f"Question {case}:")
    ws.run_profile(repetitions=2, concurrency=1)


def noisy_judge(standin: StandIn, seed: int, replies: int = 400) -> None:
    """The judge scores 7 (5 for the worse answer) ± 0.5 in quarter-point steps."""
    rng = random.Random(seed)
    steps = [-0.5, -0.25, 0.0, 0.25, 0.5]
    standin.script(JUDGE, *[judge_reply(5.0 + rng.choice(steps)) for _ in range(replies)], match=WORSE)
    standin.script(JUDGE, *[judge_reply(7.0 + rng.choice(steps)) for _ in range(replies)])


@contextmanager
def standin_workspace(root: Path) -> Iterator[tuple[StandIn, Workspace, Claw]]:
    """A stand-in provider, the standard workspace under `root` (the current directory meanwhile) and
    its store: for a module's fixture (the function fixtures of tests/support/claw.py are per test)."""
    with StandIn() as standin, pytest.MonkeyPatch.context() as mp:
        for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                           "CLAW_STORE": str(root / "store")}.items():
            mp.setenv(key, value)
        ws = standard(root / "ws")
        mp.chdir(ws.root)
        yield standin, ws, Claw(ws.root)


@contextmanager
def standin_workspace_once(tmp_path_factory: pytest.TempPathFactory, name: str,
                           make: Callable[[StandIn, Workspace, Claw, Path], None]) -> Iterator[tuple[Claw, Path]]:
    """`make`'s builds in `standin_workspace`, made once in the whole run (tests/support/once.py: not once in each
    xdist worker), then its workspace and store copied for the module: (its claw, the made directory, where `make`
    left what the tests need to know). For tests that only read what was built: its stand-in has ended, and the
    variables name its URL still (a request would be refused, not answered by another)."""

    def made_in(made: Path) -> None:
        with standin_workspace(made) as (standin, ws, claw):
            make(standin, ws, claw, made)
            (made / "base_url").write_text(standin.base_url)

    made = made_once(tmp_path_factory, name, made_in)
    root = tmp_path_factory.mktemp(name)
    copied(made, root, "ws", "store")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": (made / "base_url").read_text(),
                           "CLAW_STORE": str(root / "store")}.items():
            mp.setenv(key, value)
        mp.chdir(root / "ws")
        yield Claw(root / "ws"), made
