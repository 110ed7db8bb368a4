"""Reading a workspace of the reference system (pae): its `outputs/` tree, each file verified.

Layout (what pae 0.1 writes; docs/import-pae.md):

    outputs/runs/suit_<suite>/run_profile_<fp6>/manifest.json          {suite_id, run_profile_id, ...}
        <model>/<case>/manifest.json      {model_id, case_id, iterations: [{repetition_index, run_fingerprint}]}
        <model>/<case>/run_<rep+1>.json   the RunArtifact
        <model>/<case>/run_<rep+1>.fingerprint_input.json  {fingerprint, hash_algorithm: sha256, payload}
    outputs/evaluations/suit_<suite>/evaluation_profile_<fp6>/eval_profile_<id>_<fp6>/manifest.json
        <model>/<case>/manifest.json      {iterations: [{repetition_index, run_fingerprint, evaluation_fingerprint}]}
        <model>/<case>/raw_outputs/judge_<rep+1>.json   every judge repetition of that run repetition

Every reader raises `PaeFileError(path, reason)` for a file that is missing, truncated, not JSON or
not the expected shape, before anything is stored from it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawstore.errors import quoted
from clawstore.values import jsontext


class PaeFileError(Exception):
    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = jsontext.loads_reply(path.read_bytes())  # (kept in records: finite numbers, bounded depth)
    except FileNotFoundError:
        raise PaeFileError(path, "missing") from None
    except OSError as exc:
        raise PaeFileError(path, f"unreadable ({exc.strerror})") from None
    except ValueError as exc:  # (JSONDecodeError, UnicodeDecodeError, nested too deeply)
        raise PaeFileError(path, f"not valid JSON (truncated or damaged: {exc})") from None
    if not isinstance(data, dict):
        raise PaeFileError(path, "expected a JSON object")
    return data


def field(path: Path, data: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(name)
    if not isinstance(value, kind):
        raise PaeFileError(path, f"field {name!r}: expected {getattr(kind, '__name__', kind)}")
    return value


def pae_fingerprint(payload: dict[str, Any]) -> str:
    """pae's canonical hash (sorted keys, compact separators, ASCII escapes, SHA-256). pae hashes a run
    without `input_turns` when there are none, but writes `"input_turns": []` to the file."""
    if payload.get("input_turns") == []:
        payload = {k: v for k, v in payload.items() if k != "input_turns"}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CaseDir:
    path: Path
    model_id: str
    case_id: str
    iterations: dict[int, dict[str, Any]]  # repetition index -> manifest iteration


@dataclass
class RunProfileDir:
    path: Path
    suite_id: str
    run_profile_id: str


@dataclass
class EvalProfileDir:
    path: Path
    suite_id: str
    run_profile_id: str
    evaluation_profile_id: str
    judge_system_prompt: str | None


@dataclass
class PaeRun:
    path: Path
    fingerprint: str
    payload: dict[str, Any]
    artifact: dict[str, Any]
    raw: bytes


def run_profile_dirs(outputs: Path) -> list[RunProfileDir]:
    found = []
    for manifest in sorted(outputs.glob("runs/suit_*/run_profile_*/manifest.json")):
        data = read_json(manifest)
        found.append(RunProfileDir(manifest.parent, field(manifest, data, "suite_id", str),
                                   field(manifest, data, "run_profile_id", str)))
    return found


def eval_profile_dirs(outputs: Path) -> list[EvalProfileDir]:
    found = []
    for manifest in sorted(outputs.glob("evaluations/suit_*/evaluation_profile_*/eval_profile_*/manifest.json")):
        data = read_json(manifest)
        prompt = data.get("judge_system_prompt")
        found.append(EvalProfileDir(manifest.parent, field(manifest, data, "suite_id", str),
                                    field(manifest, data, "run_profile_id", str),
                                    field(manifest, data, "evaluation_profile_id", str),
                                    prompt if isinstance(prompt, str) else None))
    return found


def case_dirs(profile_dir: Path) -> tuple[dict[tuple[str, str], CaseDir], list[PaeFileError]]:
    """The (model_id, case_id) directories under a run or evaluation profile directory."""
    found: dict[tuple[str, str], CaseDir] = {}
    problems: list[PaeFileError] = []
    for manifest in sorted(profile_dir.glob("*/*/manifest.json")):
        try:
            data = read_json(manifest)
            iterations = {}
            for entry in field(manifest, data, "iterations", list):
                if not isinstance(entry, dict) or not isinstance(entry.get("repetition_index"), int):
                    raise PaeFileError(manifest, "an iteration without an integer repetition_index")
                iterations[entry["repetition_index"]] = entry
            key = (field(manifest, data, "model_id", str), field(manifest, data, "case_id", str))
            found[key] = CaseDir(manifest.parent, key[0], key[1], iterations)
        except PaeFileError as exc:
            problems.append(exc)
    return found, problems


def read_run(case: CaseDir, repetition: int) -> PaeRun:
    """Run `repetition` of a case directory, its fingerprint input re-hashed and matched to the manifest."""
    iteration = case.iterations.get(repetition)
    if iteration is None:
        raise PaeFileError(case.path / "manifest.json", f"no iteration for repetition {repetition}")
    fp_path = case.path / f"run_{repetition + 1}.fingerprint_input.json"
    fp = read_json(fp_path)
    payload = field(fp_path, fp, "payload", dict)
    recorded = field(fp_path, fp, "fingerprint", str)
    if pae_fingerprint(payload) != recorded:
        raise PaeFileError(fp_path, "the payload does not hash to its recorded fingerprint (damaged)")
    if iteration.get("run_fingerprint") != recorded:
        raise PaeFileError(fp_path, "fingerprint differs from the case manifest's (a stale or foreign file)")
    path = case.path / f"run_{repetition + 1}.json"
    try:
        raw = path.read_bytes()
    except OSError:
        raise PaeFileError(path, "missing") from None
    artifact = read_json(path)
    identity = field(path, artifact, "identity", dict)
    if identity.get("case_id") != case.case_id:
        raise PaeFileError(path, f"identity.case_id is {quoted(identity.get('case_id'))}, expected {case.case_id!r}")
    for name, kind in (("status", str), ("timing", dict), ("request", dict), ("usage", dict), ("trace", list)):
        field(path, artifact, name, kind)
    return PaeRun(path, recorded, payload, artifact, raw)


def read_judge_file(case: CaseDir, repetition: int, run_fingerprint: str) -> tuple[Path, dict[str, Any]]:
    """The judge file of run repetition `repetition`, checked against the evaluation manifest."""
    iteration = case.iterations.get(repetition)
    if iteration is None:
        raise PaeFileError(case.path / "manifest.json", f"no evaluation of repetition {repetition}")
    if iteration.get("run_fingerprint") != run_fingerprint:
        raise PaeFileError(case.path / "manifest.json", f"repetition {repetition} evaluated another run")
    path = case.path / "raw_outputs" / f"judge_{repetition + 1}.json"
    data = read_json(path)
    for name, kind in (("judge_name", str), ("iteration_results", list), ("raw_results", list)):
        field(path, data, name, kind)
    return path, data
