"""`claw pin NAME`: keep a campaign's current state forever (ref pins/NAME)."""

from __future__ import annotations

from pathlib import Path

import click

from clawstore.cli.common import campaign_options, campaign_project


@click.command("pin")
@click.argument("name")
@campaign_options
@click.option("--force", is_flag=True, help="Move an existing pin of this name.")
def pin_command(name: str, suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                models: tuple[str, ...], store_dir: Path | None, force: bool) -> None:
    """Keep a campaign's current state forever: ref pins/NAME -> its head now (later builds do not move it)."""
    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir,
                               create_store=False, quiet=True)
    pinned, campaign_id = project.pin(name, force)
    already = "" if pinned.moved else " already"
    click.echo(f"{pinned.ref}{already} -> {pinned.head} (campaign {campaign_id})")


def register(group: click.Group) -> None:
    group.add_command(pin_command)
