"""A private Docker engine for the real-engine tests (and for CI to build the image cache once).

`dockerd --iptables=false --bridge=none` with its data, exec root and socket under a temp dir, so it
neither touches nor needs the machine's own engine. `CLAW_TEST_DOCKER_HOST` points the tests at an
existing engine instead.

    python3 -m tests.openclaw.engine prepare     # CI: build/cache the OpenClaw test image
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from clawstore.host.durable import process_alive

REPO = Path(__file__).resolve().parents[2]
IMAGE_SCRIPT = REPO / ".ci" / "openclaw_image.sh"
LABEL = "clawstore.openclaw"
START_TIMEOUT_S = 60.0
IMAGE_TIMEOUT_S = 1200.0
# The engine's data and the image's second build live in RAM when /dev/shm has room: on this project's
# 2-core VMs the disk's journal made starting an engine, loading the image and deleting it all again
# cost 64 s of CPU (48 s of it the kernel's), against 24 s in RAM; the suite is bound by CPU.
RAM = Path("/dev/shm")
RAM_NEEDED = 6 * 2**30
RAM_PREFIX = "claw-test-"
MNT_DETACH = 2  # umount2's lazy flag, as `umount -l`


def in_ci() -> bool:
    """CI=true (GitHub Actions, GitLab, .ci/run): a missing engine or image is a failure there."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@dataclass
class DockerEngine:
    host: str
    image: str
    process: subprocess.Popen[bytes] | None = None
    root: Path | None = None
    docker_cli: str = "docker"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def docker(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.docker_cli, *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env(), check=False)

    def our_containers(self) -> list[str]:
        done = self.docker("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}")
        return [line for line in done.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        for name in self.our_containers():
            self.docker("rm", "-f", name)
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.root is not None:
            _unmount_below(self.root)
            shutil.rmtree(self.root, ignore_errors=True)


def scratch_dir(fallback: Path, purpose: str) -> Path:
    """A new directory for `purpose` in RAM when it has room (see RAM above), else `fallback` (created).
    Its name carries this process's ID, so a later call removes what a killed test session left."""
    _remove_abandoned_scratch()
    if RAM.is_dir() and os.access(RAM, os.W_OK) and shutil.disk_usage(RAM).free >= RAM_NEEDED:
        return Path(tempfile.mkdtemp(prefix=f"{RAM_PREFIX}{os.getpid()}-{purpose}-", dir=RAM))
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def _remove_abandoned_scratch() -> None:
    """Scratch directories whose process is gone, unless the engine it started still runs there."""
    for path in RAM.glob(f"{RAM_PREFIX}*") if RAM.is_dir() else ():
        owner = path.name.removeprefix(RAM_PREFIX).split("-", 1)[0]
        pidfile = path / "dockerd.pid"
        engine = pidfile.read_text().strip() if pidfile.is_file() else ""
        if not owner.isdigit() or process_alive(int(owner), 0) or (engine.isdigit() and process_alive(int(engine), 0)):
            continue
        _unmount_below(path)
        shutil.rmtree(path, ignore_errors=True)


def _unmount_below(root: Path) -> None:
    """dockerd leaves its network-namespace bind mount behind; rmtree cannot remove a mountpoint."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    libc = ctypes.CDLL(None, use_errno=True)
    for point in sorted(points, reverse=True):
        # The system call, not the `umount` program: a test runs this with PATH=/nonexistent.
        libc.umount2(os.fsencode(point), MNT_DETACH)


def _ready(host: str) -> bool:
    done = subprocess.run(["docker", "-H", host, "version", "--format", "{{.Server.Version}}"],
                          capture_output=True, text=True, timeout=10, check=False)
    return done.returncode == 0


def start_dockerd(root: Path) -> tuple[DockerEngine | None, str]:
    """Start a private dockerd under `root`; (engine, "") or (None, why not)."""
    if not shutil.which("dockerd") or not shutil.which("docker"):
        return None, "dockerd/docker not installed (apt-get install docker.io)"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return None, "dockerd needs root here"
    root.mkdir(parents=True, exist_ok=True)
    sock = root / "docker.sock"
    host = f"unix://{sock}"
    log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - lives as long as the daemon
    process = subprocess.Popen(
        ["dockerd", "--iptables=false", "--bridge=none", "--data-root", str(root / "data"),
         "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"), "-H", host],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = DockerEngine(host=host, image="", process=process, root=root)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (root / "dockerd.log").read_text(errors="replace").strip().splitlines()[-3:]
            return None, f"dockerd exited {process.returncode}: {' | '.join(tail)}"
        if sock.exists() and _ready(host):
            return engine, ""
        time.sleep(0.2)
    engine.stop()
    return None, f"dockerd did not answer within {START_TIMEOUT_S:.0f}s"


def load_image(engine: DockerEngine) -> str:
    """Build (first time on this machine) or load the OpenClaw test image; return its tag."""
    done = subprocess.run(["bash", str(IMAGE_SCRIPT)], capture_output=True, text=True,
                          timeout=IMAGE_TIMEOUT_S, env=engine.env(), check=False)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{IMAGE_SCRIPT.name} failed ({done.returncode}): {tail}")
    sys.stderr.write(done.stderr)
    return done.stdout.strip().splitlines()[-1]


def start_engine(root: Path) -> tuple[DockerEngine | None, str]:
    """An engine with the test image, from CLAW_TEST_DOCKER_HOST or a private dockerd."""
    external = os.environ.get("CLAW_TEST_DOCKER_HOST")
    if external:
        engine: DockerEngine | None = DockerEngine(host=external, image="")
    else:
        engine, reason = start_dockerd(scratch_dir(root, "dockerd"))
        if engine is None:
            return None, reason
    assert engine is not None
    try:
        engine.image = load_image(engine)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        engine.stop()
        return None, str(exc)
    return engine, ""


def cached_image() -> Path:
    """Where the image script keeps the image it built for its current inputs (an unpacked docker-archive)."""
    return Path(subprocess.run(["bash", str(IMAGE_SCRIPT), "--cache-path"], capture_output=True, text=True,
                               check=True).stdout.strip())


def cached_image_id() -> str | None:
    """The ID an engine gives the cached image (the digest of its config), or None before it is built."""
    cache = cached_image()
    if not (cache / "manifest.json").is_file():
        return None
    return "sha256:" + hashlib.sha256((cache / "config.json").read_bytes()).hexdigest()


def main(argv: list[str]) -> int:
    if argv != ["prepare"]:
        print("usage: python3 -m tests.openclaw.engine prepare", file=sys.stderr)
        return 2
    cache = cached_image()
    if (cache / "manifest.json").is_file():
        print(f"openclaw test image cached at {cache}", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="claw-dockerd-") as tmp:
        began = time.monotonic()
        build = scratch_dir(Path(tmp) / "build", "image")  # the build's work in RAM too, as the tests' second build
        os.environ["TMPDIR"] = str(build)  # (the image script's work directory; the cache is kept on disk)
        try:
            engine, reason = start_engine(Path(tmp))
            if engine is not None:
                engine.stop()
        finally:
            shutil.rmtree(build, ignore_errors=True)
        if engine is None:
            print(f"openclaw test image not prepared: {reason}", file=sys.stderr)
            return 1
        print(f"openclaw test image {engine.image} ready in {time.monotonic() - began:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
