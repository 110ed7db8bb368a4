"""`claw gc`, `claw pin`, `claw unpin`, `claw refs` and `claw archive export|import|verify|ls`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawstore.cli.common import (
    campaign_options,
    require_built,
    resolve_store_dir,
    store_option,
    workspace_store_dir,
)
from clawstore.errors import UsageError

if TYPE_CHECKING:
    from clawstore.store.store import Store

PIN_PREFIX = "pins/"


def _store(store_dir: Path | None, create: bool = False, root: Path | None = None) -> Any:
    from clawstore.store import Store

    path = resolve_store_dir(store_dir, root) if root is not None else workspace_store_dir(store_dir, not create)
    return Store(path, create=create)


def _campaign(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
              models: tuple[str, ...], what: str) -> Any:
    from clawstore.config import resolve_campaign

    if cases or models:
        raise UsageError(f"{what} covers a whole campaign: --case and --model are not allowed here")
    return resolve_campaign(Path.cwd(), suite, run_profile, evaluation_profile)


def _bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


# ---------------------------------------------------------------------------------------------- gc

@click.command("gc")
@click.option("--dry-run", is_flag=True, help="Summarise what would be deleted (--verbose: list it); delete nothing.")
@click.option("--grace", "grace", default="1h", show_default=True, metavar="DURATION",
              help="Keep anything modified more recently than this (e.g. 0, 30s, 15m, 1h, 2d).")
@click.option("--verbose", "-v", is_flag=True, help="List every deleted object and action-cache entry.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (with the lists on --dry-run).")
@store_option
def gc_command(dry_run: bool, grace: str, verbose: bool, as_json: bool, store_dir: Path | None) -> None:
    """Delete objects and action-cache entries no ref (campaign head, pin) reaches.

    Safe while builds run: it keeps what they wrote and everything the action cache names until they end.
    """
    from clawstore.store.gc import collect, parse_duration

    grace_s = parse_duration(grace)
    store = _store(store_dir)
    report = collect(store, grace_s=grace_s, dry_run=dry_run)
    stopped, unanswered = _stop_orphans(store) if not dry_run else ([], [])
    if as_json:
        doc: dict[str, Any] = report.to_json()
        doc["containers_stopped"] = stopped
        if dry_run or verbose:
            doc["objects"] = [{"id": oid, "stored_bytes": size} for oid, size in report.objects]
            doc["actions"] = [{"key": key, "record": rid} for key, rid in report.actions]
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        verb = "would delete" if dry_run else "deleted"
        if verbose:  # the summary below is what most want; the lists can run to thousands of lines
            for key, record_id in report.actions:
                click.echo(f"{verb} action {key} -> {record_id}")
            for oid, size in report.objects:
                click.echo(f"{verb} object {oid} {size}")
        stored = sum(size for _, size in report.objects)
        click.echo(
            f"gc{' (dry run)' if dry_run else ''}: {verb} {len(report.objects)} objects ({_bytes(stored)}), "
            f"{len(report.actions)} action-cache entries, {report.temp_files} stale temp files "
            f"({_bytes(report.temp_bytes)}); {'would free' if dry_run else 'freed'} {_bytes(report.bytes_freed)}"
        )
        click.echo(
            f"kept {report.reachable} objects reachable from {report.roots} roots, {report.kept_young} younger "
            f"than the grace period ({grace}), {report.kept_for_builds} for running builds; "
            f"{report.objects_seen} objects examined in {report.seconds:.2f}s"
        )
        if report.packs_rewritten or report.packs_deleted:  # (sparse or small packs: docs/gc-and-archives.md)
            click.echo(f"packs: {report.packs_rewritten} {'to rewrite' if dry_run else 'rewritten'} into one, "
                       f"{report.packs_deleted} {'to delete' if dry_run else 'deleted'}")
        if stopped:
            click.echo(f"stopped {len(stopped)} OpenClaw container(s) that killed builds left running: "
                       f"{', '.join(stopped)}")
    for why in unanswered:
        click.echo(f"claw: warning: cannot ask the container engine about killed builds' containers ({why}); "
                   "the next gc asks again", err=True)
    if report.live_leases:
        click.echo(f"claw: note: {len(report.live_leases)} build(s) or import(s) running: gc kept everything "
                   "they may use; run it again later to collect the rest", err=True)
    if report.dangling:
        click.echo(f"claw: warning: {len(report.dangling)} object(s) named by reachable objects are missing "
                   "(run claw fsck)", err=True)


def _stop_orphans(store: Store) -> tuple[list[str], list[str]]:
    """OpenClaw containers of this store's killed builds, stopped; engines that did not answer
    (clawstore/runners/openclaw/orphans.py)."""
    if not (store.root / "containers").is_dir():  # (no build recorded any: not worth the runner's imports)
        return [], []
    from clawstore.runners.openclaw.orphans import stop_orphans

    orphans = stop_orphans(store)
    return orphans.stopped, orphans.unanswered


# ---------------------------------------------------------------------------------------------- refs

@click.command("pin")
@click.argument("name")
@campaign_options
@click.option("--force", is_flag=True, help="Move an existing pin of this name.")
def pin_command(name: str, suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                models: tuple[str, ...], store_dir: Path | None, force: bool) -> None:
    """Keep a campaign's current state forever: ref pins/NAME -> its head now (later builds do not move it)."""
    from clawstore.builder.closure import campaign_head
    from clawstore.store import RefConflict
    from clawstore.store.refs import check_ref_name

    ref = check_ref_name(PIN_PREFIX + name)
    campaign = _campaign(suite, run_profile, evaluation_profile, cases, models, "claw pin")
    store = _store(store_dir, root=campaign.root)
    require_built(store, campaign.campaign_id)
    head_id = campaign_head(store, campaign.campaign_id)
    current = store.get_ref(ref)
    if current == head_id:
        click.echo(f"{ref} already -> {head_id} (campaign {campaign.campaign_id})")
        return
    if current is not None and not force:
        raise UsageError(f"pin {name} exists (-> {current}); use --force to move it or claw unpin {name}")
    try:
        store.set_ref(ref, head_id, expected=current)
    except RefConflict as exc:
        raise UsageError(f"pin {name} changed meanwhile (-> {exc.actual}); try again") from None
    click.echo(f"{ref} -> {head_id} (campaign {campaign.campaign_id})")


