"""`claw standin`: the built-in stand-in provider on 127.0.0.1, to try claw with no key and no network."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit

import click

from clawstore.errors import UsageError
from clawstore.values.urls import shown_url

LOOPBACK = "127.0.0.1"
SIMULATED = [sys.executable, "-m", "clawstore.testing.simulated"]


def _export(base_url: str) -> str:
    return f"export OPENROUTER_BASE_URL={base_url}"


def _note(base_url: str, how: str) -> str:
    return (f"claw standin: the stand-in provider runs on {base_url} {how}: every reply, token count and cost "
            "it gives is SIMULATED, and it needs no key")


@click.command("standin")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: any free one).")
@click.option("--background", is_flag=True,
              help="Start it as a background process and print the export line only: "
                   'eval "$(claw standin --background)".')
@click.option("--stop", is_flag=True, help="Stop the stand-in $OPENROUTER_BASE_URL points at.")
def standin_command(port: int, background: bool, stop: bool) -> None:
    """Serve the built-in stand-in provider (the replies `claw demo` gets) on 127.0.0.1 until Ctrl-C.

    It prints the line that points claw at it (`export OPENROUTER_BASE_URL=...`; no key is needed).
    """
    if stop:
        _stop()
        return
    if background:
        _start_background(port)
        return
    from clawstore.testing.simulated import script_simulated_provider
    from clawstore.testing.standin import StandIn

    try:
        server = StandIn(LOOPBACK, port)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot listen on {LOOPBACK}: {exc.strerror}") from None
    script_simulated_provider(server)
    click.echo(_export(server.base_url))
    click.echo(_note(server.base_url, "until Ctrl-C") + "; in another terminal, run the line above", err=True)
    try:
        server.serve()
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) is how it ends
        pass
    click.echo("claw standin: stopped", err=True)


def _start_background(port: int) -> None:
    """A detached `python -m clawstore.testing.simulated`: its output does not hold the caller's pipe, so
    `eval "$(claw standin --background)"` returns once the port is known."""
    proc = subprocess.Popen([*SIMULATED, "--host", LOOPBACK, "--port", str(port), "--print-port"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    proc.stdout.close()
    if not line.isdigit():
        proc.kill()
        proc.wait()
        raise UsageError(f"--port {port}: the stand-in could not listen on {LOOPBACK}")
    base_url = f"http://{LOOPBACK}:{line}/v1"
    click.echo(_export(base_url))
    click.echo(_note(base_url, f"as process {proc.pid}") + "; `claw standin --stop` stops it", err=True)


def _stop() -> None:
    import httpx

    base_url = os.environ.get("OPENROUTER_BASE_URL", "").strip()
    parts = urlsplit(base_url)
    shown = shown_url(base_url)
    if not base_url or parts.hostname != LOOPBACK or parts.port is None:
        raise UsageError("claw standin --stop: $OPENROUTER_BASE_URL does not point at a stand-in on "
                         f"{LOOPBACK} (it is {shown or 'unset'})")
    root = f"{parts.scheme}://{parts.netloc}"
    try:
        with httpx.Client(base_url=root, timeout=5, trust_env=False) as http:  # (loopback: never a proxy)
            health = http.get("/_admin/health").json()
            if not (isinstance(health, dict) and health.get("standin")):
                raise UsageError(f"claw standin --stop: {shown} is not a stand-in provider; nothing stopped")
            http.post("/_admin/shutdown").raise_for_status()
    except (httpx.HTTPError, ValueError):
        raise UsageError(f"claw standin --stop: no stand-in answers on {shown}") from None
    click.echo(f"claw standin: stopped the stand-in on {shown} (`unset OPENROUTER_BASE_URL` before builds "
               "against OpenRouter)", err=True)


def register(group: click.Group) -> None:
    group.add_command(standin_command)
