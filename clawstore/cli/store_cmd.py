"""Store commands: put, cat, ls-tree, checkout, fsck, store stats."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import click

from clawstore.cli.common import store_option, workspace_store_dir
from clawstore.errors import StoreError, UsageError
from clawstore.store import Store, check_oid
from clawstore.store.codec import CHUNK
from clawstore.store.fsck import fsck as run_fsck
from clawstore.store.layout import check_marker
from clawstore.store.stats import store_stats

_F = TypeVar("_F", bound=Callable[..., Any])
_VERIFY_FIRST_MAX = 64 << 20  # cat buffers (verified) objects up to this size; larger ones: two passes


def _os_errors(command: _F) -> _F:
    """Any OSError left over becomes one line: a store problem (3) or a bad path argument (2)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except OSError as exc:
            name = str(exc.filename or "")
            store_dir = kwargs.get("store_dir")
            in_store = bool(name) and store_dir is not None and name.startswith(str(store_dir))
            error = StoreError if in_store or "/objects/" in name else UsageError
            raise error(f"{name + ': ' if name else ''}{exc.strerror or exc}") from None

    return wrapper  # type: ignore[return-value]


def _open_store(store_dir: Path | None, create: bool = False) -> Store:
    return Store(workspace_store_dir(store_dir, must_exist=not create), create=create)


def _existing(store: Store, oid: str) -> str:
    """A command-line id: malformed or absent is bad input (exit 2), not a broken store."""
    check_oid(oid)
    if not store.has(oid):
        raise UsageError(f"no such object: {oid} (store {store.root})")
    return oid


@click.command("put")
@click.argument("paths", nargs=-1, required=True)
@store_option
@_os_errors
def put_cmd(paths: tuple[str, ...], store_dir: Path | None) -> None:
    """Store files (a directory becomes a tree; '-' reads stdin). Prints one id per argument."""
    for raw in paths:
        if raw != "-" and not os.path.lexists(raw):
            raise UsageError(f"put: {raw}: no such file or directory")
    store = _open_store(store_dir, create=True)
    ids = []
    with store.batch():  # all arguments share a few flushes; ids are printed once durable
        for raw in paths:
            path = Path(raw)
            if raw == "-":
                ids.append(store.put_stream(click.get_binary_stream("stdin")))
            elif path.is_dir():
                ids.append(store.put_tree(path))
            else:
                ids.append(store.put_file(path))
    for oid in ids:
        click.echo(oid)


@click.command("cat")
@click.argument("oid", metavar="ID")
@store_option
@_os_errors
def cat_cmd(oid: str, store_dir: Path | None) -> None:
    """Write an object's bytes to stdout, verified before they are written."""
    store = _open_store(store_dir)
    _existing(store, oid)
    out = click.get_binary_stream("stdout")
    logical, _ = store.object_sizes(oid)
    try:
        if logical <= _VERIFY_FIRST_MAX:
            out.write(store.get_bytes(oid))
        else:
            with store.open_object(oid) as reader:  # pass 1: verify without output
                while reader.read(CHUNK):
                    pass
            with store.open_object(oid) as reader:
                _copy(reader, out)
        out.flush()
    except BrokenPipeError:  # `claw cat ID | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _copy(reader: BinaryIO, out: BinaryIO) -> None:
    while chunk := reader.read(CHUNK):
        out.write(chunk)


@click.command("ls-tree")
@click.argument("oid", metavar="ID")
@store_option
@_os_errors
def ls_tree_cmd(oid: str, store_dir: Path | None) -> None:
    """List a tree: mode, type, object, size, path."""
    store = _open_store(store_dir)
    for entry in store.read_tree(_existing(store, oid)):
        line = f"{entry.mode:06o} {entry.type:<7} {entry.object or '-':<71} {entry.size:>10}\t{entry.path}"
        if entry.target is not None:
            line += f" -> {entry.target}"
        click.echo(line)


@click.command("checkout")
@click.argument("oid", metavar="ID")
@click.argument("dest", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--allow-external-links", is_flag=True,
              help="Also create symlinks that point outside DIR (refused by default).")
@store_option
@_os_errors
def checkout_cmd(oid: str, dest: Path, allow_external_links: bool, store_dir: Path | None) -> None:
    """Materialise a tree into DIR (created if missing; must be empty)."""
    store = _open_store(store_dir)
    store.checkout(_existing(store, oid), dest, allow_external_links=allow_external_links)