@click.command("unpin")
@click.argument("name")
@store_option
def unpin_command(name: str, store_dir: Path | None) -> None:
    """Remove pin NAME (its objects become collectable once nothing else reaches them)."""
    from clawstore.store.refs import check_ref_name

    ref = check_ref_name(PIN_PREFIX + name)
    store = _store(store_dir)
    target = store.get_ref(ref)
    if target is None or not store.delete_ref(ref):
        raise UsageError(f"no pin named {name} (see claw refs)")
    click.echo(f"removed {ref} (was -> {target})")


@click.command("refs")
@click.option("--json", "as_json", is_flag=True, help="Print {name: target} as JSON.")
@click.option("--delete", "delete", multiple=True, metavar="NAME",
              help="Delete ref NAME (repeatable), e.g. the head of a campaign you no longer build: "
                   "claw gc then reclaims what only it reached.")
@store_option
def refs_command(as_json: bool, delete: tuple[str, ...], store_dir: Path | None) -> None:
    """List refs: campaign heads (campaigns/...) and pins (pins/...), the roots gc keeps."""
    store = _store(store_dir)
    if delete:
        _delete_refs(store, delete, as_json)
        return
    refs = store.list_refs()
    if as_json:
        click.echo(json.dumps(refs, indent=2, sort_keys=True))
        return
    for name, target in refs.items():
        click.echo(f"{name}\t{target}")


