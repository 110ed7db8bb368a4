"""`claw put`: store files and directories, printing their ids."""

from __future__ import annotations

import os
from pathlib import Path

import click

from clawstore.cli.common import store_option
from clawstore.cli.store_access import open_store_of, os_errors
from clawstore.errors import UsageError


@click.command("put")
@click.argument("paths", nargs=-1, required=True)
@store_option
@os_errors
def put_cmd(paths: tuple[str, ...], store_dir: Path | None) -> None:
    """Store files (a directory becomes a tree; '-' reads stdin). Prints one id per argument."""
    for raw in paths:
        if raw != "-" and not os.path.lexists(raw):
            raise UsageError(f"put: {raw}: no such file or directory")
    store = open_store_of(store_dir, create=True)
    ids = []
    with store.batch():  # all arguments share a few flushes; ids are printed once durable
        for raw in paths:
            path = Path(raw)
            if raw == "-":
                ids.append(store.put_stream(click.get_binary_stream("stdin")))
            elif path.is_dir():
                ids.append(store.put_tree(path))
            else:
                ids.append(store.put_file(path))
    for oid in ids:
        click.echo(oid)


def register(group: click.Group) -> None:
    group.add_command(put_cmd)
