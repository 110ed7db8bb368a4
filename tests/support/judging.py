"""An evaluation profile with one stand-in judge, the judge replies it expects, a workspace to judge, and a campaign
built once for a module that each test copies, edits and builds again (`judged_once`, `Rebuild`)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.once import copied, made_once
from tests.support.workspace import SECRET, Workspace, standard, write_yaml

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
JUDGE = "judge/j1"
EV = ("--evaluation-profile", "ev")
Layers = dict[str, set[str]]  # layer -> {"case/model"} a dry run would execute


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


@contextmanager
def judged_once(tmp_path_factory: pytest.TempPathFactory, name: str, campaign: Callable[[Workspace], None],
                syspath: str | None = None) -> Iterator[tuple[StandIn, Path]]:
    """For a module's fixture: the standard workspace as `campaign` makes it, built once with the evaluation profile
    `ev` (its judge scoring 7); (its stand-in, the folder holding `ws` and `store`) while the module runs. `syspath`: a
    folder of the workspace on claw's sys.path, as `PYTHONPATH=hooks claw build` puts it there."""
    root = tmp_path_factory.mktemp(name)
    with standin_workspace(root) as (standin, ws, claw), pytest.MonkeyPatch.context() as mp:
        campaign(ws)
        if syspath is not None:
            mp.syspath_prepend(str(ws.root / syspath))
        standin.script(JUDGE, judge_reply(7))
        code, out, err = claw.build(*EV)
        assert code == 0, out + err
        yield standin, root


@dataclass
class Rebuild:
    """A campaign `judged_once` built, copied for one test to edit (`ws`) and build again: which nodes the dry run
    would execute, how many `claw status` counts stale, what the build sends, which checks outcomes the store keeps."""

    standin: StandIn
    ws: Workspace
    claw: Claw

    @classmethod
    def of(cls, built: tuple[StandIn, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           syspath: str | None = None) -> Rebuild:
        """`built`'s workspace and store copied under `tmp_path`, the current directory and store (the stand-in is the
        module's)."""
        standin, root = built
        copied(root, tmp_path, "ws", "store")
        monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
        monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
        monkeypatch.chdir(tmp_path / "ws")
        if syspath is not None:
            monkeypatch.syspath_prepend(str(tmp_path / "ws" / syspath))
        return cls(standin, Workspace(tmp_path / "ws"), Claw(tmp_path / "ws"))

    def executes(self) -> Layers:
        """What `claw build --dry-run` would execute."""
        code, out, err = self.claw.build(*EV, "--dry-run", "--output", "json")
        assert code == 0, out + err
        layers: Layers = {}
        for node in json.loads(out)["nodes"]:
            if node["executes"]:
                layers.setdefault(node["kind"], set()).add(f"{node['case_id']}/{node['model_id']}")
        return layers

    def stale(self) -> dict[str, int]:
        """`claw status`: the stale nodes per layer (every model), the layers with none left out."""
        code, out, err = self.claw("status", "--suite", "main", "--run-profile", "rp", *EV, "--output", "json")
        assert code == 0, out + err
        stale: dict[str, int] = {}
        for model in json.loads(out)["models"].values():
            for kind, counts in model["layers"].items():
                if counts["stale"]:
                    stale[kind] = stale.get(kind, 0) + counts["stale"]
        return stale

    def build(self) -> tuple[int, int]:
        """`claw build` (exit 0): (subject requests, judge requests) it sent."""
        before = len(self.standin.requests)
        code, out, err = self.claw.build(*EV)
        assert code == 0, out + err
        sent = self.standin.requests[before:]
        judged = sum(1 for r in sent if r["model"] == JUDGE)
        return len(sent) - judged, judged

    def check_messages(self, check_id: str) -> set[str]:
        """The message of check `check_id` in every checks record of the store that has it."""
        store = Store(self.ws.root.parent / "store")
        found = set()
        for key, _ in store.iter_actions():
            record = store.get_action(key)
            if record is not None and record.kind == "checks":
                found |= {c["message"] for c in record.summary["checks"] if c["check_id"] == check_id}
        return found
