"""`claw import-pae WORKSPACE`: keep what a pae workspace already paid for."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.common import closed_with_command, resolve_store_dir, store_option
from clawstore.errors import one_line


@click.command("import-pae")
@click.argument("workspace", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@store_option
def import_pae(workspace: Path, output: str, store_dir: Path | None) -> None:
    """Store the runs and judgements of a pae workspace (configs/ + outputs/) under claw's keys."""
    from clawstore.pae.importer import import_pae as run_import
    from clawstore.pae.importer import pae_outputs
    from clawstore.store import Store

    pae_outputs(workspace.resolve())  # (before the store is made: a failed import makes nothing)
    store = closed_with_command(Store(resolve_store_dir(store_dir, workspace)))
    report = run_import(store, workspace.resolve())
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output == "json":
        click.echo(json.dumps(report.to_json(), sort_keys=True))
    else:
        click.echo(f"imported {report.runs_imported} run(s), {report.judgements_imported} judgement(s) "
                   f"({report.runs_present} run(s) and {report.judgements_present} judgement(s) already stored; "
                   f"{report.checks_computed} check set(s) computed)")
        if report.kept_by is not None:
            click.echo(f"kept from gc by ref {report.kept_by} (once built, `claw refs --delete {report.kept_by}` lets "
                       "gc reclaim what no head names)")
        for line in report.unmapped:
            click.echo(f"not mapped: {one_line(line)}")
        for line in report.damaged:
            click.echo(f"damaged, skipped: {one_line(line)}")
    raise SystemExit(1 if report.damaged else 0)


def register(group: click.Group) -> None:
    group.add_command(import_pae)
