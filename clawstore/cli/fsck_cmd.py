"""`claw fsck`: verify (and with --repair, fix) what builds and queries rely on."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import click

from clawstore.cli.common import refuse_read_only, size_text, store_option, workspace_store_dir
from clawstore.cli.store_access import open_store_of, os_errors
from clawstore.errors import UsageError
from clawstore.host import process_end
from clawstore.store.core.layout import StoreLayout, check_marker
from clawstore.store.services.fsck import FsckReport
from clawstore.store.services.fsck import fsck as run_fsck


@click.command("fsck")
@click.option("--repair", is_flag=True,
              help="Quarantine what is damaged, fix campaign heads and shard folders, rebuild a damaged "
                   "manifest, remove stale temp files and leases (see docs/store.md).")
@click.option("--rebuild-manifest", is_flag=True, help="Afterwards, rebuild the query manifest from records.")
@store_option
@os_errors
def fsck_cmd(repair: bool, rebuild_manifest: bool, store_dir: Path | None) -> None:
    """Verify what builds and queries rely on: objects, action-cache entries, refs and campaign heads,
    build logs, shard folders, the query manifest. Exit 1 if something is wrong."""
    query = _manifest_layer(rebuild_manifest) if (
        rebuild_manifest or repair or _has_manifest(workspace_store_dir(store_dir))) else None
    marker_problem, marker_repaired = check_marker(workspace_store_dir(store_dir), repair)
    if marker_problem is not None and marker_repaired is None:  # no command opens the store as it is
        click.echo(f"problem: {marker_problem}")
        click.echo("fsck: 1 problem(s) (the rest of the store is checked once the marker is rewritten)", err=True)
        sys.exit(1)
    if repair:
        refuse_read_only(workspace_store_dir(store_dir), "fsck --repair moves what is damaged aside and rewrites what "
                         "it fixes in it (fsck without --repair only reads)")
    store = open_store_of(store_dir)
    report = run_fsck(store, repair=repair, beside=process_end.is_program())
    manifest = query.manifest_problems(store) if query is not None else []
    for problem in ([marker_problem] if marker_problem else []) + report.problems + manifest:
        click.echo(f"problem: {problem}")
    for line in ([marker_repaired] if marker_repaired else []) + report.repaired:
        click.echo(f"repaired: {line}")
    click.echo(
        f"checked {report.objects} objects, {report.actions} action-cache entries, {report.refs} refs, "
        f"{report.build_logs} build logs in {report.seconds:.2f}s; temp files: {report.temp_files} "
        f"({report.stale_temp_files} stale); stale leases: {report.stale_leases}; "
        f"stray files: {len(report.stray_files)}"
    )
    if report.unindexed_packs:
        click.echo(_unindexed_note(report))
    if query is not None and (rebuild_manifest or (repair and (manifest or report.bad_build_logs))):
        result = query.repair_manifest(store)
        click.echo(f"{'repaired: ' if repair and manifest else ''}manifest rebuilt: {result} build(s) indexed")
        manifest = query.manifest_problems(store)
    unresolved = report.unresolved + manifest
    if unresolved:
        click.echo(f"fsck: {len(unresolved)} problem(s)", err=True)
        for line in _ways_out(report, repair):
            click.echo(f"fsck: {line}", err=True)
        sys.exit(1)


def _has_manifest(root: Path) -> bool:
    """Does the store's manifest hold anything to check (its tmp/ aside, as query/manifest.py's check)? Not in a store
    no query or report has indexed: then neither query/manifest.py nor duckdb is imported (~50 ms of fsck's start)."""
    try:
        return any(entry.name != "tmp" for entry in StoreLayout(root).manifest.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # (unreadable: the check says what is wrong)
        return True


def _manifest_layer(rebuild: bool) -> ModuleType | None:
    """query/manifest.py, which checks and rebuilds the manifest; None in a store-only install (everything but the
    manifest is checked), where --rebuild-manifest is refused."""
    try:
        from clawstore.query import manifest
    except ImportError as exc:
        if rebuild:
            raise UsageError(f"--rebuild-manifest: the query layer is not available ({exc})") from None
        return None
    return manifest


PIN_PREFIX, REMOTES_PREFIX = "pins/", "remotes/"  # (project/keeping.py, remote/sync.py TRACKING: not imported)


def _ways_out(report: FsckReport, repaired: bool) -> list[str]:
    """What mends what was found: --repair (unless it ran), and for each ref it leaves alone the command that mends it
    (a list of problems and a count named none, and a tracking ref stayed 'is missing' at every fsck)."""
    lines = [] if repaired else ["claw fsck --repair quarantines what is damaged; the next build rebuilds what a "
                                 "campaign needs of it (docs/store.md)"]
    for name in sorted({*report.bad_refs, *report.bad_head_nodes}):
        if name.startswith(PIN_PREFIX):
            lines.append(f"ref {name}: a pin is yours: repair leaves it; claw unpin {name[len(PIN_PREFIX):]} drops it")
        elif name.startswith(REMOTES_PREFIX):
            remote = name[len(REMOTES_PREFIX):].split("/", 1)[0]
            pull = "a claw pull from that remote's URL" if remote.startswith("url-") else f"claw pull {remote}"
            lines.append(f"ref {name}: the remote holds what it names: {pull} fetches it again")
    return lines


def _unindexed_note(report: FsckReport) -> str:
    """Where the disk went that no index names: how many packs, their bytes, and who gives them back."""
    packs, copies = len(report.unindexed_packs), report.unindexed_copies
    whose = []
    if copies:
        whose.append(f"{copies} a killed gc's copies (the next claw gc removes them)")
    if packs > copies:
        whose.append(f"{packs - copies} left by a killed writer (claw gc adopts what a torn one finished and removes "
                     "the rest once older than its --grace period)")
    return (f"note: {packs} pack(s), {size_text(sum(report.unindexed_packs.values()))}, hold nothing the index names: "
            f"{'; '.join(whose)}")


def register(group: click.Group) -> None:
    group.add_command(fsck_cmd)
