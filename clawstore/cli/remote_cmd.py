"""`claw remote add|list|remove`: the named remotes saved in the workspace file claw.yaml."""

from __future__ import annotations

import click

from clawstore.cli.summaries import SummaryGroup
from clawstore.cli.transfer_options import ENDPOINT, workspace
from clawstore.errors import one_line
from clawstore.values.urls import shown_url


@click.group("remote", cls=SummaryGroup)
def remote_group() -> None:
    """Named remotes saved in the workspace file claw.yaml."""


@remote_group.command("add")
@click.argument("name")
@click.argument("url")
@ENDPOINT
def remote_add(name: str, url: str, endpoint_url: str | None) -> None:
    """Save URL (s3://BUCKET/PREFIX, file:///PATH or a directory) as remote NAME."""
    from clawstore.remote.config import Remote, same_place, save_remote

    saved, replaced = save_remote(workspace(), Remote(name, url, endpoint_url), name)
    # (a name claw.yaml had: moved, as docs/remote.md's move to a fresh prefix does; said, since a name meant to be
    # new sends every later push elsewhere)
    click.echo(f"remote {name} = {saved}" + (f" (was {one_line(shown_url(replaced))})" if replaced else ""))
    first = same_place(workspace(), name)
    if first is not None:  # (an alias: one place, one set of tracking refs, whichever name a push or pull is given)
        click.echo(f"the same place as remote {first}: {name} is another name for it (its tracking refs are "
                   f"remotes/{first}/…)")


@remote_group.command("list")
def remote_list() -> None:
    """Print every saved remote."""
    from clawstore.remote.config import load_remotes

    for remote in load_remotes(workspace()).values():
        extra = f"  (endpoint {remote.endpoint_url})" if remote.endpoint_url else ""
        click.echo(f"{remote.name}\t{remote.url}{extra}")


@remote_group.command("remove")
@click.argument("name")
def remote_remove(name: str) -> None:
    """Forget remote NAME (the remote itself is untouched)."""
    from clawstore.remote.config import save_remote

    save_remote(workspace(), None, name)
    click.echo(f"removed remote {name}")


def register(group: click.Group) -> None:
    group.add_command(remote_group)
