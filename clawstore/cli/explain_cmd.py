"""`claw explain`: for each node that would execute, what changed since the last build at its address."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import click

from clawstore.cli.build_view import echo_lines, node_label, note, write_json
from clawstore.cli.common import OUTPUT, campaign_options, campaign_project
from clawstore.report.terminal import print_tables, stdout_is_terminal
from clawstore.report.terminal import table as rich_table


@click.command()
@campaign_options
@OUTPUT
def explain(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
            models: tuple[str, ...], store_dir: Path | None, output: str) -> None:
    """For each stale node, the inputs that changed since the last build at its address."""
    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir, reads_only=True)
    found = project.explain()
    cid = found.campaign_id
    note(found.never_built)
    stale = iter(found.states)  # (read back once, in the campaign's order)
    if output == "json":
        write_json({"campaign": cid}, {"stale": (json.dumps(
            {**s.node.address, "kind": s.node.kind, "state": s.state, "reasons": s.reasons}, sort_keys=True)
            for s in stale)})
        return
    first = next(stale, None)
    if first is None:
        click.echo(f"everything is fresh ({cid})")
        return
    stale = itertools.chain([first], stale)
    if stdout_is_terminal():
        rows = [[node_label(s.node), s.state, "\n".join(s.reasons)] for s in stale]
        print_tables(rich_table(["NODE", "STATE", "WHAT CHANGED"], rows, [False, False, False],
                                title=f"why {len(rows)} node(s) of {cid} would execute"))
        return
    def lines() -> Iterator[str]:
        for s in stale:
            yield f"{node_label(s.node)} ({s.state}):"
            for reason in s.reasons:
                yield f"  {reason}"

    echo_lines(lines())


def register(group: click.Group) -> None:
    group.add_command(explain)
