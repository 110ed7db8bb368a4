"""`claw pull REMOTE`: fetch what this store lacks (verified before it becomes visible), then its refs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.cli.common import closed_with_command, store_option, workspace_store_dir
from clawstore.cli.transfer_options import ENDPOINT, PROGRESS, narrow, ref_names, workspace

if TYPE_CHECKING:
    from clawstore.store import Store


@click.command("pull")
@click.argument("remote")
@ENDPOINT
@narrow
@click.option("--untrusted", is_flag=True, help="Take packs signed by a key you do not trust: kept apart, never "
              "reused by a build until you `claw trust add` the signer (refs are kept apart too).")
@PROGRESS
@store_option
def pull_command(remote: str, endpoint_url: str | None, suite: str | None, run_profile: str | None,
                 evaluation_profile: str | None, pin: str | None, untrusted: bool, progress: str,
                 store_dir: Path | None) -> None:
    """Fetch what this store lacks from REMOTE (verified before it becomes visible), then its refs."""
    from clawstore.builder.cyclic_gc import collector_paused
    from clawstore.remote.config import resolve_remote
    from clawstore.remote.progress import open_transfer_progress
    from clawstore.remote.pull import pull
    from clawstore.store import Store
    from clawstore.store.pulled import keep_pulled

    target = resolve_remote(workspace(), remote, endpoint_url, must_exist=True)  # before a store is created
    where = workspace_store_dir(store_dir)
    made = _first_missing(where)
    store = closed_with_command(Store(where, create=True))
    shown = open_transfer_progress(progress, sys.stderr, "pulling", f"from {target.url}")
    try:
        with collector_paused():  # 10% of a big pull was the collector walking its acyclic ids and documents
            report = pull(store, target, ref_names(suite, run_profile, evaluation_profile, pin),
                          untrusted=untrusted, progress=shown, keep=keep_pulled)
    except Exception:  # (not an interrupt: the pull run again resumes there, fsck can look)
        if made is not None:  # (an unreachable remote, a refused pack: no empty store left where there was none)
            _unmake(store, where, made)
        raise
    finally:
        shown.close()
    for line in report.skipped_lines():  # (the pull went on without them)
        click.echo(line, err=True)
    click.echo(report.summary())


def _first_missing(where: Path) -> Path | None:
    """The highest of `where` and its parents that does not exist yet (what making the store creates), or None."""
    missing = None
    for each in (where.absolute(), *where.absolute().parents):
        if each.exists():
            return missing
        missing = each
    return missing


def _unmake(store: Store, where: Path, made: Path) -> None:
    """Remove the store this failed pull made, if it holds nothing: no object, entry or ref (what a bundle of an
    older claw imported before the failure, or another process wrote meanwhile, keeps it), no pack downloaded whole
    (kept for the pull run again: remote/downloads.py); then the parents made for it, up to `made`, while empty."""
    remotes = store.layout.remotes
    kept = remotes.is_dir() and any(any(store.layout.incoming(each.name).glob("*")) for each in remotes.iterdir())
    empty = (not kept and not store.list_refs() and next(iter(store.iter_objects()), None) is None
             and next(iter(store.iter_actions()), None) is None)
    store.close()
    if not empty:
        return
    shutil.rmtree(where, ignore_errors=True)
    for parent in where.absolute().parents:
        if not parent.is_relative_to(made):
            break
        try:
            parent.rmdir()  # only while empty: another process may have put something there meanwhile
        except OSError:
            break


def register(group: click.Group) -> None:
    group.add_command(pull_command)
