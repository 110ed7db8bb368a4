"""`claw standin`: the built-in stand-in provider for the README's tour, in the foreground or the background."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from clawstore.testing.standin import StandIn

CLAW = [sys.executable, "-m", "clawstore.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENROUTER_", "CLAW_"))}
    return {**env, **extra}


@contextlib.contextmanager
def _stopped_after(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """`proc` killed at the end if it still runs: a test failing before it stops its stand-in left it running (one was
    found at session 74's end, after a run at load 11-16)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _chat(base_url: str) -> str:
    reply = httpx.post(f"{base_url}/chat/completions", trust_env=False, timeout=10,
                       json={"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    return str(reply.json()["choices"][0]["message"]["content"])


def test_foreground_prints_the_export_line_and_stops_on_ctrl_c() -> None:
    with _stopped_after(subprocess.Popen([*CLAW, "standin"], env=_env(), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("export OPENROUTER_BASE_URL=http://127.0.0.1:") and line.endswith("/v1")
        base_url = line.split("=", 1)[1]
        assert "simulated" in _chat(base_url)  # the replies `claw demo` gets
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "SIMULATED" in err and "needs no key" in err and err.strip().endswith("claw standin: stopped")


def test_background_as_the_readme_starts_it_then_stop(tmp_path: Path) -> None:
    script = ('eval "$(claw standin --background)" && echo "url=$OPENROUTER_BASE_URL" && '
              'curl -s --noproxy "*" "$OPENROUTER_BASE_URL/../_admin/health" >/dev/null; '
              'claw standin --stop; echo "stop=$?"; claw standin --stop; echo "again=$?"')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claw").write_text(f"#!/bin/sh\nexec {sys.executable} -m clawstore.cli \"$@\"\n")
    (bindir / "claw").chmod(0o755)
    proc = subprocess.run(["bash", "-c", script], env=_env(PATH=f"{bindir}:{os.environ['PATH']}"),
                          capture_output=True, text=True, timeout=60)
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert lines["url"].startswith("http://127.0.0.1:") and lines["stop"] == "0", proc.stderr
    assert lines["again"] == "2"  # nothing answers any more: the stand-in is gone
    assert f"stopped the stand-in on {lines['url']}" in proc.stderr
    assert f"claw: error: claw standin --stop: no stand-in answers on {lines['url']}" in proc.stderr


def test_stop_refuses_what_is_not_a_loopback_stand_in() -> None:
    for url, why in (("", "it is unset"), ("https://openrouter.ai/api/v1", "it is https://openrouter.ai/api/v1")):
        proc = subprocess.run([*CLAW, "standin", "--stop"], env=_env(OPENROUTER_BASE_URL=url) if url else _env(),
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr.splitlines()) == 1
    with StandIn() as server:  # answers health, as a stand-in does: stopped
        proc = subprocess.run([*CLAW, "standin", "--stop"], env=_env(OPENROUTER_BASE_URL=server.base_url),
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr


SLOW_REPLIES = """
import sys, time
from clawstore.testing import standin
send = standin._Handler._send
def slow(self, *args, **kwargs):  # a loaded machine: the reply is written a while after it is decided
    time.sleep(0.5)
    send(self, *args, **kwargs)
standin._Handler._send = slow
sys.exit(standin.main(sys.argv[1:]))
"""


def test_stop_is_answered_before_the_stand_in_exits() -> None:
    """The shutdown's reply is written before the process may end (CI once saw 'no stand-in answers' here)."""
    with _stopped_after(subprocess.Popen([sys.executable, "-c", SLOW_REPLIES, "--print-port"], env=_env(),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        base_url = f"http://127.0.0.1:{port}/v1"
        stop = subprocess.run([*CLAW, "standin", "--stop"], env=_env(OPENROUTER_BASE_URL=base_url),
                              capture_output=True, text=True, timeout=30)
        assert stop.returncode == 0 and f"stopped the stand-in on {base_url}" in stop.stderr, stop.stderr
        # (the shell still exports its URL: a build there would fail every run "Connection refused")
        assert "unset OPENROUTER_BASE_URL" in stop.stderr, stop.stderr
        assert proc.wait(timeout=30) == 0  # and it did stop
