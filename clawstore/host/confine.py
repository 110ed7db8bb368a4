"""The bubblewrap confinement shared by `exec_shell` (runners/sandbox.py) and python hooks (evaluate/hooks.py): private
namespaces, no network unless allowed, no capabilities, and `nobody` with no_new_privs when run as root. Why each:
docs/runners.md (Details by module)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

NOBODY = 65534  # the child's uid/gid when the harness itself runs as root
SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Host system directories a confined child sees read-only; symlinks on the host stay symlinks.
RUNTIME_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")


def privileged() -> bool:
    return os.geteuid() == 0


def bwrap_exe() -> str:
    return shutil.which("bwrap") or "bwrap"


def runtime_binds(names: tuple[str, ...] = RUNTIME_DIRS) -> list[str]:
    """Read-only views of the host's system directories (links recreated as links)."""
    argv: list[str] = []
    for name in names:
        host = "/" + name
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    return argv


def namespace_args(network: bool) -> list[str]:
    """A private /proc, /dev, pid, IPC, UTS (and network) namespace; the right privilege drop."""
    argv = ["--proc", "/proc", "--dev", "/dev",
            "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        argv.append("--unshare-net")
    if privileged():
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    return argv + ["--die-with-parent", "--new-session", "--clearenv"]


def drop_privileges() -> list[str]:
    """The command prefix (after bwrap's `--`) that makes a root harness's child `nobody`."""
    if not privileged():
        return []
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


_probe: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def bwrap_unavailable_reason() -> str | None:
    """None if a confined child can start here, else why not (probed once per process)."""
    path = os.environ.get("PATH", os.defpath)  # per PATH: a test (or a user) may hide bwrap
    with _probe_lock:
        if path not in _probe:
            _probe[path] = _probe_bwrap()
        return _probe[path]


def _probe_bwrap() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [bwrap_exe(), "--tmpfs", "/", *runtime_binds(), *namespace_args(False), "--", *drop_privileges(), "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=15, env={"PATH": SHELL_PATH})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return "bubblewrap cannot create namespaces here" + (f": {detail[-1]}" if detail else "")
    return None
