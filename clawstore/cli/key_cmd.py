"""`claw key show`: the user's public key, who vouches for what they export and push."""

from __future__ import annotations

import click

from clawstore.cli.summaries import SummaryGroup


@click.group("key", cls=SummaryGroup)
def key_group() -> None:
    """The user's signing key (made on first use in $XDG_CONFIG_HOME/claw/, private part mode 0600)."""


@key_group.command("show")
def key_show() -> None:
    """Print the public key on one line (give it to whoever imports what you export or push)."""
    from clawstore.trust import keys

    click.echo(keys.own_public())


def register(group: click.Group) -> None:
    group.add_command(key_group)
