"""Python hook checks, run in a child process with a timeout and (by default) without network.

Both `path` and `import_path` hooks are gated by `security_policy.allow_local_python_hooks`.
The child gets the RunArtifact dict as JSON on stdin, a copy of the harness environment with every
secret-looking variable removed, and the case directory as its working directory.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from clawstore.evaluate.redact import SECRET_ENV_NAME
from clawstore.evaluate.specs import resolve_case_path

DEFAULT_HOOK_TIMEOUT_S = 30.0
HOOKS_DISABLED_MESSAGE = (
    "python hooks are disabled by the evaluation profile; set "
    "security_policy.allow_local_python_hooks: true to run them"
)
_RUNNER_SOURCE = (Path(__file__).with_name("hook_runner.py")).read_text(encoding="utf-8")
_RESULT_KEYS = ("passed", "message", "metadata", "outputs")
_STDERR_TAIL = 2000

# Each prefix runs a command in a fresh network namespace (only a private loopback inside).
_ISOLATION_PREFIXES: tuple[tuple[str, ...], ...] = (
    ("bwrap", "--unshare-net", "--die-with-parent", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--"),
    ("unshare", "--net"),
    ("unshare", "--net", "--map-root-user"),
)


@dataclass
class HookOutcome:
    outcome: str  # passed | failed | error
    message: str
    outputs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=8)
def _working_prefix(path_env: str) -> tuple[str, ...] | None:
    for prefix in _ISOLATION_PREFIXES:
        exe = shutil.which(prefix[0], path=path_env)
        if exe is None:
            continue
        cmd = [exe, *prefix[1:], sys.executable, "-c", "pass"]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=15, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return (exe, *prefix[1:])
    return None


def network_isolation_prefix() -> tuple[str, ...] | None:
    """The command prefix that cuts a child off the network here, or None if nothing works."""
    return _working_prefix(os.environ.get("PATH", os.defpath))


def _hook_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV_NAME.search(k)}
    # the child resolves import_path hooks exactly as this process would
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _validate_spec(hook: Mapping[str, Any]) -> str | None:
    has_path, has_import = bool(hook.get("path")), bool(hook.get("import_path"))
    if has_path == has_import:
        return "python_hook needs exactly one of 'path' or 'import_path'"
    if not isinstance(hook.get("callable_name"), str) or not hook.get("callable_name"):
        return "python_hook.callable_name must be a non-empty string"
    return None


def _interpret(value: Any) -> HookOutcome:
    if isinstance(value, bool):
        return HookOutcome("passed" if value else "failed", f"hook returned {value}")
    if not isinstance(value, dict):
        return HookOutcome(
            "error",
            f"hook returned {type(value).__name__}; expected a bool or a dict "
            "{passed, message?, metadata?, outputs?}",
        )
    extra = sorted(set(value) - set(_RESULT_KEYS))
    if extra:
        return HookOutcome(
            "error",
            f"hook result has unexpected key(s) {', '.join(extra)}; allowed: {', '.join(_RESULT_KEYS)}",
        )
    passed = value.get("passed")
    if not isinstance(passed, bool):
        return HookOutcome("error", "hook result field 'passed' must be a bool")
    message = value.get("message")
    if message is not None and not isinstance(message, str):
        return HookOutcome("error", "hook result field 'message' must be a string")
    for name in ("metadata", "outputs"):
        if value.get(name) is not None and not isinstance(value.get(name), dict):
            return HookOutcome("error", f"hook result field '{name}' must be a mapping")
    return HookOutcome(
        "passed" if passed else "failed",
        message or f"hook returned passed={passed}",
        dict(value.get("outputs") or {}),
        dict(value.get("metadata") or {}),
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_python_hook(
    hook: Mapping[str, Any],
    artifact: Mapping[str, Any],
    *,
    check_id: str,
    description: str | None,
    case_source_path: str | None,
    case_dir: str | None,
    policy: Mapping[str, Any],
    timeout_s: float = DEFAULT_HOOK_TIMEOUT_S,
) -> HookOutcome:
    """Run one hook (already-normalised spec dict) against the RunArtifact dict."""
    problem = _validate_spec(hook)
    if problem:
        return HookOutcome("error", problem)
    if not policy.get("allow_local_python_hooks"):
        return HookOutcome("error", HOOKS_DISABLED_MESSAGE)
    if hook.get("path"):
        target = resolve_case_path(str(hook["path"]), case_dir)
        if not os.path.isfile(target):
            return HookOutcome("error", f"hook file {target} does not exist")
        mode = "path"
    else:
        target, mode = str(hook["import_path"]), "import"
    prefix: tuple[str, ...] = ()
    if policy.get("network_access", "deny") != "allow":
        found = network_isolation_prefix()
        if found is None:
            return HookOutcome(
                "error",
                "network isolation is unavailable (neither bwrap nor unshare works here), so the hook "
                "was not run; security_policy.network_access: allow would run it with network",
            )
        prefix = found
    request = {
        "mode": mode,
        "target": target,
        "callable_name": hook["callable_name"],
        "module_name": "claw_hook_" + blake3.blake3(target.encode()).hexdigest()[:16],
        "artifact": artifact,
        "context": {"check_id": check_id, "description": description, "case_source_path": case_source_path},
    }
    cwd = case_dir if case_dir and os.path.isdir(case_dir) else None
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", _RUNNER_SOURCE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=_hook_env(),
        start_new_session=True,  # lets a timeout kill the hook and everything it spawned
    )
    try:
        out, err = proc.communicate(json.dumps(request).encode("utf-8"), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return HookOutcome(
            "error", f"hook timed out after {timeout_s:g}s and was stopped", metadata={"timed_out": True}
        )
    finally:
        _kill_group(proc)  # no stray grandchildren outlive the hook
    meta: dict[str, Any] = {}
    stderr_tail = err.decode("utf-8", errors="replace")[-_STDERR_TAIL:]
    try:
        reply = json.loads(out.decode("utf-8"))
    except ValueError:
        meta["stderr_tail"] = stderr_tail
        return HookOutcome("error", f"hook process exited with code {proc.returncode} without a result", {}, meta)
    if not reply.get("ok"):
        meta["stderr_tail"] = stderr_tail
        return HookOutcome("error", f"hook raised {reply.get('error')}", {}, meta)
    return _interpret(reply.get("value"))
