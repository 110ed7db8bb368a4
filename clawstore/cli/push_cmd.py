"""`claw push REMOTE`: send what the remote lacks (whole packs), then move its refs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clawstore.cli.common import closed_with_command, refuse_read_only, store_option, workspace_store_dir
from clawstore.cli.transfer_options import ENDPOINT, PROGRESS, narrow, ref_names, workspace


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
    from clawstore.store.buildlogs import pushed_unadopted

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


def register(group: click.Group) -> None:
    group.add_command(push_command)
