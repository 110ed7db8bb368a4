"""A process that outlives a build and removes its OpenClaw containers the moment the build dies (SIGKILL, the OOM
killer, a CI cancel), not at OpenClaw's own timeout or the next sweep. When and how: docs/openclaw.md (Details by
module)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

NAME = "claw-watchdog"  # its $0: what `ps` shows
# It waits for a line on the pipe whose write end only the build holds: "done" (a normal end) and it exits without
# asking the engine; end of file without it (the kernel closed the write end: the build died) and it becomes the
# Python process below, which removes the containers. It runs in the background of the shell started, which exits at
# once: no child of the build's process (a Ray worker's children are killed with it). A shell: ~4 ms of the build's
# time (1 ms of CPU) to start, where Python and its imports take 55-110 ms, paid for every build; Python's only once a
# build was killed (docs/scale/building.md, Session 80).
SCRIPT = 'exec 3<&0; (IFS= read -r line <&3; [ "$line" = done ] || exec "$@") &'
DONE = b"done\n"
LEASE_GONE_S = 10.0  # how long the build's lease may outlive the end of file: the kernel closes its files in turn
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


class _Watched:
    def __init__(self, write_fd: int | None):
        self.write_fd, self.runs = write_fd, 0  # (None: it could not be started)
        self.interrupted = False  # a run was left by SystemExit or KeyboardInterrupt: its cleanup may not have run


_lock = threading.Lock()
_watched: dict[tuple[str, ...], _Watched] = {}  # by sweep


@contextlib.contextmanager
def watching(*sweep: str) -> Iterator[None]:
    """While the block runs, a watchdog removes the containers `sweep` names if this process dies: `"build", <store>,
    <build id>`, a build's (labelled with it, found through its records in the store: orphans.stop_orphans), or
    `"label", <cli>, <key=value>`, a label's (a Ray attempt's, on its node: orphans.stop_labelled). One per sweep
    however many runs share it (a build's in flight); the last run out tells it done, unless a run was left by an
    interrupt (a Ray worker told to exit, a Ctrl-C): its cleanup may have been cut short (the CLI it started killed
    with the worker), so the watchdog sweeps, as it would after a SIGKILL."""
    with _lock:
        entry = _watched.get(sweep)
        if entry is None:
            entry = _watched[sweep] = _start(sweep)
        entry.runs += 1
    try:
        yield
    except Exception:
        raise
    except BaseException:
        entry.interrupted = True
        raise
    finally:
        with _lock:
            entry.runs -= 1
            if entry.runs == 0:
                del _watched[sweep]
                _end(entry)


def _start(sweep: tuple[str, ...]) -> _Watched:
    """The watchdog started, or none where it cannot be (no process or pipe to be had: the runs go on, the next
    build or gc is the backstop, as before session 80)."""
    try:
        read, write = os.pipe()  # (both ends close-on-exec: no `docker run` or other child inherits the write end)
    except OSError:
        return _Watched(None)
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", SCRIPT, NAME, sys.executable, "-m", __name__, *sweep], stdin=read,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_environment(), close_fds=True,
            start_new_session=True)  # (a Ctrl-C or a kill of the build's process group leaves it)
    except OSError:
        os.close(write)
        return _Watched(None)
    finally:
        os.close(read)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)  # (the shell, gone once it started the watchdog in its background)
    return _Watched(write)


def _end(entry: _Watched) -> None:
    if entry.write_fd is None:
        return
    if not entry.interrupted:
        with contextlib.suppress(OSError):  # (a watchdog killed meanwhile: nothing to tell)
            os.write(entry.write_fd, DONE)
    os.close(entry.write_fd)


def _environment() -> dict[str, str]:
    """This process's environment (the CLI's engine as the runs used it: DOCKER_HOST, a podman's XDG_RUNTIME_DIR)
    without anything named like a secret but the engine's own variables, and with this clawstore on its path."""
    from clawstore.runners.openclaw.container import ENGINE_VARS

    env = {k: v for k, v in os.environ.items() if k in ENGINE_VARS or not _SECRET_NAME.search(k)}
    here = str(Path(__file__).resolve().parents[3])
    if here not in sys.path:  # (an installed claw's folder is site-packages: never put before the standard library)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    return env


# --- the watchdog, once the build died ----------------------------------------------------------------------------
def sweep(argv: list[str]) -> None:
    if argv[:1] == ["build"] and len(argv) == 3:
        _sweep_build(Path(argv[1]), argv[2])
    elif argv[:1] == ["label"] and len(argv) == 3:
        from clawstore.runners.openclaw.container import EngineSettings
        from clawstore.runners.openclaw.orphans import stop_labelled

        stop_labelled(EngineSettings(docker_cli=argv[1]), argv[2])  # (the engine of its environment: the run's)


def _sweep_build(root: Path, build_id: str) -> None:
    """stop_orphans for this build, as the next build would: its record names the CLI and engine, and is removed once
    the engine answered (a `claw status` then says nothing runs on). Only once its lease is let go: the kernel may
    close the build's pipe before its lease's file."""
    from clawstore.runners.openclaw.orphans import BUILD_LEASE, stop_orphans
    from clawstore.store import Store

    if not (root / "containers").is_dir():  # (a store removed since: nothing to do, and nothing to make)
        return
    store = Store(root, create=False)
    deadline = time.monotonic() + LEASE_GONE_S
    while any(lease.alive and lease.purpose == BUILD_LEASE + build_id for lease in store.list_leases()):
        if time.monotonic() > deadline:
            return  # (alive after all: not ours to stop; the next build or gc decides)
        time.sleep(0.05)
    stop_orphans(store, build_id)


if __name__ == "__main__":
    with contextlib.suppress(Exception):  # (nobody reads its output: the next build or gc is the backstop)
        sweep(sys.argv[1:])
