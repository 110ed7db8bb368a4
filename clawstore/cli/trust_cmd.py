"""`claw trust add|list|remove`: the keys whose archives and pushes the user believes."""

from __future__ import annotations

import click

from clawstore.cli.summaries import SummaryGroup


@click.group("trust", cls=SummaryGroup)
def trust_group() -> None:
    """The keys whose archives and pushes are imported and reused (your own is always trusted)."""


@trust_group.command("add")
@click.argument("key")
def trust_add(key: str) -> None:
    """Trust KEY (a `claw-ed25519:…` line from `claw key show`); the next build reuses its imports."""
    from clawstore.trust import keys

    click.echo(f"trusted {keys.add_trusted(key)}")


@trust_group.command("list")
def trust_list() -> None:
    """Every trusted key, yours marked."""
    from clawstore.trust import keys

    own = keys.own_public()
    for key in sorted(keys.trusted()):
        click.echo(f"{key}{'  (yours)' if key == own else ''}")


@trust_group.command("remove")
@click.argument("key")
def trust_remove(key: str) -> None:
    """Stop trusting KEY (what was already imported and reused stays in the store)."""
    from clawstore.errors import UsageError
    from clawstore.trust import keys

    if keys.public_text(keys.parse_public(key)) == keys.own_public():  # (trust list shows it: "not in" misled)
        raise UsageError(f"{key.strip()} is your own key: always trusted (it signs what you push and export), so it "
                         "cannot be removed")
    if not keys.remove_trusted(key):
        raise UsageError(f"{key.strip()[:60]} is not in your trust list (claw trust list)")
    click.echo(f"no longer trusted: {key.strip()}")


def register(group: click.Group) -> None:
    group.add_command(trust_group)
