"""`claw checkout ID DIR`: a stored tree written out as files."""

from __future__ import annotations

from pathlib import Path

import click

from clawstore.cli.common import store_option
from clawstore.cli.store_access import existing_object, open_store_of, os_errors


@click.command("checkout")
@click.argument("oid", metavar="ID")
@click.argument("dest", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--allow-external-links", is_flag=True,
              help="Also create symlinks that point outside DIR (refused by default).")
@store_option
@os_errors
def checkout_cmd(oid: str, dest: Path, allow_external_links: bool, store_dir: Path | None) -> None:
    """Materialise a tree into DIR (created if missing; must be empty)."""
    store = open_store_of(store_dir)
    store.checkout(existing_object(store, oid), dest, allow_external_links=allow_external_links)


def register(group: click.Group) -> None:
    group.add_command(checkout_cmd)
