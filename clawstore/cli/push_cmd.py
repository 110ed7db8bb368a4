"""`claw push REMOTE`: send what the remote lacks (whole packs), then move its refs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.cli.common import closed_with_command, refuse_read_only, store_option, workspace_store_dir
from clawstore.cli.transfer_options import ENDPOINT, PROGRESS, narrow, ref_names, workspace

if TYPE_CHECKING:
    from clawstore.store import Store


@click.command("push")
@click.argument("remote")
@ENDPOINT
@narrow
@PROGRESS
@store_option
def push_command(remote: str, endpoint_url: str | None, suite: str | None, run_profile: str | None,
                 evaluation_profile: str | None, pin: str | None, progress: str, store_dir: Path | None) -> None:
    """Send what REMOTE lacks (whole packs), then move its refs by compare-and-swap."""
    from clawstore.builder.cyclic_gc import collector_paused
    from clawstore.remote.config import resolve_remote
    from clawstore.remote.progress import open_transfer_progress
    from clawstore.remote.push import push
    from clawstore.store import Store

    target = resolve_remote(workspace(), remote, endpoint_url)  # (a bad one is refused before the store opens)
    root = workspace_store_dir(store_dir, must_exist=True)
    refuse_read_only(root, "push keeps what it pushed under remotes/ (push from a writable copy of the store)")
    store = closed_with_command(Store(root, create=False))
    shown = open_transfer_progress(progress, sys.stderr, "pushing", f"to {target.url}")
    names = ref_names(suite, run_profile, evaluation_profile, pin)
    try:
        with collector_paused():  # its lists of ids are acyclic; the process ends right after
            # (it marks what its campaigns' killed builds finished: a pulling store keeps it from gc)
            report = push(store, target, names, progress=shown, unadopted=pushed_unadopted(store, names))
    finally:
        shown.close()
    click.echo(report.summary())


def pushed_unadopted(store: Store, names: list[str] | None) -> dict[bytes, bytes]:
    """What the killed builds of the campaigns a push sends finished (store/buildlogs.py unadopted_entries): a whole
    push's, every campaign's; a narrowed one's, those of the campaigns its refs name (a pin: its head's). Nothing is
    read when no build was killed."""
    from clawstore.store.buildlogs import journals, unadopted_entries

    if not journals(store.root):
        return {}
    if names is None:
        return unadopted_entries(store)
    campaigns = set()
    for name in names:
        if name.startswith(CAMPAIGNS):
            campaigns.add(name[len(CAMPAIGNS):])
        elif (head := store.get_ref(name)) is not None:
            campaign = _campaign_of_head(store, head)
            if campaign is not None:
                campaigns.add(campaign)
    return unadopted_entries(store, campaigns)


CAMPAIGNS = "campaigns/"


def _campaign_of_head(store: Store, head: str) -> str | None:
    from clawstore.errors import StoreError

    try:
        doc = store.get_json(head)
    except (StoreError, ValueError):
        return None  # (the push says what is wrong with it)
    campaign = doc.get("campaign") if isinstance(doc, dict) else None
    value = campaign.get("id") if isinstance(campaign, dict) else None
    return value if isinstance(value, str) else None


def register(group: click.Group) -> None:
    group.add_command(push_command)
