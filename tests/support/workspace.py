"""A small llm_probe workspace written into a temp dir, editable per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SECRET = "sk-or-v1-THIS-IS-THE-TEST-SECRET-0123456789abcdef"


# libyaml's emitter where PyYAML has it: the same text as yaml.safe_dump's for a mapping or a list, at a quarter of its
# CPU (0.08 against 0.36 ms a case file; the suite writes thousands). A scalar alone it writes without safe_dump's `...`
# line: that keeps safe_dump's.
_EMITTER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_text(data: Any) -> str:
    """`yaml.safe_dump(data, sort_keys=False)`'s text, for less CPU."""
    return yaml.dump(data, Dumper=_EMITTER if isinstance(data, (dict, list)) else yaml.SafeDumper, sort_keys=False)


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml_text(data))


def case_doc(case_id: str, prompt: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1, "case_id": case_id, "title": f"Case {case_id}",
        "runner": {"type": "llm_probe"},
        "input": {"messages": [{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": prompt}]},
        "expectations": {"hard_expectations": [{"text": "Answers."}]},
        "tags": ["smoke"],
    }
    doc.update(extra)
    return doc


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        self.configs = root / "configs"

    def case(self, case_id: str, prompt: str = "What is 2 + 2?", **extra: Any) -> Path:
        path = self.configs / "cases" / case_id / "test.yaml"
        write_yaml(path, case_doc(case_id, prompt, **extra))
        return path

    def suite(self, suite_id: str, models: list[str], title: str = "Suite", **extra: Any) -> None:
        doc = {"schema_version": 1, "suite_id": suite_id, "title": title,
               "models": [{"model_id": m, "requested_model": f"vendor/{m}"} for m in models]}
        doc.update(extra)
        write_yaml(self.configs / "suites" / f"{suite_id}.yaml", doc)

    def run_profile(self, profile_id: str = "rp", repetitions: int = 1, concurrency: int = 2,
                    defaults: dict[str, Any] | None = None, title: str = "Profile", **policy: Any) -> None:
        doc = {"schema_version": 1, "run_profile_id": profile_id, "title": title,
               "runner_defaults": {"temperature": 0, "timeout_seconds": 5, "retries": 2, **(defaults or {})},
               "execution_policy": {"max_concurrency": concurrency, "run_repetitions": repetitions,
                                    "stop_on_runner_error": False, **policy}}
        write_yaml(self.configs / "run_profiles" / f"{profile_id}.yaml", doc)

    def edit(self, relative: str, change: Any) -> None:
        path = self.configs / relative
        data = yaml.safe_load(path.read_text())
        change(data)
        write_yaml(path, data)


def standard(root: Path) -> Workspace:
    """Two cases × two models, one repetition."""
    ws = Workspace(root)
    ws.case("alpha", "What is 2 + 2?")
    ws.case("beta", "Name a colour.")
    ws.suite("main", ["m1", "m2"])
    ws.run_profile()
    return ws


def one_case(root: Path) -> Workspace:
    """One case (c1) × one model (m1): a workspace a command can name, for tests of what it refuses."""
    ws = Workspace(root)
    ws.case("c1", "Question?")
    ws.suite("main", ["m1"])
    ws.run_profile()
    return ws


def many_cases(root: Path, cases: int, concurrency: int = 4) -> Workspace:
    """`cases` cases × two models (m1, m2), one repetition, `concurrency` runs at once."""
    ws = Workspace(root)
    for i in range(cases):
        ws.case(f"c{i:03d}", f"Question {i}?")
    ws.suite("main", ["m1", "m2"])
    ws.run_profile(concurrency=concurrency)
    return ws
