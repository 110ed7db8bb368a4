"""`claw explain`: for each node that would execute, what changed since the last build at its address."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.build_view import node_label, note
from clawstore.cli.common import OUTPUT, campaign_options, campaign_project
from clawstore.report.terminal import print_tables, stdout_is_terminal
from clawstore.report.terminal import table as rich_table


@click.command()
@campaign_options
@OUTPUT
def explain(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
            models: tuple[str, ...], store_dir: Path | None, output: str) -> None:
    """For each stale node, the inputs that changed since the last build at its address."""
    found = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir).explain()
    cid, stale = found.campaign_id, found.states
    note(found.never_built)
    if output == "json":
        click.echo(json.dumps({"campaign": cid, "stale": [
            {**s.node.address, "kind": s.node.kind, "state": s.state, "reasons": s.reasons} for s in stale]},
            sort_keys=True))
        return
    if not stale:
        click.echo(f"everything is fresh ({cid})")
    elif stdout_is_terminal():
        print_tables(rich_table(["NODE", "STATE", "WHAT CHANGED"],
                                [[node_label(s.node), s.state, "\n".join(s.reasons)] for s in stale],
                                [False, False, False], title=f"why {len(stale)} node(s) of {cid} would execute"))
        return
    for s in stale:
        click.echo(f"{node_label(s.node)} ({s.state}):")
        for reason in s.reasons:
            click.echo(f"  {reason}")


def register(group: click.Group) -> None:
    group.add_command(explain)