def _delete_refs(store: Store, names: tuple[str, ...], as_json: bool) -> None:
    """Delete these refs, all or none: every name is checked before any is deleted. A ref moved
    meanwhile (a build advancing its head) is deleted all the same: deleting was asked by name."""
    from clawstore.store.refs import check_ref_name

    targets = {}
    for name in names:
        target = store.get_ref(check_ref_name(name))
        if target is None:
            raise UsageError(f"no ref {name} (claw refs lists them)")
        targets[name] = target
    for name in targets:
        store.delete_ref(name)
    if as_json:
        click.echo(json.dumps({"removed": targets}, indent=2, sort_keys=True))
        return
    tracking = store.list_refs("remotes/")  # remotes/<remote>/<name> (remote/sync.py TRACKING; not imported: 0.2 s)
    for name, target in targets.items():
        click.echo(f"removed {name} (was -> {target})")
        for other in sorted(n for n in tracking if n.endswith("/" + name)):
            click.echo(f"claw: note: {other} still keeps what it reaches (this name's value at the last "
                       f"push or pull there): claw refs --delete {other} lets gc reclaim it too", err=True)


# ---------------------------------------------------------------------------------------------- archive

@click.group("archive")
def archive_group() -> None:
    """Export a campaign into one reproducible file; verify, list and import such files."""


@archive_group.command("export")
@campaign_options
@click.option("-o", "--out", "--output", "output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The archive file to write.")
def export_command(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                   models: tuple[str, ...], store_dir: Path | None, output: Path) -> None:
    """Write the campaign's configs, head, records, inputs and outputs into one file."""
    from clawstore.builder.closure import export_campaign

    campaign = _campaign(suite, run_profile, evaluation_profile, cases, models, "claw archive export")
    store = _store(store_dir, root=campaign.root)
    require_built(store, campaign.campaign_id)
    if output.parent and not output.parent.is_dir():
        raise UsageError(f"-o {output}: directory {output.parent} does not exist")
    summary = export_campaign(store, campaign, output)
    click.echo(f"wrote {output}: campaign {campaign.campaign_id}, {summary.objects} objects, "
               f"{_bytes(summary.size)}")
    click.echo(f"digest {summary.digest}")


@archive_group.command("verify")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def verify_command(file: Path) -> None:
    """Check every byte of an archive (every object's hash, the member list, the seal)."""
    from clawstore.store.archive import verify_archive

    summary = verify_archive(file)
    campaign = (summary.manifest.get("campaign") or {}).get("id")
    click.echo(f"ok: {file}: campaign {campaign}, {summary.objects} objects, {_bytes(summary.size)}")
    click.echo(f"digest {summary.digest}")


@archive_group.command("ls")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the archive's manifest as JSON.")
def ls_command(file: Path, as_json: bool) -> None:
    """Show what an archive holds (from its manifest; `claw archive verify` checks the contents)."""
    from clawstore.store.archive import read_manifest

    manifest = read_manifest(file)
    if as_json:
        click.echo(json.dumps(manifest, indent=2, sort_keys=True))
        return
    campaign = manifest.get("campaign") or {}
    objects = manifest["objects"]
    click.echo(f"campaign  {campaign.get('id')}")
    click.echo(f"build     {manifest.get('build_id')}")
    click.echo(f"head      {manifest.get('head')}")
    click.echo(f"objects   {len(objects)} ({_bytes(sum(size for _, size in objects))} stored)")
    click.echo(f"actions   {len(manifest.get('actions') or {})}")
    for name, target in sorted((manifest.get("refs") or {}).items()):
        click.echo(f"ref       {name} -> {target}")
    configs = manifest.get("configs") or {}
    click.echo(f"configs   {configs.get('tree')}")
    for entry in configs.get("files") or []:
        if entry.get("type") != "dir":
            click.echo(f"  {entry.get('path')}  {entry.get('size')}")


@archive_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--configs-to", "configs_to", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the campaign's configs as a workspace: DIR/configs/... (DIR must be empty or "
                   "hold only its store/). The store is then DIR/store unless --store or CLAW_STORE says "
                   "otherwise, so `claw build` inside DIR reuses everything.")
