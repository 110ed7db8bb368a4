"""`claw demo`: the example campaign against the simulated stand-in provider (no key, no network)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Build in this (empty or new) directory and keep it (default: a temporary one, removed after).")
@click.option("--keep", is_flag=True, help="Keep the temporary workspace and print where it is.")
def demo_command(workdir: Path | None, keep: bool) -> None:
    """Build the example campaign, rebuild it with zero requests, edit a prompt and explain, report, query.

    Against a stand-in provider on 127.0.0.1: replies, tokens and costs are simulated; no key, no network.
    """
    from clawstore.demo import run_demo

    run_demo(workdir, keep, click.echo)


def register(group: click.Group) -> None:
    group.add_command(demo_command)
