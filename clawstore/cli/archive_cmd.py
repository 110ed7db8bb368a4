"""`claw archive export|verify|ls|import`: a campaign in one reproducible file, and such files read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.cli.build_view import note
from clawstore.cli.common import campaign_options, campaign_project, size_text, store_option, store_project
from clawstore.cli.summaries import SummaryGroup

if TYPE_CHECKING:
    from clawstore.store.services.archive_import import ImportReport


@click.group("archive", cls=SummaryGroup)
def archive_group() -> None:
    """Export a campaign into one reproducible file; verify, list and import such files."""


@archive_group.command("export")
@campaign_options
@click.option("-o", "--out", "--output", "output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The archive file to write.")
def export_command(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                   models: tuple[str, ...], store_dir: Path | None, output: Path) -> None:
    """Write the campaign's configs, head, records, inputs and outputs into one file."""
    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir,
                               create_store=False, quiet=True)
    summary, campaign_id, unbuilt = project.export(output)
    click.echo(f"wrote {output}: campaign {campaign_id}, {summary.objects} objects, {size_text(summary.size)}")
    click.echo(f"digest {summary.digest}")
    if unbuilt.batched:  # (a build here collects them; one of the archive cannot, and sends them again)
        note(f"{unbuilt.count} node(s) of campaign {campaign_id} are not built for its configs as they are now (stale "
             f"or never built: claw explain says which); {unbuilt.batched} of them are pending in provider batches "
             "here, which a build of this archive cannot collect: it runs and pays for all of them (claw batch status "
             "--wait, then claw build, before exporting to archive them built)")
    elif unbuilt.count:
        note(f"{unbuilt.count} node(s) of campaign {campaign_id} are not built for its configs as they are now (stale "
             "or never built: claw explain says which); a build of this archive runs and pays for them, as one here "
             "would (claw build before exporting to archive them built)")


@archive_group.command("verify")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def verify_command(file: Path) -> None:
    """Check every byte of an archive (every object's hash, the member list, the seal)."""
    from clawstore.store.services.archive import verify_archive

    summary = verify_archive(file)
    campaign = summary.manifest.campaign_id
    click.echo(f"ok: {file}: campaign {campaign}, {summary.objects} objects, {size_text(summary.size)}")
    click.echo(f"digest {summary.digest}")


@archive_group.command("ls")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the archive's manifest as JSON.")
def ls_command(file: Path, as_json: bool) -> None:
    """Show what an archive holds (from its manifest; `claw archive verify` checks the contents)."""
    from clawstore.store.services.archive import read_manifest

    manifest = read_manifest(file)
    if as_json:
        click.echo(json.dumps(manifest.document(), indent=2, sort_keys=True))
        return
    objects = manifest.objects
    click.echo(f"campaign  {manifest.campaign_id}")
    click.echo(f"build     {manifest.build_id}")
    click.echo(f"head      {manifest.head}")
    click.echo(f"objects   {len(objects)} ({size_text(objects.stored_bytes)} stored)")
    click.echo(f"actions   {len(manifest.actions)}")
    for name, target in sorted(manifest.refs.items()):
        click.echo(f"ref       {name} -> {target}")
    configs = manifest.configs or {}
    click.echo(f"configs   {configs.get('tree')}")
    for entry in configs.get("files") or []:
        if entry.get("type") != "dir":
            click.echo(f"  {_shown_path(entry.get('path'))}  {_shown_path(entry.get('size'))}")


def _shown_path(value: object) -> str:
    """A value of the manifest as `ls` prints it: the manifest is the archive's word alone (no object is read), so what
    the tree rule would refuse (a control character, a terminal escape, a newline forging a line) is printed escaped,
    on its one line."""
    from clawstore.errors import quoted
    from clawstore.store.core.names import relative_path_problem

    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and relative_path_problem(value) is None:
        return value
    return quoted(value, 300)


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
    from clawstore.project.keeping import PIN_PREFIX

    imported = store_project(store_dir).import_archive(file, configs_to, pins, untrusted)
    store, report = imported.store, imported.report
    manifest = report.summary.manifest
    head = manifest.head
    if report.kept_apart is not None:
        click.echo(f"claw: warning: {file} is {'signed by ' + report.signer if report.signer else 'not signed'}, "
                   f"a key you do not trust: its results are kept apart ({report.kept_apart}) and no build "
                   "reuses them until you trust it", err=True)
    click.echo(f"imported {file} into {store.root}: {report.new_objects} new objects ({size_text(report.new_bytes)}), "
               f"{report.present_objects} already present; " + _entries_said(report))
    for name in report.refs_set:
        click.echo(f"ref {name} -> {head if name.startswith(PIN_PREFIX) else manifest.refs.get(name)}")
    for name, current in report.refs_kept.items():
        hint = "" if name.startswith(PIN_PREFIX) or pins else " (use --pin NAME to keep the archive's state as well)"
        click.echo(f"claw: warning: ref {name} already points at {current}; left unchanged{hint}", err=True)
    if report.kept_by is not None:
        click.echo(f"kept from gc by ref {report.kept_by} (the results the archive carries beyond its head; once "
                   f"built, `claw refs --delete {report.kept_by}` lets gc reclaim what no head names)")
    if configs_to is not None and imported.configs is not None:  # (written under the import's lease)
        click.echo(f"configs written to {configs_to / 'configs'}")
    click.echo(f"digest {report.summary.digest}")


def _entries_said(report: ImportReport) -> str:
    """What became of the archive's action-cache entries: kept apart, none written (an untrusted import's summary
    said '0 written, 0 kept', as if the archive held none: session 77), or written and kept."""
    if report.kept_apart is not None:
        return f"{report.actions_kept_apart} action-cache entries kept apart in {report.kept_apart}"
    return f"{report.actions_written} action-cache entries written, {report.actions_kept} kept"


def register(group: click.Group) -> None:
    group.add_command(archive_group)
