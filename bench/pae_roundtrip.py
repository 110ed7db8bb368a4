#!/usr/bin/env python3
"""The real reference system (pae) → `claw import-pae` → `claw build` round trip, against the stand-in.

    python bench/pae_roundtrip.py --pae-wheel PATH/personal_agent_eval-0.1.0-py3-none-any.whl [--cases 12 --models 2]

1. installs the pae wheel into a scratch venv (pae needs Python >= 3.12: python3.12/3.13/3.14 on PATH,
   or a pyenv-installed one; --python to choose) under the work directory;
2. writes an llm_probe campaign in the seed schema (cases, suite, run profile, evaluation profile);
3. starts the stand-in provider (clawstore.testing.standin) with a judge that answers the JSON contract;
4. runs `pae run-eval` on it (pae's hard-coded OpenRouter base URL is redirected in memory to the
   stand-in: no file of pae is edited);
5. `claw import-pae` the workspace, then `claw build` of the same campaign;
6. prints what pae completed, what was imported, and the requests the claw build sent (the figure:
   0 for everything pae completed), with pae's wall time beside the import's.
Exit 1 when the build sent a request for something pae had completed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clawstore.testing.standin import StandInProcess, text  # noqa: E402

JUDGE_MODEL = "judge/roundtrip"
DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
JUDGE_SYSTEM = "Grade the recorded attempt. Reply with one JSON object: summary, dimensions, overall."
# Runs pae with its OpenRouter base URL pointed at $OPENROUTER_BASE_URL (pae binds it as a default).
LAUNCHER = """
import os, sys
import personal_agent_eval.domains.llm_probe.openrouter as openrouter
url = os.environ["OPENROUTER_BASE_URL"].rstrip("/")
defaults = dict(openrouter.OpenRouterClient.__init__.__kwdefaults__ or {})
defaults["base_url"] = url
openrouter.OpenRouterClient.__init__.__kwdefaults__ = defaults
openrouter.DEFAULT_OPENROUTER_BASE_URL = url
from personal_agent_eval.cli import main
sys.exit(main(sys.argv[1:]))
"""


def find_python(explicit: str | None) -> str:
    candidates = [explicit] if explicit else ["python3.12", "python3.13", "python3.14", "python3"]
    if not explicit and shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        versions = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        candidates += [f"{root}/versions/{v}/bin/python3" for v in versions if v.startswith(("3.12", "3.13", "3.14"))]
    for py in candidates:
        try:
            ok = subprocess.run([py, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                                capture_output=True).returncode == 0
        except OSError:
            continue
        if ok:
            return py
    raise SystemExit("pae needs Python >= 3.12: none found (use --python)")


def install_pae(work: Path, wheel: Path, python: str) -> Path:
    venv = work / "pae-venv"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True)
    return py


def write_campaign(ws: Path, cases: int, models: int) -> None:
    def put(path: Path, doc: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))

    words = "river harbor lantern orbit meadow ledger signal copper window garden engine archive".split()
    for i in range(cases):
        chosen = ", ".join(words[(i + k) % len(words)] for k in range(1 + i % 5))
        prompt = f"Case {i}: write one sentence using {chosen}"
        put(ws / "configs" / "cases" / f"case_{i:03d}" / "test.yaml", {
            "schema_version": 1, "case_id": f"case_{i:03d}", "title": f"Case {i}", "runner": {"type": "llm_probe"},
            "input": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]},
            "expectations": {"hard_expectations": [{"text": "One sentence."}]}, "tags": ["roundtrip"]})
    put(ws / "configs" / "suites" / "roundtrip.yaml", {
        "schema_version": 1, "suite_id": "roundtrip", "title": "pae round trip",
        "models": [{"model_id": f"model-{m}", "requested_model": f"vendor/model-{m}"} for m in range(models)],
        "case_selection": {"include_tags": ["roundtrip"]}})
    put(ws / "configs" / "run_profiles" / "rt_run.yaml", {
        "schema_version": 1, "run_profile_id": "rt_run", "title": "round trip",
        "runner_defaults": {"temperature": 0, "max_tokens": 128, "retries": 1, "timeout_seconds": 30},
        "execution_policy": {"max_concurrency": 2, "run_repetitions": 1}})
    put(ws / "configs" / "evaluation_profiles" / "rt_judge.yaml", {
        "schema_version": 1, "evaluation_profile_id": "rt_judge", "title": "round trip judge",
        "judges": [{"judge_id": "j", "type": "llm_probe", "model": JUDGE_MODEL}],
        "judge_runs": [{"judge_id": "j", "judge_run_id": "main", "repetitions": 2}],
        "aggregation": {"method": "median"}, "judge_system_prompt": JUDGE_SYSTEM})


def judge_reply() -> dict:
    body = {"summary": "fine", "overall": {"evidence": ["seen"], "score": 7},
            "dimensions": {d: {"evidence": ["seen"], "score": 7} for d in DIMS}}
    return text(json.dumps(body))


def pae_completed(outputs: Path) -> tuple[int, int]:
    runs = sum(json.loads(p.read_text()).get("status") in ("success", "invalid")
               for p in outputs.glob("runs/*/*/*/*/run_*[0-9].json"))
    judges = sum(sum(r.get("status") == "success" for r in json.loads(p.read_text()).get("iteration_results", []))
                 for p in outputs.glob("evaluations/*/*/*/*/*/raw_outputs/judge_*[0-9].json"))
    return runs, judges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pae-wheel", type=Path, default=os.environ.get("PAE_WHEEL"), required=not os.environ.get(
        "PAE_WHEEL"))
    parser.add_argument("--python", default=None, help="a Python >= 3.12 for pae")
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pae_roundtrip."))
    work.mkdir(parents=True, exist_ok=True)
    pae_python = install_pae(work, args.pae_wheel.resolve(), find_python(args.python))
    ws = work / "ws"
    shutil.rmtree(ws, ignore_errors=True)
    write_campaign(ws, args.cases, args.models)
    claw = [sys.executable, "-m", "clawstore.cli"]
    campaign = ["--suite", "roundtrip", "--run-profile", "rt_run", "--evaluation-profile", "rt_judge"]
    with StandInProcess() as standin:
        standin.script(JUDGE_MODEL, judge_reply())
        env = {**os.environ, "OPENROUTER_BASE_URL": standin.base_url, "OPENROUTER_API_KEY": "sk-roundtrip-not-real",
               "CLAW_STORE": str(ws / "store")}
        began = time.monotonic()
        pae = subprocess.run([str(pae_python), "-c", LAUNCHER, "run-eval", *campaign, "--output", "json",
                              "--no-chart"], cwd=ws, env=env, capture_output=True, text=True)
        pae_s = time.monotonic() - began
        if pae.returncode not in (0, 1):
            print(pae.stderr[-2000:], file=sys.stderr)
            return 2
        pae_requests = len(standin.requests)
        runs_done, judges_done = pae_completed(ws / "outputs")
        began = time.monotonic()
        imported = subprocess.run([*claw, "import-pae", str(ws), "--output", "json"], cwd=ws, env=env,
                                  capture_output=True, text=True)
        import_s = time.monotonic() - began
        report = json.loads(imported.stdout)
        standin.reset()
        standin.script(JUDGE_MODEL, judge_reply())
        built = subprocess.run([*claw, "build", *campaign, "--output", "json"], cwd=ws, env=env,
                               capture_output=True, text=True)
        build = json.loads(built.stdout)
        sent = standin.requests
    subject = sum(1 for r in sent if r["model"] != JUDGE_MODEL)
    judged = len(sent) - subject
    print(f"# work dir {work}; campaign {args.cases} cases x {args.models} models, 2 judge repetitions")
    print(f"pae run-eval: exit {pae.returncode}, {pae_requests} requests, completed {runs_done} runs and "
          f"{judges_done} judgements in {pae_s:.2f} s")
    print(f"claw import-pae: {report['runs_imported']} runs, {report['judgements_imported']} judgements, "
          f"{len(report['unmapped'])} not mapped, {len(report['damaged'])} damaged, in {import_s:.2f} s "
          f"(import/pae time {import_s / pae_s:.2f})")
    for line in report["unmapped"] + report["damaged"]:
        print(f"  {line}")
    print(f"claw build after the import: exit {built.returncode}, {subject} run requests, {judged} judge requests, "
          f"{build['counts']}")
    missed = runs_done - report["runs_imported"] + judges_done - report["judgements_imported"]
    return 0 if subject + judged == 0 and missed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
