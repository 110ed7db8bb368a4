"""The real-server tier's campaign: cases answered by the model on the server, judged by the same server
held to the verdict contract's schema; and what the tests read back from the store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from clawstore.evaluate.evidence import DIMENSIONS
from clawstore.store import Store
from tests.support.claw import Claw
from tests.support.workspace import Workspace, write_yaml

KEY_ENV = "CLAW_TEST_LLAMA_KEY"
MODEL = "tiny"


def _scored() -> dict[str, Any]:
    # Short lowercase words and whole scores: what the verdict contract accepts, and bounded, so a
    # model with random weights cannot write one string forever.
    word = {"type": "string", "pattern": "^[a-z]{1,12}$"}
    return {"type": "object", "additionalProperties": False, "required": ["evidence", "score"],
            "properties": {"evidence": {"type": "array", "items": word, "minItems": 1, "maxItems": 2},
                           "score": {"enum": list(range(11))}}}


# The verdict contract (clawstore/evaluate/judge_contract.py) as a JSON schema. llama-cpp-python's
# server turns `response_format: {type: json_object, schema: …}` into a grammar the reply must follow.
VERDICT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["summary", "dimensions", "overall"],
    "properties": {
        "summary": {"type": "string", "pattern": "^[a-z]{1,12}$"},
        "dimensions": {"type": "object", "additionalProperties": False, "required": list(DIMENSIONS),
                       "properties": {d: _scored() for d in DIMENSIONS}},
        "overall": _scored(),
    },
}


def judged_workspace(root: Path, base_url: str, cases: dict[str, str], concurrency: int = 2) -> Workspace:
    """`cases` (id: prompt), one model on the server, one judge on the same server answering by the schema."""
    workspace = Workspace(root)
    endpoint = {"base_url": base_url, "api_key_env": KEY_ENV}
    for case_id, prompt in cases.items():
        workspace.case(case_id, prompt)
    workspace.suite("main", ["tiny"])
    workspace.edit("suites/main.yaml", lambda d: d["models"][0].update(requested_model=MODEL, **endpoint))
    workspace.run_profile(concurrency=concurrency, defaults={"timeout_seconds": 60, "retries": 2, "max_tokens": 48})
    write_yaml(workspace.configs / "evaluation_profiles" / "ev.yaml", {
        "schema_version": 1, "evaluation_profile_id": "ev", "title": "Eval",
        "judge_system_prompt": "You are a strict judge. Answer in JSON.",
        "judges": [{"judge_id": "j1", "type": "llm_probe", "model": MODEL, **endpoint, "retries": 2,
                    "request_options": {"max_tokens": 1024,
                                        "response_format": {"type": "json_object", "schema": VERDICT_SCHEMA}}}],
        "judge_runs": [{"judge_run_id": "main", "judge_id": "j1", "repetitions": 1}],
        "aggregation": {"method": "median", "pass_threshold": 0.5},
    })
    return workspace


def build(claw: Claw, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json", *extra)
    assert out, err
    return code, json.loads(out)


def records(kind: str) -> list[Any]:
    store = Store(Path(os.environ["CLAW_STORE"]))
    found = [store.get_action(key) for key, _ in store.iter_actions()]
    return [r for r in found if r and r.kind == kind]


def is_judge(exchange: dict[str, Any]) -> bool:
    return "response_format" in exchange["request"]
