"""What keeps a store's content: gc, pins and refs, archives exported and imported (`claw gc`, `pin`,
`unpin`, `refs`, `archive`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import UsageError
from clawstore.host.durable import output_problem
from clawstore.host.scratch import sweep_dead_scratch
from clawstore.project.places import refuse_read_only, require_built, workspace_store_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from clawstore.config.campaign import Campaign
    from clawstore.store.services.archive import ArchiveSummary
    from clawstore.store.services.archive_import import ImportReport
    from clawstore.store.services.gc import GcReport
    from clawstore.store.store import Store

PIN_PREFIX = "pins/"


@dataclass
class Collected:
    """One gc, the OpenClaw containers of killed builds it stopped (or could not ask about), and the scratch
    directories killed runs left in the system's temp directory that it removed (how many, their bytes)."""

    report: GcReport
    stopped: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)  # why a container engine did not answer
    scratch: tuple[int, int] = (0, 0)


def collect_garbage(store: Store, grace_s: float, dry_run: bool, listed: bool = True) -> Collected:
    """Delete what no ref reaches (store/services/gc.py); then stop containers killed builds left running. `listed`:
    the report lists what it deleted (else counts it)."""
    from clawstore.store.services.gc import collect

    report = collect(store, grace_s=grace_s, dry_run=dry_run, listed=listed)
    if dry_run:
        return Collected(report)
    scratch = sweep_dead_scratch()
    if not (store.root / "containers").is_dir():  # (no build recorded any: not worth the imports)
        return Collected(report, scratch=scratch)
    from clawstore.runners.openclaw.orphans import stop_orphans

    orphans = stop_orphans(store)
    return Collected(report, orphans.stopped, orphans.unanswered, scratch)


@dataclass
class Pinned:
    ref: str
    head: str
    moved: bool  # False: the pin named that head already


def pin(store: Store, campaign_id: str, name: str, force: bool) -> Pinned:
    """Ref pins/NAME -> the campaign's head now (later builds do not move it)."""
    from clawstore.builder.buildlog import head_ref
    from clawstore.builder.campaign_archive import campaign_head
    from clawstore.store import RefConflict
    from clawstore.store.refs import check_ref_name

    ref = check_ref_name(PIN_PREFIX + name)
    require_built(store, campaign_id)
    # The head kept from a gc until the pin names it (a lease naming it, Store.reading_ref): before session 77 a build
    # moving the campaign on and a `claw gc` meanwhile deleted it, and the pin failed (tests/gc/test_writers_beside_gc).
    with store.reading_ref(head_ref(campaign_id)) as leased:
        head_id = leased or campaign_head(store, campaign_id)  # (None: never built, said as before)
        current = store.get_ref(ref)
        if current == head_id:
            return Pinned(ref, head_id, False)
        if current is not None and not force:
            raise UsageError(f"pin {name} exists (-> {current}); use --force to move it or claw unpin {name}")
        try:
            store.set_ref(ref, head_id, expected=current)
        except RefConflict as exc:
            raise UsageError(f"pin {name} changed meanwhile (-> {exc.actual}); try again") from None
    return Pinned(ref, head_id, True)


def unpin(store: Store, name: str) -> tuple[str, str]:
    """Remove pin NAME: (its ref, what it named)."""
    from clawstore.store.refs import check_ref_name

    ref = check_ref_name(PIN_PREFIX + name)
    target = store.get_ref(ref)
    if target is None or not store.delete_ref(ref):
        raise UsageError(f"no pin named {name} (see claw refs)")
    return ref, target


def delete_refs(store: Store, names: tuple[str, ...]) -> dict[str, str]:
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
    _retire_killed(store, [name.removeprefix("campaigns/") for name in targets if name.startswith("campaigns/")])
    return targets


