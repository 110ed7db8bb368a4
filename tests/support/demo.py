"""A small but varied campaign built for real with `claw build` against the stand-in provider.

Three models of different quality and price, four cases (one with tool calls, one the weakest model
fails on a provider error), a judge whose score and reasoning depend on the answer. Used by the
`claw view` browser tests and by the screenshot script (python -m tests.view.screenshots).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawstore.testing.standin import StandIn, error, text, tool_call
from tests.support.judging import DIMS, JUDGE, eval_profile
from tests.support.workspace import Workspace

MODELS = {  # model_id -> (answer quality, cost of one reply in USD)
    "acme-large": ("good", 0.0040),
    "acme-small": ("fair", 0.0008),
    "open-tiny": ("poor", 0.0002),
}
SCORES = {"good": 9, "fair": 6, "poor": 3}
CASES = {
    "arith": ("What is 17 * 3?", ["math", "smoke"]),
    "capital": ("What is the capital of Australia?", ["facts", "smoke"]),
    "haiku": ("Write a haiku about version control.", ["writing"]),
    "notes_file": ("Save the note 'ship on friday' to /tmp/notes.txt, then confirm.", ["tools"]),
}
CAMPAIGN = "demo__std__ev"


def answer(model: str, case: str) -> str:
    quality = MODELS[model][0]
    return f"[{quality}] {model} answers {case}: " + {
        "good": "a complete, correct answer.", "fair": "mostly right, missing a detail.",
        "poor": "an answer that misses the point."}[quality]


def judge_body(quality: str) -> dict[str, Any]:
    score = SCORES[quality]
    why = {"good": "The reply is correct and complete.", "fair": "Correct core, one detail missing.",
           "poor": "The reply does not answer what was asked."}[quality]
    return {"summary": f"{why} ({quality})",
            "overall": {"evidence": [f"final answer marked [{quality}]"], "score": score},
            "dimensions": {d: {"evidence": [f"{d}: {why.lower()}"], "score": score} for d in DIMS}}


def write_workspace(root: Path, judge_reps: int = 2) -> Workspace:
    ws = Workspace(root)
    for case_id, (prompt, tags) in CASES.items():
        extra: dict[str, Any] = {"tags": tags, "deterministic_checks": [
            {"check_id": "answered", "dimensions": ["task"], "declarative": {"kind": "final_response_present"}}]}
        if case_id == "notes_file":
            extra["input"] = {"messages": [{"role": "user", "content": prompt}],
                              "context": {"llm_probe": {"tools": ["write_file", "read_file"]}}}
            extra["deterministic_checks"].append({"check_id": "note-written", "dimensions": ["process"],
                                                  "declarative": {"kind": "file_contains", "path": "/tmp/notes.txt",
                                                                  "text": "ship on friday"}})
        ws.case(case_id, prompt, **extra)
    ws.suite("demo", list(MODELS))
    ws.run_profile("std", concurrency=4)
    eval_profile(ws, repetitions=judge_reps, threshold=0.5)
    return ws


def script(standin: StandIn) -> None:
    """Replies for every model and the judge; open-tiny's haiku fails with a provider error."""
    for model, (quality, cost) in MODELS.items():
        requested = f"vendor/{model}"
        usage = {"cost": cost}
        if quality == "poor":
            standin.script(requested, error(503, "upstream overloaded"), match=CASES["haiku"][0])
        standin.script(requested,
                       tool_call("write_file", {"path": "/tmp/notes.txt", "content": "ship on friday"}, usage=usage),
                       tool_call("read_file", {"path": "/tmp/notes.txt"}, usage=usage),
                       text(answer(model, "notes_file"), usage=usage), match="ship on friday")
        for case in CASES:
            standin.script(requested, text(answer(model, case), usage=usage), match=CASES[case][0])
    for quality in SCORES:
        standin.script(JUDGE, text(json.dumps(judge_body(quality)), usage={"cost": 0.0003}), match=f"[{quality}]")
