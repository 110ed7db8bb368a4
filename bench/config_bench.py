"""How much does claw's config validation cost on top of just parsing the YAML?

Generates a workspace of 2,000 cases (some grouped, some with `source:` message files and
attachments), a few suites and profiles, then times, in the same process and interleaved:

  yaml   a bare `yaml.load(..., Loader=yaml.CSafeLoader)` of every YAML file claw reads
  claw   `load_workspace(root)`: discovery, parsing, validation, file checks, cross-file checks
  plan   `resolve_campaign(...)` of a 5-model x 2,000-case suite (10,000 items), which loads the
         workspace again and expands it

Times are CPU seconds of this process (`time.process_time`), so other processes sharing the machine
do not inflate either side; best of N rounds is reported. Wall-clock figures are printed as well.
Target: claw / yaml <= 1.5, and plan / claw <= 2.

Usage: python bench/config_bench.py [--cases 2000] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from clawstore.config import load_workspace, resolve_campaign

MODELS = 5


def _dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _case(i: int) -> dict[str, Any]:
    tags = ["bench", f"group{i % 10}"] + (["smoke"] if i % 3 == 0 else [])
    data: dict[str, Any] = {
        "schema_version": 1,
        "case_id": f"case_{i:05d}",
        "title": f"Benchmark case {i}",
        "runner": {"type": "llm_probe", **({"temperature": 0} if i % 4 == 0 else {})},
        "input": {
            "messages": [
                {"role": "system", "content": "You are a careful assistant. Answer precisely and briefly."},
                {"role": "user", "content": f"Question {i}: explain step {i % 17} of the procedure.\n" * 3},
            ],
            "context": {"llm_probe": {"tools": ["read_file", "write_file"]}} if i % 5 == 0 else {},
        },
        "expectations": {
            "hard_expectations": [{"text": "Answers the question that was asked."},
                                  {"text": f"Mentions step {i % 17}."}],
            "soft_expectations": [{"text": "Is concise.", "weight": 0.5}],
        },
        "rubric": {
            "version": 1,
            "scale": {"min": 0, "max": 10, "anchors": {"10": "Perfect.", "5": "Partial.", "0": "Wrong."}},
            "criteria": [{"name": "Correctness", "what_good_looks_like": "Right answer.",
                          "what_bad_looks_like": "Wrong answer."}],
            "scoring_instructions": "Cap at 4 when a hard expectation fails.",
        },
        "deterministic_checks": [
            {"check_id": "answered", "dimensions": ["task"], "declarative": {"kind": "final_response_present"}},
            {"check_id": "no-tools", "dimensions": ["efficiency", "process"],
             "declarative": {"kind": "tool_call_count", "count": 0}},
            {"check_id": "ok", "declarative": {"kind": "status_is", "status": "success"}},
        ],
        "tags": tags,
        "metadata": {"owner": "bench", "index": i},
    }
    return data


def generate(root: Path, cases: int) -> list[Path]:
    """Write the workspace; return every YAML file claw will parse (the baseline's input)."""
    configs = root / "configs"
    yaml_files: list[Path] = []
    for i in range(cases):
        # a quarter of the cases are grouped one level deeper: cases/<group>/<case>/test.yaml
        case_dir = configs / "cases" / (f"g{i % 8}/case_{i:05d}" if i % 4 == 1 else f"case_{i:05d}")
        data = _case(i)
        if i % 10 == 0:  # some cases keep their prompt in a file and attach a document
            data["input"]["messages"][1] = {"role": "user", "source": {"path": "messages/prompt.yaml"}}
            data["input"]["attachments"] = ["files/notes.txt"]
            _dump(case_dir / "messages" / "prompt.yaml", [{"role": "user", "content": f"Prompt {i} from a file."}])
            yaml_files.append(case_dir / "messages" / "prompt.yaml")
            (case_dir / "files").mkdir(parents=True)
            (case_dir / "files" / "notes.txt").write_text(f"notes for case {i}\n" * 20, encoding="utf-8")
        _dump(case_dir / "test.yaml", data)
        yaml_files.append(case_dir / "test.yaml")
    models = [{"model_id": f"model_{m}", "requested_model": f"vendor/model-{m}"} for m in range(MODELS)]
    suites = {
        "all": {"case_selection": {}},
        "smoke": {"case_selection": {"include_tags": ["smoke"], "exclude_tags": ["group3"]}},
        "explicit": {"case_selection": {"include_case_ids": [f"case_{i:05d}" for i in range(0, cases, 7)]}},
    }
    for suite_id, extra in suites.items():
        path = configs / "suites" / f"{suite_id}.yaml"
        _dump(path, {"schema_version": 1, "suite_id": suite_id, "title": suite_id, "models": models, **extra})
        yaml_files.append(path)
    profile = configs / "run_profiles" / "standard.yaml"
    _dump(profile, {"schema_version": 1, "run_profile_id": "standard", "title": "Standard",
                    "runner_defaults": {"temperature": 0.2, "max_tokens": 512},
                    "model_overrides": {"model_1": {"max_tokens": 1024}}})
    evaluation = configs / "evaluation_profiles" / "judge.yaml"
    _dump(evaluation, {"schema_version": 1, "evaluation_profile_id": "judge", "title": "Judge",
                       "judge_system_prompt": "Grade the run.",
                       "judges": [{"judge_id": "j", "type": "llm_probe", "model": "vendor/judge"}],
                       "judge_runs": [{"judge_run_id": "r", "judge_id": "j", "repetitions": 3}]})
    yaml_files += [profile, evaluation]
    return yaml_files


def bare_yaml(files: list[Path]) -> int:
    count = 0
    for path in files:
        with open(path, encoding="utf-8") as handle:
            count += yaml.load(handle.read(), Loader=yaml.CSafeLoader) is not None
    return count


def _timed(fn: Any) -> tuple[float, float, Any]:
    """(CPU seconds, wall seconds, result) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="write the workspace here and keep it")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="claw-config-bench-"))
    try:
        files = generate(root, args.cases)
        times: dict[str, list[tuple[float, float]]] = {"yaml": [], "claw": [], "plan": []}
        workspace = campaign = None
        for _ in range(args.rounds):  # interleaved, so background load hits all three alike
            cpu, wall, _count = _timed(lambda: bare_yaml(files))
            times["yaml"].append((cpu, wall))
            cpu, wall, workspace = _timed(lambda: load_workspace(root))
            times["claw"].append((cpu, wall))
            cpu, wall, campaign = _timed(lambda: resolve_campaign(root, "all", "standard", "judge"))
            times["plan"].append((cpu, wall))
        assert workspace is not None and campaign is not None
        if workspace.issues:
            print("unexpected config errors:", *workspace.issues[:5], sep="\n  ", file=sys.stderr)
            return 1
        cpu = {k: min(c for c, _ in v) for k, v in times.items()}
        wall = {k: min(w for _, w in v) for k, v in times.items()}
        print(f"workspace: {args.cases} cases, {len(workspace.suites)} suites, {len(files)} YAML files; "
              f"best of {args.rounds} rounds")
        print(f"{'':32} {'CPU ms':>9} {'wall ms':>9}")
        print(f"{'bare yaml.load (CSafeLoader)':32} {cpu['yaml'] * 1000:9.1f} {wall['yaml'] * 1000:9.1f}")
        print(f"{'claw load + validate':32} {cpu['claw'] * 1000:9.1f} {wall['claw'] * 1000:9.1f}   "
              f"ratio {cpu['claw'] / cpu['yaml']:.2f} CPU, {wall['claw'] / wall['yaml']:.2f} wall (target <= 1.5)")
        print(f"{'claw campaign expansion':32} {cpu['plan'] * 1000:9.1f} {wall['plan'] * 1000:9.1f}   "
              f"{len(campaign.items)} items, {cpu['plan'] / cpu['claw']:.2f}x validate (target <= 2)")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