def _retire_killed(store: Store, campaign_ids: list[str]) -> None:
    """A retired campaign's killed builds are told of (spend/killed.py `tell`), and its `collected/` ref goes: gc keeps
    what a killed build or a batch collect recorded until a later build of its campaign has adopted it
    (store/buildlogs.py unadopted_records, builder/batch_collect.py keep_collected), and no build of a retired one is
    coming."""
    from clawstore.builder.batch_collect import collected_ref
    from clawstore.spend.killed import killed_builds, tell

    for campaign_id in campaign_ids:
        tell(store, killed_builds(store, campaign_id), "refs --delete")
        store.delete_ref(collected_ref(campaign_id))  # (what collects recorded for it, kept for its next build)


def export(store: Store, campaign: Campaign, output: Path,
           beyond_head: Callable[[Mapping[str, str]], Mapping[str, str]] | None = None) -> ArchiveSummary:
    """Write the campaign's configs, head, records, inputs and outputs into one file (with `beyond_head`: and the
    results a build here would reuse that the head does not name; builder/campaign_archive.py export_campaign)."""
    from clawstore.builder.campaign_archive import export_campaign

    require_built(store, campaign.campaign_id)
    problem = output_problem("-o", output)
    if problem is not None:
        raise UsageError(problem)
    refuse_read_only(Path(store.root), "archive export stores the workspace's configs in it before it writes them out "
                                       "(export from a writable copy of the store)")
    return export_campaign(store, campaign, output, beyond_head)


@dataclass
class Imported:
    store: Store
    report: ImportReport
    configs: str | None  # the tree of the archive's configs, when it has them (written out already with configs_to)


def import_archive(file: Path, store_dir: Path | None, configs_to: Path | None, pins: tuple[str, ...],
                   untrusted: bool) -> Imported:
    """Verify an archive completely, then add its objects, action-cache entries and campaign ref to the
    store (with `configs_to`: by default DIR/store, and the configs written into DIR under the import's lease)."""
    from clawstore.builder.campaign_archive import (
        adopt_imported_head,
        beyond_head_records,
        campaign_archive_check,
        configs_of,
    )
    from clawstore.store.core.names import check_name
    from clawstore.store.kept import keep_imported
    from clawstore.store.services.archive_import import import_into, import_target_problem

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
    claim = _claim_configs_target(configs_to) if configs_to is not None else None
    configs_written: list[Path] = []

    def then(store: Store, report: ImportReport) -> None:
        """Under the import's lease: what the archive carries beyond its head kept by a ref `imports/archive-<id>`
        (no head names it here until a build adopts it: before session 77 only gc's grace period kept it), its head
        given a build log, its configs written out (nothing names the config tree, and the head only while the
        store's campaign ref or a --pin does: a gc after the lease deleted them). Run again when a new store another
        import put in place first took the place of the one this import built (import_into): the configs, written
        already, are not written twice."""
        head = report.summary.manifest.head
        if report.kept_apart is None:
            report.kept_by = keep_imported(store, "archive", beyond_head_records(store, report.summary.manifest))
        if report.kept_apart is None and head is not None:
            adopt_imported_head(store, head)
        tree = configs_of(report.summary.manifest)
        if claim is not None and tree is not None and not configs_written:
            write_configs(store, tree, claim)
            configs_written.append(claim.directory)

    try:
        store, report = import_into(target, file, pins=pin_refs, untrusted=untrusted,
                                    check=campaign_archive_check(f"archive {file}", configs_to is not None), then=then)
    finally:
        if claim is not None:
            claim.release(written=bool(configs_written))
    return Imported(store, report, configs_of(report.summary.manifest))


