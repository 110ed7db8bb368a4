"""Run a case's deterministic checks against one run and summarise them.

`evaluate_checks` is pure given its inputs (the RunArtifact dict, the run's captured files, the
host files named by `check_inputs`, the hook sources): its JSON-ready result is what the build
stores as the checks node's output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from clawstore.evaluate.declarative import DEFAULT_DIMENSIONS, KINDS, CheckContext, CheckSpecError
from clawstore.evaluate.evidence import DIMENSIONS, SandboxFiles, WorkspaceFiles, as_sandbox, as_workspace
from clawstore.evaluate.hooks import DEFAULT_HOOK_TIMEOUT_S, run_python_hook
from clawstore.evaluate.redact import redact_value
from clawstore.evaluate.specs import check_spec, security_policy

CHECKS_FORMAT_VERSION = 1
OUTCOMES = ("passed", "failed", "error")


def _result(spec: Mapping[str, Any], kind: str, source: str) -> dict[str, Any]:
    dims = spec["dimensions"] or list(DEFAULT_DIMENSIONS.get(kind, []))
    return {
        "check_id": spec["check_id"],
        "kind": kind,
        "source": source,
        "description": spec.get("description"),
        "dimensions": sorted(dims),
        "outcome": "error",
        "message": "",
        "outputs": {},
        "metadata": {},
    }


def _run_declarative(spec: Mapping[str, Any], ctx: CheckContext) -> dict[str, Any]:
    params = spec["declarative"]
    kind = str(params.get("kind") or "")
    res = _result(spec, kind or "unknown", "declarative")
    func = KINDS.get(kind)
    if func is None:
        res["message"] = f"unknown declarative check kind '{kind}' (known: {', '.join(KINDS)})"
        return res
    try:
        verdict = func(params, ctx)
    except CheckSpecError as exc:
        res["message"] = f"{kind}: {exc}"
        return res
    except Exception as exc:  # a check must never take the whole evaluation down
        res["message"] = f"{kind} raised {type(exc).__name__}: {exc}"
        return res
    res["outcome"] = "passed" if verdict.passed else "failed"
    res["message"] = verdict.message
    res["outputs"] = verdict.outputs
    return res


def evaluate_checks(
    checks: Sequence[Any],
    artifact: Mapping[str, Any],
    *,
    sandbox_files: SandboxFiles | Mapping[str, bytes | str] | None = None,
    workspace_files: WorkspaceFiles | Mapping[str, bytes | str] | None = None,
    case_source_path: str | os.PathLike[str] | None = None,
    security: Any = None,
    hook_timeout_s: float = DEFAULT_HOOK_TIMEOUT_S,
) -> dict[str, Any]:
    """Evaluate every check in order.

    `checks`: DeterministicCheck models or dicts. `case_source_path`: the case's test.yaml (relative
    check and hook paths resolve against its directory). `security`: SecurityPolicy model or dict.
    Returns `{format_version, checks: [...], summary: {...}, passed, dimension_scores, warnings}`.
    """
    policy = security_policy(security)
    source_path = os.fspath(case_source_path) if case_source_path is not None else None
    case_dir = os.path.dirname(source_path) if source_path else None
    ctx = CheckContext(artifact, as_sandbox(sandbox_files), as_workspace(workspace_files), case_dir)
    results: list[dict[str, Any]] = []
    for raw in checks:
        spec = check_spec(raw)
        if spec["declarative"] is not None and spec["python_hook"] is None:
            results.append(_run_declarative(spec, ctx))
        elif spec["python_hook"] is not None and spec["declarative"] is None:
            res = _result(spec, "python_hook", "python_hook")
            res["outputs"] = {"callable_name": spec["python_hook"].get("callable_name")}
            hook = run_python_hook(
                spec["python_hook"],
                artifact,
                check_id=spec["check_id"],
                description=spec.get("description"),
                case_source_path=source_path,
                case_dir=case_dir,
                policy=policy,
                timeout_s=hook_timeout_s,
            )
            res.update(outcome=hook.outcome, message=hook.message, metadata=hook.metadata)
            res["outputs"] = {**res["outputs"], **hook.outputs}
            results.append(res)
        else:
            res = _result(spec, "unknown", "declarative")
            res["message"] = "a check needs exactly one of 'declarative' or 'python_hook'"
            results.append(res)
    if policy["redact_secrets"]:
        results = redact_value(results)
    scores, warnings = dimension_scores(results)
    summary = summarize(results)
    return {
        "format_version": CHECKS_FORMAT_VERSION,
        "checks": results,
        "summary": summary,
        "passed": summary["failed_checks"] == 0 and summary["error_checks"] == 0,
        "dimension_scores": scores,
        "warnings": warnings,
    }


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {o: sum(1 for r in results if r.get("outcome") == o) for o in OUTCOMES}
    return {
        "total_checks": len(results),
        "passed_checks": counts["passed"],
        "failed_checks": counts["failed"],
        "error_checks": counts["error"],
    }


def dimension_scores(results: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float | None], list[str]]:
    """Per dimension: mean of 10 (passed) / 0 (failed) over its checks; errors excluded; none → None.

    Informational only: the final score and dimensions come from the judge.
    """
    marks: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
    warnings: list[str] = []
    for r in results:
        if r.get("outcome") == "error":
            if r.get("dimensions"):
                warnings.append(
                    f"deterministic check '{r.get('check_id')}' ended with an error and was excluded "
                    "from dimension scoring"
                )
            continue
        for dim in r.get("dimensions") or []:
            if dim in marks:
                marks[dim].append(10.0 if r.get("outcome") == "passed" else 0.0)
    return {d: (sum(v) / len(v) if v else None) for d, v in marks.items()}, warnings
