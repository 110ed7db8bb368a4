"""`claw ls-tree ID`: the entries of a stored tree."""

from __future__ import annotations

from pathlib import Path

import click

from clawstore.cli.common import store_option
from clawstore.cli.store_access import existing_object, open_store_of, os_errors


@click.command("ls-tree")
@click.argument("oid", metavar="ID")
@store_option
@os_errors
def ls_tree_cmd(oid: str, store_dir: Path | None) -> None:
    """List a tree: mode, type, object, size, path."""
    store = open_store_of(store_dir)
    for entry in store.read_tree(existing_object(store, oid)):
        line = f"{entry.mode:06o} {entry.type:<7} {entry.object or '-':<71} {entry.size:>10}\t{entry.path}"
        if entry.target is not None:
            line += f" -> {entry.target}"
        click.echo(line)


def register(group: click.Group) -> None:
    group.add_command(ls_tree_cmd)
