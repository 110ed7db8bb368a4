"""A real two-node Ray cluster on the loopback address 127.0.0.2, started and stopped by the tests.

127.0.0.2 (not 127.0.0.1): Ray replaces 127.0.0.1 by the machine's outside address, and a test cluster
must stay on loopback. Both nodes are `ray start` processes of this interpreter's environment, so their
workers import this checkout; the API key reaches them through their own environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

HOST = "127.0.0.2"


# Ports a node's own parts take by default (the GCS, the dashboard, its agent, the client server, the workers): a GCS
# port drawn among them makes `ray start` refuse ("the same port is used by multiple components": 52365 once in CI).
RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 52365, *range(10002, 20000)})


def _bound_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _free_port(draw: Callable[[], int] = _bound_port) -> int:
    """A port free now that none of a Ray node's parts takes by default."""
    while (port := draw()) in RAY_DEFAULT_PORTS:
        pass
    return port


@dataclass
class RayCluster:
    address: str
    ray: str
    env: dict[str, str]

    port: int = 0
    temp: str = ""

    def worker_pids(self, title: bytes = b"ray::_ChatWorker") -> list[int]:
        """Processes of this cluster's provider actors (`ray::_ChatWorker`; `title`: Ray's title of a worker running
        a task, `ray::<function>`) started by one of its raylets: never another cluster's on the machine (another
        test run's), which a test that kills a worker must not touch."""
        ours = set(_cluster_pids(self.port, self.temp))
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if cmdline.startswith(title) and parent in ours:
                    pids.append(int(entry.name))
        return pids


def ray_available() -> str | None:
    """None when Ray can run here, else why not."""
    ray = Path(sys.executable).parent / "ray"
    if not ray.exists():
        return "Ray is not installed in this environment (pip install -e '.[test]')"
    return None


def need_ray() -> None:
    """Skip the test where Ray cannot run; in CI (which installs it) fail it instead."""
    reason = ray_available()
    if reason:
        pytest.fail(reason) if os.environ.get("CI") == "true" else pytest.skip(reason)


@contextmanager
def ray_cluster(env: dict[str, str], prestart: bool = True) -> Iterator[RayCluster]:
    """`prestart`: nodes started as docs/distributed.md recommends, each starting its worker processes at
    once (`RAY_enable_worker_prestart=1`); else Ray's default, which starts them for the first driver."""
    ray = str(Path(sys.executable).parent / "ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="clawray-", dir="/tmp")  # short: Ray's socket paths are length-limited
    full_env = {**os.environ, **env, "RAY_DEDUP_LOGS": "0", "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_enable_worker_prestart": "1" if prestart else "0"}
    common = ["--num-cpus", "1", "--disable-usage-stats", "--node-ip-address", HOST]
    try:
        subprocess.run([ray, "start", "--head", "--port", str(port), "--include-dashboard", "false",
                        "--temp-dir", temp, *common], env=full_env, check=True, capture_output=True, timeout=180)
        subprocess.run([ray, "start", "--address", f"{HOST}:{port}", *common], env=full_env, check=True,
                       capture_output=True, timeout=180)
        yield RayCluster(f"{HOST}:{port}", ray, full_env, port, temp)
    finally:
        _stop(port, temp)
        shutil.rmtree(temp, ignore_errors=True)


def _cluster_pids(port: int, temp: str) -> list[int]:
    """This cluster's processes only (`ray stop` would stop every Ray cluster of the machine)."""
    marks = (f"{HOST}:{port}".encode(), f"gcs_server_port={port}".encode(), temp.encode())
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if any(mark in cmdline for mark in marks):
                pids.append(int(entry.name))
    return pids


def _stop(port: int, temp: str) -> None:
    # Most of a cluster's processes end within 0.1 s of SIGTERM; two of them (measured) never do, so a
    # long grace only made every teardown wait it out (10 s each, three clusters a suite).
    for sig, grace in ((signal.SIGTERM, 2), (signal.SIGKILL, 10)):
        pids = _cluster_pids(port, temp)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while _cluster_pids(port, temp) and time.monotonic() < deadline:
            time.sleep(0.1)
