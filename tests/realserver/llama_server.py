"""llama-cpp-python's OpenAI-compatible server for the real-server tests, and its one-time install.

llama-cpp-python compiles llama.cpp from its sdist (minutes on two cores), so `prepare` builds the
wheel once into ~/.cache/clawstore/wheels/ (keyed by version and build flags) and installs
from there on later runs, as tests/openclaw/engine.py caches the OpenClaw image.

    python3 -m tests.realserver.llama_server prepare     # CI (.ci/run): build or reuse the wheel, install it
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

VERSION = "0.3.36"
# No multimodal library (the tests send text only); a portable x86-64 build, not this CPU's -march.
CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
START_TIMEOUT_S = 60.0
BUILD_TIMEOUT_S = 3600.0


def installed_version() -> str | None:
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return None


def server_missing() -> str | None:
    """Why the server cannot be started here, or None when it can."""
    version = installed_version()
    if version is None:
        return "llama-cpp-python is not installed (python3 -m tests.realserver.llama_server prepare)"
    done = subprocess.run([sys.executable, "-c", "import llama_cpp.server.app"], capture_output=True, text=True,
                          timeout=60, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"llama-cpp-python {version} has no working server ({last}): install llama-cpp-python[server]"
    return None


def wheel_dir() -> Path:
    cache = Path(os.environ.get("CLAW_CACHE_DIR") or Path.home() / ".cache" / "clawstore")
    flags = hashlib.sha256(CMAKE_ARGS.encode()).hexdigest()[:8]  # (the wheel loads llama.cpp by ctypes: any Python 3)
    return cache / "wheels" / f"llama-cpp-python-{VERSION}-{flags}"


def build_wheel(target: Path) -> float:
    """Compile the pinned sdist into a wheel in `target`; return the seconds it took."""
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial.", dir=target.parent))
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
    began = time.monotonic()
    try:
        subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir",
                        "--no-binary", "llama-cpp-python", "-w", str(partial), f"llama-cpp-python=={VERSION}"],
                       env=env, check=True, timeout=BUILD_TIMEOUT_S)
        partial.rename(target)  # several checkouts may build at once: the first one to finish wins
    except OSError:
        if not target.is_dir():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return time.monotonic() - began


def prepare() -> int:
    if installed_version() == VERSION and server_missing() is None:
        print(f"llama-cpp-python {VERSION} with its server is installed", file=sys.stderr)
        return 0
    wheels = wheel_dir()
    if not any(wheels.glob("*.whl")):
        wheels.parent.mkdir(parents=True, exist_ok=True)
        print(f"building llama-cpp-python {VERSION} (minutes: it compiles llama.cpp)", file=sys.stderr)
        took = build_wheel(wheels)
        print(f"llama-cpp-python {VERSION} wheel built in {took:.0f}s into {wheels}", file=sys.stderr)
    # --only-binary: the cached wheel or nothing, never a second compile.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--only-binary", "llama-cpp-python",
                    "--find-links", str(wheels), f"llama-cpp-python[server]=={VERSION}"], check=True)
    problem = server_missing()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    print(f"llama-cpp-python {VERSION} with its server installed from {wheels}", file=sys.stderr)
    return 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    base_url: str
    api_key: str
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _end_with_parent() -> None:
    """In the server's process before exec: SIGTERM when the test process dies (a killed session
    leaves no server behind). Linux's PR_SET_PDEATHSIG; elsewhere nothing."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (AttributeError, OSError):
        pass


def _answers(base_url: str, api_key: str) -> bool:
    try:
        return httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=2).is_success
    except httpx.HTTPError:
        return False


def start_server(model: Path, n_ctx: int, api_key: str, log: Path) -> tuple[LlamaServer | None, str]:
    """The server on a free loopback port with `model` loaded; (server, "") or (None, why not)."""
    problem = server_missing()
    if problem is not None:
        return None, problem
    port = _free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1", "--n_threads_batch", "1",
             "--api_key", api_key],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_end_with_parent)
    server = LlamaServer(process, f"http://127.0.0.1:{port}/v1", api_key, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
            return None, f"llama_cpp.server exited {process.returncode}: {tail}"
        if _answers(server.base_url, api_key):
            return server, ""
        time.sleep(0.2)
    server.stop()
    return None, f"llama_cpp.server did not answer within {START_TIMEOUT_S:.0f}s"


def main(argv: list[str]) -> int:
    if argv != ["prepare"]:
        print("usage: python3 -m tests.realserver.llama_server prepare", file=sys.stderr)
        return 2
    return prepare()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