@click.option("--pin", "pins", multiple=True, metavar="NAME", help="Also pin the imported head as pins/NAME.")
@click.option("--untrusted", is_flag=True, help="Import an archive signed by a key you do not trust (or unsigned): "
              "its objects are added, its results kept apart and never reused until you `claw trust add` "
              "the signer.")
@store_option
def import_command(file: Path, configs_to: Path | None, pins: tuple[str, ...], untrusted: bool,
                   store_dir: Path | None) -> None:
    """Verify an archive completely, then add its objects, action-cache entries and campaign ref to the store."""
    from clawstore.builder.closure import adopt_imported_head, campaign_archive_check, configs_of
    from clawstore.store.archive_import import import_into, import_target_problem
    from clawstore.store.names import check_name

    # Every precondition before anything is written.
    pin_refs = [PIN_PREFIX + check_name(p, "--pin") for p in pins]
    if not file.is_file():
        raise UsageError(f"archive {file}: {'not a regular file' if file.exists() else 'no such file'}")
    if configs_to is not None:
        _check_configs_target(configs_to)
        if store_dir is None and not os.environ.get("CLAW_STORE"):
            store_dir = configs_to / "store"  # where `claw build` run inside DIR looks
    target = workspace_store_dir(store_dir)
    problem = import_target_problem(target)
    if problem is not None:
        raise UsageError(f"--store {target}: {problem}")
    store, report = import_into(target, file, pins=pin_refs, untrusted=untrusted,
                                check=campaign_archive_check(f"archive {file}", configs_to is not None))
    manifest = report.summary.manifest
    head = manifest.get("head")
    if report.kept_apart is not None:
        click.echo(f"claw: warning: {file} is {'signed by ' + report.signer if report.signer else 'not signed'}, "
                   f"a key you do not trust: its results are kept apart ({report.kept_apart}) and no build "
                   "reuses them until you trust it", err=True)
    elif isinstance(head, str):
        adopt_imported_head(store, head)
    click.echo(f"imported {file} into {store.root}: {report.new_objects} new objects ({_bytes(report.new_bytes)}), "
               f"{report.present_objects} already present; {report.actions_written} action-cache entries "
               f"written, {report.actions_kept} kept")
    for name in report.refs_set:
        click.echo(f"ref {name} -> {head if name.startswith(PIN_PREFIX) else manifest['refs'].get(name)}")
    for name, current in report.refs_kept.items():
        hint = "" if name.startswith(PIN_PREFIX) else " (use --pin NAME to keep the archive's state as well)"
        click.echo(f"claw: warning: ref {name} already points at {current}; left unchanged{hint}", err=True)
    tree = configs_of(manifest)
    if configs_to is not None and tree is not None:
        _write_configs(store, tree, configs_to)
        click.echo(f"configs written to {configs_to / 'configs'}")
    click.echo(f"digest {report.summary.digest}")


def _check_configs_target(directory: Path) -> None:
    """--configs-to DIR: absent, empty, or a fresh workspace that holds only its store/."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise UsageError(f"--configs-to {directory}: not a directory")
    extra = sorted(p.name for p in directory.iterdir() if p.name != "store")
    if extra:
        raise UsageError(f"--configs-to {directory}: not empty (holds {', '.join(extra[:3])}"
                         f"{', …' if len(extra) > 3 else ''}); use an empty directory or a fresh workspace")


def _write_configs(store: Store, tree: str, directory: Path) -> None:
    """Check the config tree out beside DIR's store, then move its configs/ into DIR in one step."""
    import shutil
    import tempfile

    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".claw-configs-", dir=directory))
    try:
        store.checkout(tree, staging / "workspace")
        os.rename(staging / "workspace" / "configs", directory / "configs")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def register(group: click.Group) -> None:
    for command in (gc_command, pin_command, unpin_command, refs_command, archive_group):
        group.add_command(command)
