"""A per-run sandbox directory that the llm_probe tools act in, as the root `/` of the run (file tools and shell agree).

The path model and its limits: docs/runners.md (The tool sandbox; Details by module)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from clawstore.host import bounded_output
from clawstore.host.confine import (
    NOBODY,
    RUNTIME_DIRS,
    SHELL_PATH,
    bwrap_exe,
    drop_privileges,
    namespace_args,
    privileged,
    runtime_binds,
)
from clawstore.host.run_limits import MAX_WORKSPACE_BYTES

WORKDIR = "/work"
OUTPUT_LIMIT = 64 * 1024
MAX_SYMLINKS = 40
# Host system directories the shell sees read-only: the runtime plus /etc (the shell's tools read it).
SYSTEM_DIRS = (*RUNTIME_DIRS, "etc")
# Limits of each process the shell starts (hard: it cannot raise them), so a model's `yes > f`, huge
# allocation or fork bomb cannot fill the host's disk or memory before the timeout. A file bigger than
# all a run may leave is never kept; the data limit counts what a process writes to, not the address
# space it reserves (V8 and the JVM reserve gigabytes they never touch).
SHELL_FILE_BYTES = MAX_WORKSPACE_BYTES
SHELL_DATA_BYTES = 4 << 30
SHELL_PROCESSES = 1024  # as `nobody` only: the limit counts every process of the uid (the harness's too)


class SandboxError(Exception):
    """A path escapes or breaks the sandbox, or the shell sandbox cannot be created."""


def resolve_path(root: Path, path: str, cwd: str = WORKDIR) -> Path:
    """Map a path as the run sees it to the host path inside `root`, chroot-style.

    Absolute paths are relative to the sandbox root; `~` is the work directory; `..` never climbs
    above the root; symlinks are followed with their targets re-rooted in the sandbox.
    """
    if "\x00" in path:
        raise SandboxError("path contains a NUL byte")
    if path == "~" or path.startswith("~/"):
        path = WORKDIR + path[1:]
    start = PurePosixPath(path) if path.startswith("/") else PurePosixPath(cwd) / path
    pending = list(start.parts[1:])  # drop the leading "/"
    resolved: list[str] = []
    links = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        host = root.joinpath(*resolved, part)
        if host.is_symlink():
            links += 1
            if links > MAX_SYMLINKS:
                raise SandboxError(f"too many levels of symbolic links in {path}")
            target = PurePosixPath(os.readlink(host))
            if target.is_absolute():
                resolved = []
                pending = list(target.parts[1:]) + pending
            else:
                pending = list(target.parts) + pending
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def to_sandbox_path(root: Path, host: Path) -> str:
    """The path the run sees for a host path inside the sandbox."""
    return "/" + host.relative_to(root).as_posix() if host != root else "/"


@dataclass(frozen=True)
class ShellResult:
    command: str
    returncode: int
    stdout: str
    stderr: str
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.command, "returncode": self.returncode,
                               "stdout": self.stdout, "stderr": self.stderr}
        if self.truncated:
            out["truncated"] = True
        return out


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


def bwrap_unavailable_reason() -> str | None:
    """None if bubblewrap can create its namespaces here, else why not (probed once per process)."""
    with _probe_lock:
        if "reason" not in _probe_result:
            _probe_result["reason"] = _probe_bwrap()
        return _probe_result["reason"]


def _probe_bwrap() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    with tempfile.TemporaryDirectory(prefix="claw-bwrap-probe-") as tmp:
        probe = Sandbox(Path(tmp))
        created = probe._prepare_mountpoints()
        if privileged():
            _hand_over(probe.root)
        try:
            done = subprocess.run(probe.shell_command("true", network=False), capture_output=True,
                                  timeout=15, env={"PATH": SHELL_PATH})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start: {exc}"
        finally:
            probe._remove_mountpoints(created)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return "bubblewrap cannot create namespaces here" + (f": {detail[-1]}" if detail else "")
    return None


class Sandbox:
    """The per-run directory; file tools resolve paths through it and the shell runs inside it."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, path: str) -> Path:
        return resolve_path(self.root, path)

    def shell_command(self, command: str, network: bool) -> list[str]:
        """The bwrap argv that runs `command` with the sandbox as `/` (confinement: clawstore/host/confine.py)."""
        argv = [bwrap_exe(), "--bind", str(self.root), "/", *runtime_binds(SYSTEM_DIRS), *namespace_args(network),
                "--chdir", WORKDIR, "--setenv", "PATH", SHELL_PATH, "--setenv", "HOME", WORKDIR,
                "--setenv", "LANG", "C.UTF-8", "--", *drop_privileges()]
        # The limits are set by a first bash, as the shell's own user, which then becomes the command's.
        return argv + ["/bin/bash", "-c", f'ulimit {_limit_flags()} && exec /bin/bash -c "$1"', "bash", command]

    def run_shell(self, command: str, timeout: float, network: bool = False) -> ShellResult:
        """Run `command` with bash inside bubblewrap; never unsandboxed.

        Raises SandboxError if bubblewrap is unavailable, TimeoutError when `timeout` passes
        (the whole sandbox, background processes included, is killed).
        """
        reason = bwrap_unavailable_reason()
        if reason is not None:
            raise SandboxError(f"{reason}; exec_shell is disabled (it never runs unsandboxed)")
        created = self._prepare_mountpoints()
        if privileged():
            _hand_over(self.root)
        try:
            proc = subprocess.Popen(
                self.shell_command(command, network),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env={"PATH": SHELL_PATH, "LANG": "C.UTF-8"},  # bwrap itself never sees our secrets
                start_new_session=True,
            )
            # Past the cap, output is read and dropped: a command may print without end (`yes`).
            output = bounded_output.collect(proc, timeout, lambda: bounded_output.kill_group(proc),
                                            stdout_cap=OUTPUT_LIMIT + 1, stderr_cap=OUTPUT_LIMIT + 1,
                                            stop_on_overflow=False)
            if output.timed_out:
                raise TimeoutError(f"command timed out after {timeout:g}s")
        finally:
            self._remove_mountpoints(created)
        stdout, cut_out = _clip(output.stdout)
        stderr, cut_err = _clip(output.stderr)
        return ShellResult(command, proc.returncode, stdout, stderr, cut_out or cut_err)

    def _prepare_mountpoints(self) -> list[Path]:
        """Create /work and /tmp if missing; remember which names bwrap will add so we can tidy up."""
        created: list[Path] = []
        for name in ("work", "tmp"):
            path = self.root / name
            if not path.exists() and not path.is_symlink():
                path.mkdir()
                created.append(path)
        for name in (*SYSTEM_DIRS, "proc", "dev"):
            path = self.root / name
            if not path.exists() and not path.is_symlink():
                created.append(path)
        return created

    def _remove_mountpoints(self, created: list[Path]) -> None:
        """Drop the empty directories and links that only exist as mount points (not run output)."""
        for path in created:
            try:
                if path.is_symlink():
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
            except OSError:
                pass


