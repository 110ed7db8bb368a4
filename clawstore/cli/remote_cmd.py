"""`claw remote add|list|remove`, `claw push`, `claw pull`: share a store through a directory or S3."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clawstore.cli.common import store_option, workspace_store_dir
from clawstore.remote.progress import MODES

_ENDPOINT = click.option("--endpoint-url", "endpoint_url", default=None,
                         help="S3 endpoint (default: $AWS_ENDPOINT_URL, else AWS).")
_PROGRESS = click.option("--progress", "progress", type=click.Choice(MODES),
                         default="auto", show_default=True,
                         help="Show the packs moving on stderr: live bar (auto: on a terminal), plain lines, none.")
_NARROW = [
    click.option("--suite", "suite", default=None, help="Only this campaign's head (with --run-profile)."),
    click.option("--run-profile", "run_profile", default=None, help="Run profile of that campaign."),
    click.option("--evaluation-profile", "evaluation_profile", default=None, help="Evaluation profile of it."),
    click.option("--pin", "pin", default=None, help="Only this pin."),
]


def _workspace() -> Path:
    """Where claw.yaml lives: the workspace root above the cwd, else the cwd."""
    from clawstore.config import find_workspace_root
    from clawstore.errors import UsageError

    try:
        return find_workspace_root(Path.cwd())
    except UsageError:
        return Path.cwd()


def _narrow(func):  # type: ignore[no-untyped-def]
    for option in reversed(_NARROW):
        func = option(func)
    return func


def _ref_names(suite: str | None, run_profile: str | None, evaluation_profile: str | None,
               pin: str | None) -> list[str] | None:
    """The refs a narrowed push or pull moves (None: every campaign head and pin)."""
    from clawstore.errors import UsageError

    if suite is None and run_profile is None and evaluation_profile is None and pin is None:
        return None
    names = []
    if suite or run_profile or evaluation_profile:
        if not (suite and run_profile):
            raise UsageError("--suite and --run-profile name a campaign together")
        from clawstore.config.names import campaign_ids

        names.append("campaigns/" + campaign_ids(Path.cwd(), suite, run_profile, evaluation_profile).campaign_id)
    if pin:
        names.append("pins/" + pin)
    return names


@click.group("remote")
def remote_group() -> None:
    """Named remotes saved in the workspace file claw.yaml."""


@remote_group.command("add")
@click.argument("name")
@click.argument("url")
@_ENDPOINT
def remote_add(name: str, url: str, endpoint_url: str | None) -> None:
    """Save URL (s3://BUCKET/PREFIX, file:///PATH or a directory) as remote NAME."""
    from clawstore.remote.config import Remote, save_remote

    save_remote(_workspace(), Remote(name, url, endpoint_url), name)
    click.echo(f"remote {name} = {url}")


@remote_group.command("list")
def remote_list() -> None:
    """Print every saved remote."""
    from clawstore.remote.config import load_remotes

    for remote in load_remotes(_workspace()).values():
        extra = f"  (endpoint {remote.endpoint_url})" if remote.endpoint_url else ""
        click.echo(f"{remote.name}\t{remote.url}{extra}")


@remote_group.command("remove")
@click.argument("name")
def remote_remove(name: str) -> None:
    """Forget remote NAME (the remote itself is untouched)."""
    from clawstore.remote.config import save_remote

    save_remote(_workspace(), None, name)
    click.echo(f"removed remote {name}")


@click.command("push")
@click.argument("remote")
@_ENDPOINT
@_narrow
@_PROGRESS
@store_option
def push_command(remote: str, endpoint_url: str | None, suite: str | None, run_profile: str | None,
                 evaluation_profile: str | None, pin: str | None, progress: str, store_dir: Path | None) -> None:
    """Send what REMOTE lacks (whole packs), then move its refs by compare-and-swap."""
    from clawstore.builder.gcpause import collector_paused
    from clawstore.remote.config import resolve_remote
    from clawstore.remote.progress import open_transfer_progress
    from clawstore.remote.push import push
    from clawstore.store import Store

    target = resolve_remote(_workspace(), remote, endpoint_url)  # (a bad one is refused before the store opens)
    store = Store(workspace_store_dir(store_dir, must_exist=True), create=False)
    shown = open_transfer_progress(progress, sys.stderr, "pushing", f"to {target.url}")
    try:
        with collector_paused():  # its lists of ids are acyclic; the process ends right after
            report = push(store, target, _ref_names(suite, run_profile, evaluation_profile, pin), progress=shown)
    finally:
        shown.close()
    click.echo(report.summary())


@click.command("pull")
@click.argument("remote")
@_ENDPOINT
@_narrow
@click.option("--untrusted", is_flag=True, help="Take packs signed by a key you do not trust: kept apart, never "
              "reused by a build until you `claw trust add` the signer (refs are kept apart too).")
@_PROGRESS
@store_option
def pull_command(remote: str, endpoint_url: str | None, suite: str | None, run_profile: str | None,
                 evaluation_profile: str | None, pin: str | None, untrusted: bool, progress: str,
                 store_dir: Path | None) -> None:
    """Fetch what this store lacks from REMOTE (verified before it becomes visible), then its refs."""
    from clawstore.builder.gcpause import collector_paused
    from clawstore.remote.config import resolve_remote
    from clawstore.remote.progress import open_transfer_progress
    from clawstore.remote.pull import pull
    from clawstore.store import Store

    target = resolve_remote(_workspace(), remote, endpoint_url, must_exist=True)  # before a store is created
    store = Store(workspace_store_dir(store_dir), create=True)
    shown = open_transfer_progress(progress, sys.stderr, "pulling", f"from {target.url}")
    try:
        with collector_paused():  # 10% of a big pull was the collector walking its acyclic ids and documents
            report = pull(store, target, _ref_names(suite, run_profile, evaluation_profile, pin),
                          untrusted=untrusted, progress=shown)
    finally:
        shown.close()
    click.echo(report.summary())


def register(group: click.Group) -> None:
    group.add_command(remote_group)
    group.add_command(push_command)
    group.add_command(pull_command)
