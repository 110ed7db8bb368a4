"""`claw gc`: delete what no ref reaches; say what it deleted and kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from clawstore.cli.common import size_text, store_option, store_project


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
    from clawstore.store.services.gc import parse_duration

    grace_s = parse_duration(grace)
    listed = verbose or (dry_run and as_json)  # (what prints the lists; the summary counts)
    collected = store_project(store_dir).gc(grace_s, dry_run, listed)
    report, stopped = collected.report, collected.stopped
    scratch, scratch_bytes = collected.scratch
    if as_json:
        doc: dict[str, Any] = report.to_json()
        doc["containers_stopped"] = stopped
        doc.update(scratch_removed=scratch, scratch_bytes_removed=scratch_bytes)
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
        click.echo(
            f"gc{' (dry run)' if dry_run else ''}: {verb} {report.objects_deleted} objects "
            f"({size_text(report.object_bytes_deleted)}), {report.actions_deleted} action-cache entries, "
            f"{report.temp_files} stale temp files "
            f"({size_text(report.temp_bytes)}); {'would free' if dry_run else 'freed'} {size_text(report.bytes_freed)}"
        )
        click.echo(
            f"kept {report.reachable} objects reachable from {report.roots} roots, {report.kept_young} younger "
            f"than the grace period ({grace}), {report.kept_for_builds} for running builds; "
            f"{report.objects_seen} objects examined in {report.seconds:.2f}s"
        )
        if report.packs_rewritten or report.packs_deleted:  # (sparse or small packs: docs/gc-and-archives.md)
            copies = f" ({report.copies_deleted} a killed gc's copies)" if report.copies_deleted else ""
            click.echo(f"packs: {report.packs_rewritten} {'to rewrite' if dry_run else 'rewritten'} into one, "
                       f"{report.packs_deleted} {'to delete' if dry_run else 'deleted'}{copies}")
        if scratch:
            click.echo(f"removed {scratch} scratch director{'y' if scratch == 1 else 'ies'} killed runs left in the "
                       f"temp directory ({size_text(scratch_bytes)})")
        if stopped:
            click.echo(f"stopped {len(stopped)} OpenClaw container(s) that killed builds left running: "
                       f"{', '.join(stopped)}")
    for why in collected.unanswered:
        click.echo(f"claw: warning: cannot ask the container engine about killed builds' containers ({why}); "
                   "the next gc asks again", err=True)
    if report.plan_in_memory:  # (the plan's rows held in memory, as before session 60: the user should know why)
        click.echo(f"claw: note: tmp/ refused gc's temporary files ({report.plan_in_memory}): gc held its plan in "
                   "memory instead, about 52 bytes more an object (docs/gc-and-archives.md)", err=True)
    if report.live_leases:
        click.echo(f"claw: note: {len(report.live_leases)} build(s) or import(s) running: gc kept everything "
                   "they may use; run it again later to collect the rest", err=True)
    if report.dangling:
        click.echo(f"claw: warning: {len(report.dangling)} object(s) named by reachable objects are missing "
                   "(run claw fsck)", err=True)


def register(group: click.Group) -> None:
    group.add_command(gc_command)
