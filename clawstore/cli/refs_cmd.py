"""`claw refs`: list the store's refs (campaign heads and pins), or delete some."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clawstore.cli.common import store_option, store_project


@click.command("refs")
@click.option("--json", "as_json", is_flag=True, help="Print {name: target} as JSON.")
@click.option("--delete", "delete", multiple=True, metavar="NAME",
              help="Delete ref NAME (repeatable), e.g. the head of a campaign you no longer build: "
                   "claw gc then reclaims what only it reached.")
@store_option
def refs_command(as_json: bool, delete: tuple[str, ...], store_dir: Path | None) -> None:
    """List refs: campaign heads (campaigns/...) and pins (pins/...), the roots gc keeps."""
    project = store_project(store_dir)
    if not delete:
        refs = project.refs()
        if as_json:
            click.echo(json.dumps(refs, indent=2, sort_keys=True))
            return
        for name, target in refs.items():
            click.echo(f"{name}\t{target}")
        return
    removed = project.delete_refs(delete)
    if as_json:
        click.echo(json.dumps({"removed": removed}, indent=2, sort_keys=True))
        return
    tracking = project.refs("remotes/")  # remotes/<remote>/<name> (remote/sync.py TRACKING; not imported: 0.2 s)
    for name, target in removed.items():
        click.echo(f"removed {name} (was -> {target})")
        for other in sorted(n for n in tracking if n.endswith("/" + name)):
            click.echo(f"claw: note: {other} still keeps what it reaches (this name's value at the last "
                       f"push or pull there): claw refs --delete {other} lets gc reclaim it too", err=True)


def register(group: click.Group) -> None:
    group.add_command(refs_command)
