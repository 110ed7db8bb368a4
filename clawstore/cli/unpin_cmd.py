"""`claw unpin NAME`: remove a pin."""

from __future__ import annotations

from pathlib import Path

import click

from clawstore.cli.common import store_option, store_project


@click.command("unpin")
@click.argument("name")
@store_option
def unpin_command(name: str, store_dir: Path | None) -> None:
    """Remove pin NAME (its objects become collectable once nothing else reaches them)."""
    ref, target = store_project(store_dir).unpin(name)
    click.echo(f"removed {ref} (was -> {target})")


def register(group: click.Group) -> None:
    group.add_command(unpin_command)
