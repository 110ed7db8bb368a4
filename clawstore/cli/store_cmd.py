"""`claw store stats|migrate`: the store as a whole."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.common import size_text, store_option, workspace_store_dir
from clawstore.cli.store_access import open_store_of, os_errors
from clawstore.cli.summaries import SummaryGroup
from clawstore.store.services.stats import store_stats


@click.group("store", cls=SummaryGroup)
def store_group() -> None:
    """Inspect the store."""


@store_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@store_option
@os_errors
def stats_cmd(as_json: bool, store_dir: Path | None) -> None:
    """Objects, packs, bytes (logical, stored, apparent, on disk), live fraction, what gc would free."""
    stats = store_stats(open_store_of(store_dir))
    if as_json:
        click.echo(json.dumps(stats.to_json()))
        return
    click.echo(f"objects        {stats.objects}")
    click.echo(f"logical bytes  {stats.logical_bytes} ({size_text(stats.logical_bytes)})")
    click.echo(f"stored bytes   {stats.stored_bytes} ({size_text(stats.stored_bytes)})")
    click.echo(f"ratio          {stats.ratio:.2f}")
    click.echo(f"packs          {stats.packs} ({size_text(stats.pack_bytes)})")
    click.echo(f"live fraction  {stats.live_fraction:.3f}")
    click.echo(f"files          {stats.files}")
    click.echo(f"apparent bytes {stats.apparent_bytes} ({size_text(stats.apparent_bytes)})")
    click.echo(f"disk bytes     {stats.disk_bytes} ({size_text(stats.disk_bytes)})")
    click.echo(f"gc would free  {stats.gc_would_free} ({size_text(stats.gc_would_free or 0)})")


@store_group.command("migrate")
@store_option
@os_errors
def migrate_cmd(store_dir: Path | None) -> None:
    """Convert a format-1 store to format 2 (any command does it on first open); safe to interrupt."""
    from clawstore.store.services.migrate import migrate

    report = migrate(workspace_store_dir(store_dir))
    if not report.migrated:
        click.echo("store is already format 2")
        return
    click.echo(f"migrated {report.objects} objects ({report.copied} copied now) and {report.actions} "
               f"action-cache entries to format 2 in {report.seconds:.2f}s")
    for problem in report.corrupt:
        click.echo(f"quarantined: {problem}")


def register(group: click.Group) -> None:
    group.add_command(store_group)
