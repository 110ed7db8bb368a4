"""Python hook checks, run confined like `exec_shell` (docs/evaluation.md, "What a hook may read") and gated by
`security_policy.allow_local_python_hooks`, so that a suite's hook cannot read the harness's secrets or store. The
confinement: docs/evaluation.md (Details by module)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from clawstore.evaluate.inputs import hook_folder, import_root
from clawstore.evaluate.specs import case_path_name, resolve_case_path
from clawstore.host import bounded_output
from clawstore.host.confine import (
    NOBODY,
    SHELL_PATH,
    bwrap_exe,
    bwrap_unavailable_reason,
    drop_privileges,
    namespace_args,
    privileged,
    runtime_binds,
)
from clawstore.values import jsontext

DEFAULT_HOOK_TIMEOUT_S = 30.0
HOOKS_DISABLED_MESSAGE = (
    "python hooks are disabled by the evaluation profile; set "
    "security_policy.allow_local_python_hooks: true to run them"
)
_RUNNER_SOURCE = (Path(__file__).with_name("hook_runner.py")).read_text(encoding="utf-8")
_RESULT_KEYS = ("passed", "message", "metadata", "outputs")
_STDERR_TAIL = 2000

# Limits the child sets on itself (resource.setrlimit) before it loads the hook.
HOOK_MEMORY_BYTES = 1024 * 1024 * 1024
HOOK_FILE_BYTES = 64 * 1024 * 1024
HOOK_OPEN_FILES = 256
HOOK_REPLY_BYTES = 16 * 1024 * 1024  # the JSON reply a hook's process may write
SCRATCH = "/scratch"  # the hook's only writable folder (HOME and TMPDIR), emptied after each run


@dataclass
class HookOutcome:
    outcome: str  # passed | failed | error
    message: str
    outputs: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def _runtime_dirs() -> list[str]:
    """Where the interpreter and its standard library live, beyond /usr (a venv, a custom prefix)."""
    found = []
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        real = os.path.realpath(prefix)
        if os.path.isdir(real) and not real.startswith("/usr/"):
            found.append(real)
        if os.path.isdir(prefix) and prefix != real:
            found.append(prefix)
    return sorted(set(found))


def _import_root(dotted: str, case_dir: str | None) -> str | None:
    """The sys.path folder (case directory first) that holds an import_path hook's top package (found as the checks'
    key finds it: evaluate/inputs.py)."""
    return import_root(dotted, [*([case_dir] if case_dir else []), *sys.path])


def _ro_binds(paths: list[str]) -> list[str]:
    """Read-only binds at the same paths; their parents made 0755 (bwrap would make them 0700, which
    `nobody` cannot cross). A path inside one already bound needs no bind of its own."""
    argv: list[str] = []
    bound: list[str] = []
    for path in sorted(set(paths)):
        if any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        parents = list(reversed(Path(path).parents))[1:]
        for parent in parents:
            argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", path, path]
        bound.append(path)
    return argv


def confined_command(case_dir: str | None, scratch: str, extra_ro: list[str], network: bool,
                     also_ro: list[str] | None = None) -> list[str]:
    """The bwrap argv that runs the hook runner: nothing of the host but what the check needs. `extra_ro` (an
    `import_path` hook's folder) is bound and on the hook's import path; `also_ro` (a `path` hook's folder outside its
    case directory) is bound only: the `path` runner loads the file by its path and puts no folder on `sys.path`."""
    readable = [*_runtime_dirs(), *extra_ro, *(also_ro or []), *([case_dir] if case_dir else [])]
    argv = [bwrap_exe(), "--tmpfs", "/", *runtime_binds(), *_ro_binds(readable)]
    argv += ["--bind", scratch, SCRATCH, *namespace_args(network), "--setenv", "PATH", SHELL_PATH,
             "--setenv", "HOME", SCRATCH, "--setenv", "TMPDIR", SCRATCH, "--setenv", "LANG", "C.UTF-8",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "PYTHONPATH", os.pathsep.join(extra_ro)]
    argv += ["--chdir", case_dir or SCRATCH]
    return [*argv, "--", *drop_privileges(), sys.executable, "-I" if not extra_ro else "-s", "-c", _RUNNER_SOURCE]


def network_isolation_prefix() -> tuple[str, ...] | None:
    """The bwrap prefix hooks run under, or None when bubblewrap cannot confine a child here."""
    return None if bwrap_unavailable_reason() else (bwrap_exe(),)


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
    # The sandbox has the case directory at its real path (a symlinked case folder's name does not exist there): the
    # hook's file and module are looked for under that path too. (Before session 75 a hook in a symlinked case folder
    # was named by the symlink: every one ended `error`, FileNotFoundError.)
    real_dir = os.path.realpath(case_dir) if case_dir and os.path.isdir(case_dir) else None
    if hook.get("path"):
        target = resolve_case_path(str(hook["path"]), real_dir or case_dir)
        if not os.path.isfile(target):
            return HookOutcome("error", f"hook file {case_path_name(str(hook['path']))} does not exist")
        mode = "path"
    else:
        target, mode = str(hook["import_path"]), "import"
    reason = bwrap_unavailable_reason()
    if reason is not None:
        return HookOutcome("error", f"{reason}; python hooks never run unconfined, so the hook was not run",
                           metadata={"not_run": True})
    extra_ro: list[str] = []
    # A hook file outside its case directory (`../../shared/check.py`, shared by cases): its folder is bound too.
    # (Before session 75 it was not: every such check ended `error`, FileNotFoundError, after the build had paid for
    # the runs; then validation refused the config, which the schema allows.)
    also_ro = [folder] if mode == "path" and (folder := hook_folder(str(hook["path"]), real_dir or case_dir)) else []
    if mode == "import":
        root = _import_root(target, real_dir)
        if root is None:
            return HookOutcome("error", f"import_path {target}: module not found on the case directory or sys.path")
        extra_ro.append(root)
    request = {
        "mode": mode,
        "target": target,
        "callable_name": hook["callable_name"],
        "module_name": "claw_hook_" + blake3.blake3(target.encode()).hexdigest()[:16],
        "artifact": artifact,
        "context": {"check_id": check_id, "description": description, "case_source_path": case_source_path},
        "limits": {"cpu_seconds": int(timeout_s) + 1, "memory_bytes": HOOK_MEMORY_BYTES,
                   "file_bytes": HOOK_FILE_BYTES, "open_files": HOOK_OPEN_FILES},
    }
    with tempfile.TemporaryDirectory(prefix="claw-hook-") as scratch:
        if privileged():
            os.chown(scratch, NOBODY, NOBODY)
        network = policy.get("network_access", "deny") == "allow"
        return _run_confined(confined_command(real_dir, scratch, extra_ro, network, also_ro), request, timeout_s)


def _no_result(returncode: int, stderr_tail: str) -> HookOutcome:
    """The outcome of a hook process that wrote no reply. That says nothing about the run (a hook's own failure, a
    raise, MemoryError at its limit, is a reply): bubblewrap failing to set up the sandbox once its probe passed
    (`not_run`), or the process killed by a signal (the kernel's OOM killer, anyone's kill: bwrap reports its child's
    signal N as exit code 128+N) or gone without replying (`os._exit`, the interpreter failing to start) (`no_result`).
    Either leaves its checks record not reusable (builder/eval_layer.py `hook_fault`); before session 76 both were
    the checks' outcome, reused by every later build."""
    meta: dict[str, Any] = {"stderr_tail": stderr_tail}
    lines = [line for line in stderr_tail.splitlines() if line.strip()]
    if returncode == 1 and lines and lines[-1].startswith("bwrap: "):
        return HookOutcome("error", f"bubblewrap failed to start the hook's sandbox ({lines[-1].strip()}); the hook "
                           "was not run", {}, {**meta, "not_run": True})
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode <= 128 + 64 else None
    if number is not None:
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        message = f"hook process was killed by signal {number}{name} before it gave a result"
    else:
        message = f"hook process exited with code {returncode} without a result"
    return HookOutcome("error", message, {}, {**meta, "no_result": True})


def _run_confined(argv: list[str], request: dict[str, Any], timeout_s: float) -> HookOutcome:
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": SHELL_PATH, "LANG": "C.UTF-8"},  # bwrap itself never sees our secrets
            start_new_session=True,  # lets a timeout kill the hook and everything it spawned
        )
    except OSError as exc:  # (bwrap gone or broken since its probe; fork refused: EAGAIN, ENOMEM)
        # The machine's state, not the run's: not run, so not reusable (builder/eval_layer.py `hook_fault`); before
        # session 76 the error left the checks as a traceback.
        return HookOutcome("error", f"bubblewrap could not be started ({exc.strerror or exc}); the hook was not run",
                           {}, {"not_run": True})
    try:
        # The reply (stdout) is bounded; the hook's prints (stderr) keep only their tail.
        output = bounded_output.collect(proc, timeout_s, lambda: bounded_output.kill_group(proc),
                                        stdout_cap=HOOK_REPLY_BYTES, stderr_cap=4 * _STDERR_TAIL, stderr_keep="tail",
                                        stdin=json.dumps(request).encode("utf-8"))
    finally:
        bounded_output.kill_group(proc)  # no stray grandchildren outlive the hook
    if output.timed_out:
        return HookOutcome(
            "error", f"hook timed out after {timeout_s:g}s and was stopped", metadata={"timed_out": True}
        )
    if output.overflowed:
        return HookOutcome("error", f"hook's reply is larger than {HOOK_REPLY_BYTES >> 20} MiB; the hook was stopped")
    out = output.stdout
    meta: dict[str, Any] = {}
    stderr_tail = output.stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL:]
    try:
        reply = jsontext.loads_reply(out.decode("utf-8"))
    except ValueError as exc:
        if proc.returncode != 0 or not out.strip():
            return _no_result(proc.returncode, stderr_tail)
        # A reply given whole (the process ended well) that does not read: what the hook returned (NaN, Infinity, a
        # value nested too deeply), the same at every run: its outcome, kept (not `no_result`, which every build runs
        # again, exiting 1)
        return HookOutcome("error", f"hook's reply is not valid JSON ({exc})", {}, {"stderr_tail": stderr_tail})
    if not reply.get("ok"):
        meta["stderr_tail"] = stderr_tail
        return HookOutcome("error", f"hook raised {reply.get('error')}", {}, meta)
    return _interpret(reply.get("value"))