def _check_configs_target(directory: Path, mine: str | None = None) -> None:
    """--configs-to DIR: absent, empty, or a fresh workspace that holds only its store/ (and `mine`, this import's
    scratch directory there, once it has claimed DIR)."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise UsageError(f"--configs-to {directory}: not a directory")
    extra = sorted(p.name for p in directory.iterdir() if p.name not in ("store", mine) and not _dead_import_scratch(p))
    others = [name for name in extra if _import_scratch_owner(name) is not None]
    if others:
        pid = _import_scratch_owner(others[0])[0]  # type: ignore[index]
        raise UsageError(f"--configs-to {directory}: another `claw archive import` (pid {pid}) is importing into it; "
                         "use an empty directory or a fresh workspace of your own")
    if extra:
        raise UsageError(f"--configs-to {directory}: not empty (holds {', '.join(extra[:3])}"
                         f"{', …' if len(extra) > 3 else ''}); use an empty directory or a fresh workspace")


CONFIGS_SCRATCH = ".claw-configs-"  # then a temp name naming the import's process (host/durable.py temp_name)
STORE_STAGING = ".importing-"  # a new store an import builds beside its place: `.store.importing-<temp name>`


def _import_scratch_owner(name: str) -> tuple[int, int] | None:
    """The process whose import made this entry of DIR (its configs scratch, or the new store it is building when DIR
    was absent), or None if no import's."""
    from clawstore.host.durable import temp_owner

    if name.startswith(CONFIGS_SCRATCH):
        return temp_owner(name[len(CONFIGS_SCRATCH):])
    if name.startswith(".") and STORE_STAGING in name:
        return temp_owner(name.split(STORE_STAGING, 1)[1])
    return None


def _dead_import_scratch(path: Path) -> bool:
    """Is `path` what an import into its DIR made whose process is gone (SIGKILLed while it checked the configs out)?
    Such a directory is the import's own: the next import removes it (before session 74, DIR was refused as "not
    empty" until it was removed by hand)."""
    from clawstore.host.durable import process_alive

    owner = _import_scratch_owner(path.name)
    return owner is not None and not process_alive(*owner) and path.is_dir() and not path.is_symlink()


@dataclass
class _Claim:
    """DIR taken by this import: its scratch directory in it, and the directories it made (DIR, missing parents)."""

    directory: Path
    staging: Path
    made: list[Path]

    def release(self, written: bool) -> None:
        """The scratch directory removed, and what this import made, unless it wrote its configs there."""
        import shutil

        shutil.rmtree(self.staging, ignore_errors=True)
        for made in () if written else self.made:
            try:
                made.rmdir()
            except OSError:  # (not empty: the store an import placed there)
                break


def _claim_configs_target(directory: Path) -> _Claim:
    """Take DIR before anything is imported: make this import's scratch directory in it, then check DIR again. Two
    imports that passed their first check at once each see the other's live scratch and both refuse (exit 2, nothing
    written). Before session 78 both went on and imported their archives, and the later one's configs could not move
    into place: exit 3, a store changed and no workspace."""
    import shutil

    from clawstore.host.durable import temp_name

    made = [p for p in (directory.absolute(), *directory.absolute().parents) if not p.exists()]
    directory.mkdir(parents=True, exist_ok=True)
    for leftover in directory.iterdir():
        if _dead_import_scratch(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    claim = _Claim(directory, directory / f"{CONFIGS_SCRATCH}{temp_name('')}", made)
    claim.staging.mkdir(mode=0o700)
    try:
        _check_configs_target(directory, mine=claim.staging.name)
    except BaseException:
        claim.release(written=False)
        raise
    return claim


def write_configs(store: Store, tree: str, claim: _Claim) -> None:
    """Check the config tree out in this import's scratch directory in DIR, then move its configs/ into DIR in one
    step."""
    store.checkout(tree, claim.staging / "workspace")
    try:
        os.rename(claim.staging / "workspace" / "configs", claim.directory / "configs")
    except OSError as exc:  # (DIR/configs made meanwhile by hand: the claim keeps other imports out)
        raise UsageError(f"--configs-to {claim.directory}: {claim.directory / 'configs'} appeared while this import "
                         f"ran ({exc.strerror}); its configs were not written") from None