def _limit_flags() -> str:
    """`ulimit` flags for the SHELL_* limits, none above the harness's own hard limit (ulimit could not
    raise it, and the command would not run)."""
    wanted = [("f", resource.RLIMIT_FSIZE, SHELL_FILE_BYTES, 1024), ("d", resource.RLIMIT_DATA, SHELL_DATA_BYTES, 1024)]
    if privileged():
        wanted.append(("u", resource.RLIMIT_NPROC, SHELL_PROCESSES, 1))
    flags = []
    for flag, which, value, unit in wanted:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        flags.append(f"-{flag} {value // unit}")
    return " ".join(flags)


def _hand_over(root: Path) -> None:
    """Make the sandbox owned by `nobody` so the unprivileged shell can work in what tools wrote.
    (A walk of its own: `os.walk` recurses once per level, and a shell can nest thousands deep.)"""
    if os.lstat(root).st_uid != NOBODY:
        os.lchown(root, NOBODY, NOBODY)
    pending = [str(root)]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.stat(follow_symlinks=False).st_uid != NOBODY:
                    os.lchown(entry.path, NOBODY, NOBODY)
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)



def _clip(data: bytes) -> tuple[str, bool]:
    if len(data) > OUTPUT_LIMIT:
        return data[:OUTPUT_LIMIT].decode("utf-8", "replace") + "\n... [truncated]", True
    return data.decode("utf-8", "replace"), False