@click.command("fsck")
@click.option("--repair", is_flag=True,
              help="Quarantine what is damaged, fix campaign heads and shard folders, rebuild a damaged "
                   "manifest, remove stale temp files and leases (see docs/store.md).")
@click.option("--rebuild-manifest", is_flag=True, help="Afterwards, rebuild the query manifest from records.")
@store_option
@_os_errors
def fsck_cmd(repair: bool, rebuild_manifest: bool, store_dir: Path | None) -> None:
    """Verify what builds and queries rely on: objects, action-cache entries, refs and campaign heads,
    build logs, shard folders, the query manifest. Exit 1 if something is wrong."""
    try:
        from clawstore.query.manifest import manifest_problems, repair_manifest
    except ImportError as exc:  # a store-only install: everything but the manifest is checked
        if rebuild_manifest:
            raise UsageError(f"--rebuild-manifest: the query layer is not available ({exc})") from None
        manifest_problems = repair_manifest = None  # type: ignore[assignment]
    marker_problem, marker_repaired = check_marker(workspace_store_dir(store_dir), repair)
    if marker_problem is not None and marker_repaired is None:  # no command opens the store as it is
        click.echo(f"problem: {marker_problem}")
        click.echo("fsck: 1 problem(s) (the rest of the store is checked once the marker is rewritten)", err=True)
        sys.exit(1)
    store = _open_store(store_dir)
    report = run_fsck(store, repair=repair)
    manifest = manifest_problems(store) if manifest_problems is not None else []
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
    if repair_manifest is not None and (rebuild_manifest or (repair and (manifest or report.bad_build_logs))):
        result = repair_manifest(store)
        click.echo(f"{'repaired: ' if repair and manifest else ''}manifest rebuilt: {result} build(s) indexed")
        manifest = manifest_problems(store)
    unresolved = report.unresolved + manifest
    if unresolved:
        click.echo(f"fsck: {len(unresolved)} problem(s)", err=True)
        sys.exit(1)


@click.group("store")
def store_group() -> None:
    """Inspect the store."""


@store_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@store_option
@_os_errors
def stats_cmd(as_json: bool, store_dir: Path | None) -> None:
    """Objects, packs, bytes (logical, stored, apparent, on disk), live fraction, what gc would free."""
    stats = store_stats(_open_store(store_dir))
    if as_json:
        click.echo(json.dumps(stats.to_json()))
        return
    click.echo(f"objects        {stats.objects}")
    click.echo(f"logical bytes  {stats.logical_bytes} ({_human(stats.logical_bytes)})")
    click.echo(f"stored bytes   {stats.stored_bytes} ({_human(stats.stored_bytes)})")
    click.echo(f"ratio          {stats.ratio:.2f}")
    click.echo(f"packs          {stats.packs} ({_human(stats.pack_bytes)})")
    click.echo(f"live fraction  {stats.live_fraction:.3f}")
    click.echo(f"files          {stats.files}")
    click.echo(f"apparent bytes {stats.apparent_bytes} ({_human(stats.apparent_bytes)})")
    click.echo(f"disk bytes     {stats.disk_bytes} ({_human(stats.disk_bytes)})")
    click.echo(f"gc would free  {stats.gc_would_free} ({_human(stats.gc_would_free or 0)})")


@store_group.command("migrate")
@store_option
@_os_errors
def migrate_cmd(store_dir: Path | None) -> None:
    """Convert a format-1 store to format 2 (any command does it on first open); safe to interrupt."""
    from clawstore.store.migrate import migrate

    report = migrate(workspace_store_dir(store_dir))
    if not report.migrated:
        click.echo("store is already format 2")
        return
    click.echo(f"migrated {report.objects} objects ({report.copied} copied now) and {report.actions} "
               f"action-cache entries to format 2 in {report.seconds:.2f}s")
    for problem in report.corrupt:
        click.echo(f"quarantined: {problem}")


def _human(count: int) -> str:
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"


def register(group: click.Group) -> None:
    for command in (put_cmd, cat_cmd, ls_tree_cmd, checkout_cmd, fsck_cmd, store_group):
        group.add_command(command)

