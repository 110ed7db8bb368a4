"""Options shared by several commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.errors import UsageError

if TYPE_CHECKING:
    from clawstore.store.store import Store

store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $CLAW_STORE, else store/ in the workspace root).",
)


def campaign_options(func):
    """--suite/--run-profile/--evaluation-profile (+ --case/--model filters) and --root."""
    options = [
        click.option("--suite", "suite", required=True, help="Suite ID or path to its YAML."),
        click.option("--run-profile", "run_profile", required=True, help="Run profile ID or path."),
        click.option("--evaluation-profile", "evaluation_profile", default=None,
                     help="Evaluation profile ID or path."),
        click.option("--case", "cases", multiple=True, help="Only this case (repeatable)."),
        click.option("--model", "models", multiple=True, help="Only this model_id (repeatable)."),
        store_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def resolve_store_dir(store_dir: Path | None, workspace_root: Path | None = None) -> Path:
    """--store wins, then $CLAW_STORE, then store/ in the workspace root (or the cwd)."""
    if store_dir is not None:
        return store_dir
    env = os.environ.get("CLAW_STORE")
    if env:
        return Path(env)
    return (workspace_root or Path.cwd()) / "store"


def workspace_store_dir(store_dir: Path | None) -> Path:
    """The store a command outside a campaign uses: --store, $CLAW_STORE, else store/ of the cwd's workspace."""
    from clawstore.config import find_workspace_root

    try:
        root: Path | None = find_workspace_root(Path.cwd())
    except UsageError:  # no configs/ above: the store still defaults to ./store
        root = None
    return resolve_store_dir(store_dir, root)


def never_built_message(store: Store, campaign_id: str) -> str | None:
    """None when the campaign has a head; else why not, with the evaluated campaigns of the same runs.

    A campaign named without --evaluation-profile is the runs-only one (`…__none`); users who built
    with an evaluation profile and left it off later are told which flag they meant.
    """
    from clawstore.builder.buildlog import head_ref

    if store.get_ref(head_ref(campaign_id)) is not None:
        return None
    message = f"campaign {campaign_id} has never been built in store {store.root}"
    if campaign_id.endswith("__none"):
        prefix = head_ref(campaign_id[: -len("none")])
        evaluated = sorted(name[len(prefix):] for name in store.list_refs(prefix))
        if evaluated:
            return message + "; did you mean " + " or ".join(f"--evaluation-profile {e}" for e in evaluated) + "?"
    return message + " (run claw build)"


def require_built(store: Store, campaign_id: str, kept_apart_ok: bool = False) -> None:
    """UsageError unless the campaign has a head (or, with `kept_apart_ok`, one imported --untrusted)."""
    message = never_built_message(store, campaign_id)
    if message is None:
        return
    if kept_apart_ok:
        from clawstore.trust.apart import kept_apart_head

        if kept_apart_head(store, campaign_id) is not None:
            return
    raise UsageError(message)
