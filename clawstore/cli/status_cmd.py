"""`claw status`: counts of fresh / stale / failed / never-built nodes, per model and layer."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.build_view import killed_in, note
from clawstore.cli.common import (
    OUTPUT,
    campaign_options,
    campaign_project,
    format_table,
)
from clawstore.report.terminal import print_tables, stdout_is_terminal
from clawstore.report.terminal import table as rich_table

COLUMNS = ["fresh", "stale", "failed", "never-built"]


@click.command()
@campaign_options
@OUTPUT
def status(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
           models: tuple[str, ...], store_dir: Path | None, output: str) -> None:
    """Counts of fresh / stale / failed / never-built nodes, per model."""
    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir, reads_only=True)
    found = project.status()
    cid, per_model = found.campaign_id, found.per_model
    note(found.never_built)
    # (the store alone: `project.store` would load the campaign the stamp just answered for, 2 s at 50,000 runs;
    # and only when a build left a journal: else none was killed, and the Store's import was ~15 ms of the start)
    killed, killed_note = killed_in(store_dir, cid)
    note(killed_note)
    spent = f", cost spent {found.spent}" if found.spent else ""  # (paid for; the next build reuses them)
    if found.pending:
        click.echo(f"claw: note: {found.pending} request(s) pending in provider batches "
                   f"({found.recorded} recorded now{spent}); see `claw batch status`", err=True)
    elif found.recorded:
        click.echo(f"claw: note: {found.recorded} finished batch line(s) recorded now{spent}", err=True)
    note(found.stopped)  # (collecting met a final 402: out of credit, as a build says it)
    stopped = found.head_stopped
    if stopped is not None:  # (its nodes not started are STALE or NEVER_BUILT below, unless an earlier build's stand)
        from clawstore.store.documents import stopped_text

        click.echo(f"claw: note: the campaign's head build {stopped['build_id']} was {stopped_text(stopped)}; the "
                   "next claw build starts those STALE or NEVER_BUILT below", err=True)
    if output == "json":
        models_json = {m: {c: kinds["run"][c] for c in COLUMNS} | {
            "layers": {k: {c: n[c] for c in COLUMNS} for k, n in kinds.items()}} for m, kinds in per_model.items()}
        click.echo(json.dumps({"campaign": cid, "models": models_json, "has_head": found.never_built is None,
                               "killed_builds": killed, "stopped": {k: v for k, v in (stopped or {}).items()
                                                                    if k != "build_id"} or None}, sort_keys=True))
        return
    rows = [[m, k, *(str(n[c]) for c in COLUMNS)] for m, kinds in per_model.items() for k, n in kinds.items()]
    headers = ["MODEL", "NODE", "FRESH", "STALE", "FAILED", "NEVER_BUILT"]
    if stdout_is_terminal():
        print_tables(rich_table(headers, rows, [False, False, True, True, True, True], title=f"status of {cid}",
                                zero_dim=True, nonzero_styles=[None, None, "green", "yellow", "bold red", "yellow"]))
        return
    click.echo(format_table(headers, rows))


def register(group: click.Group) -> None:
    group.add_command(status)
