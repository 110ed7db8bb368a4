"""`claw demo` from a built (non-editable) copy of the package: no key, no network, under a minute."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from clawstore.demo import CAMPAIGN

REPO = Path(__file__).resolve().parents[2]


def _built_package(dest: Path) -> Path:
    """What an install puts on sys.path: setuptools' build of the package, package data included."""
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import setup; "
                    f"sys.argv = ['setup.py', '-q', 'build', '--build-base', {str(dest)!r}]; setup()"],
                   cwd=REPO, check=True, capture_output=True)
    lib = dest / "lib"
    assert (lib / "clawstore" / "demo" / "configs" / "suites" / "llm_probe_smoke.yaml").is_file()
    return lib


def test_demo_runs_from_an_installed_package_without_key_or_network(tmp_path: Path) -> None:
    lib = _built_package(tmp_path / "build")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENROUTER_", "CLAW_"))}
    env.update(PYTHONPATH=str(lib), HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               NO_PROXY="127.0.0.1")  # any request leaving loopback would fail
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "demo", "--dir", str(tmp_path / "ws")],
                          cwd=outside, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert str(lib) in subprocess.run([sys.executable, "-c", "import clawstore; print(clawstore.__file__)"],
                                      cwd=outside, env=env, capture_output=True, text=True).stdout
    assert "SIMULATED" in out
    builds = [line for line in out.splitlines() if line.startswith("# simulated provider requests")]
    assert [line.split(": ")[1].split(" ")[0] for line in builds] == ["24", "0", "8"]
    assert "input.messages[1].content 'What is 17 * 23?' -> 'What is 17 * 24?'" in out
    assert "Case Results" in out and "Model Summary" in out
    assert "gpt4o_mini  arithmetic_plain" in out.split("$ claw query")[1]
    assert list(outside.iterdir()) == []  # nothing written where the user stood
    # The promise is "under a minute"; the margin absorbs a loaded 2-core test machine.
    assert elapsed < 90, f"claw demo took {elapsed:.1f}s"
    _rerun_as_told(out, tmp_path / "ws", env, outside)


def _rerun_as_told(out: str, workspace: Path, env: dict[str, str], cwd: Path) -> None:
    """What the demo tells to do to rerun a step in the workspace it kept: start the simulated provider
    with its command, export its variables, build: everything the demo built is reused."""
    told = out.split("to rerun a step there")[1].splitlines()[1:3]
    start, export = (shlex.split(line.strip().rstrip("&")) for line in told)
    assert start[:2] == ["claw", "standin"] and export[0] == "export", told
    env = {**env, **dict(item.split("=", 1) for item in export[1:])}  # (no key: the stand-in needs none)
    server = subprocess.Popen([sys.executable, "-m", "clawstore.cli", *start[1:]], cwd=cwd, env=env)
    try:
        base = env["OPENROUTER_BASE_URL"]
        for _ in range(100):  # until it listens
            try:
                reply = httpx.post(f"{base}/chat/completions", timeout=5, trust_env=False, json={
                    "model": "any", "messages": [{"role": "user", "content": "What is 17 * 23?"}]})
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert "391 (simulated)" in reply.json()["choices"][0]["message"]["content"]
        build = subprocess.run([sys.executable, "-m", "clawstore.cli", "build", *CAMPAIGN], cwd=workspace, env=env,
                               capture_output=True, text=True, timeout=120)
        assert build.returncode == 0 and " 0 executed" in build.stdout, build.stdout + build.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0


def test_the_demo_says_its_scratch_workspace_is_removed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENROUTER_", "CLAW_"))}
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "demo"], cwd=tmp_path,
                          env={**env, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [said] = [line for line in proc.stdout.splitlines() if "is removed now" in line]
    workspace = Path(said.split("The scratch workspace ")[1].split(" is removed now")[0])
    assert workspace.parent == tmp_path and workspace.name.startswith("claw-demo-") and not workspace.exists()
    assert "--keep keeps it" in said


def test_a_demo_dir_that_is_not_empty_is_bad_usage(tmp_path: Path) -> None:
    # It exited 1, the code of a demo step that failed, for a typo in --dir.
    (tmp_path / "mine.txt").write_text("kept\n")
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "demo", "--dir", str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == f"claw: error: --dir {tmp_path}: not an empty directory\n"
    assert sorted(os.listdir(tmp_path)) == ["mine.txt"]
