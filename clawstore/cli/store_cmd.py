"""`claw store stats|migrate`: the store as a whole."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.common import store_option, workspace_store_dir
from clawstore.cli.store_access import open_store_of, os_errors
from clawstore.store.services.stats import store_stats


@click.group("store")
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
    click.echo(f"logical bytes  {stats.logical_bytes} ({_human(stats.logical_bytes)})")
    click.echo(f"stored bytes   {stats.stored_bytes} ({_human(stats.stored_bytes)})")
    click.echo(f"ratio          {stats.ratio:.2f}")
    click.echo(f"packs          {stats.packs} ({_human(stats.pack_bytes)})")
    click.echo(f"live fraction  {stats.live_fraction:.3f}")
    click.echo(f"files          {stats.files}")
    click.echo(f"apparent bytes {stats.apparent_bytes} ({_human(stats.apparent_bytes)})")
    click.echo(f"disk bytes     {stats.disk_bytes} ({_human(stats.disk_bytes)})")
    click.echo(f"gc would free  {stats.gc_would_free} ({_human(stats.gc_would_free or 0)})")


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


def _human(count: int) -> str:
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"


def register(group: click.Group) -> None:
    group.add_command(store_group)
