"""Importing a campaign archive (archive.py) into a store, and whom its signature must name.

Import stages new objects in the store's tmp/, makes them visible only once the whole archive
verified (and the caller's checks of what it holds passed), and then writes action-cache entries and
refs (pointers after what they point at). What a key the user does not trust signed is refused, or
with --untrusted kept apart (apart.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import StoreError, UsageError, one_line
from clawstore.host.durable import fsync_path, process_alive, temp_name, temp_owner
from clawstore.store.actions import (
    MISSING_INPUT,
    entry_problem,
    get_action_record_id,
    key_digest,
    record_outputs,
    set_entries,
    takes_over,
)
from clawstore.store.core import codec
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.layout import FORMAT_FILE
from clawstore.store.documents import ArchiveManifest
from clawstore.store.refs import RefConflict, check_ref_name
from clawstore.store.services.archive import ArchiveError, ArchiveSummary, read_manifest, scan_archive
from clawstore.store.services.archive_listing import ActionEntries
from clawstore.store.services.archive_verify import WHOLE_MAX, FrameSource, Kept, PackStage, Stage
from clawstore.values import jsontext

if TYPE_CHECKING:
    from clawstore.store.store import Store

CONTENT_READ_MAX = 256 << 20  # objects a caller's check reads whole (heads, config trees)
ENTRY_READ_MAX = 64 << 20  # records are small JSON: a bigger one is refused


@dataclass
class ImportReport:
    summary: ArchiveSummary
    new_objects: int = 0
    present_objects: int = 0
    new_bytes: int = 0
    actions_written: int = 0
    actions_kept: int = 0  # the store already had an entry for the key (its own is kept)
    refs_set: list[str] = field(default_factory=list)
    refs_unchanged: list[str] = field(default_factory=list)
    refs_kept: dict[str, str] = field(default_factory=dict)  # name -> the store's other target
    signer: str | None = None  # the key whose signature verified (None: unsigned)
    kept_apart: str | None = None  # with untrusted=True and an untrusted signer: the ref holding it apart
    actions_kept_apart: int = 0  # the entries held apart under `kept_apart` (none written then)
    kept_by: str | None = None  # ref `imports/archive-<id>`: keeps what it carries beyond its head (project/keeping.py)


# ---------------------------------------------------------------------------------------------- import

ContentCheck = Callable[[ArchiveManifest, "ArchiveContents"], None]


class ArchiveContents:
    """Read access, during an import, to the objects of a verified archive before any is published:
    those it stages and those the store already has. For the caller's checks (`check=`)."""

    def __init__(self, store: Store, staged: Mapping[str, Path | FrameSource], listed: Container[str],
                 kept: dict[str, bytes] | None = None):
        self._store, self._staged, self._listed = store, staged, listed
        self._kept = kept or {}  # contents already decoded and verified while the archive was read

    def in_archive(self, oid: str) -> bool:
        return oid.startswith(PREFIX) and oid[len(PREFIX):] in self._listed  # (listed: well-formed ids only)

    def has(self, oid: str) -> bool:
        """In the archive, or already in the store."""
        return self.in_archive(oid) or (is_oid(oid) and self._store.has(oid))

    def read(self, oid: str, limit: int = CONTENT_READ_MAX) -> bytes:
        """An object's content (verified), refused above `limit` bytes."""
        hexdigest = oid[len(PREFIX):]
        known = self._kept.get(hexdigest)
        if known is not None and len(known) <= limit:
            return known
        staged = self._staged.get(hexdigest)
        where = f"store {self._store.root}" if staged is None else str(
            staged if isinstance(staged, Path) else staged.path)
        try:
            if isinstance(staged, Path):
                frame = staged.read_bytes()
            else:
                frame = staged.read(hexdigest) if staged is not None else self._store.read_frame(oid)
        except OSError as exc:
            raise StoreError(f"cannot read {where}: {exc.strerror}") from None
        declared = codec.content_size(frame[:codec.MAX_HEADER])
        if declared is None or declared > limit:
            raise ArchiveError(f"object {oid} is too large to be read here ({declared} bytes, at most {limit})")
        return codec.decode_verified(oid, hexdigest, where, frame)

    def content_size(self, oid: str, most: int) -> tuple[int, bool]:
        """An object's content size and whether that is exact: the size its frame declares (checked against its
        content as the archive was read: zstd refuses a frame whose content is not the size it declares), else its
        content counted no further than `most` + 1 bytes (a few KB of zstd can hold GBs). Only the frame's header is
        read for the first, never the whole frame."""
        import io

        hexdigest = oid[len(PREFIX):]
        known = self._kept.get(hexdigest)
        if known is not None:
            return len(known), True
        staged = self._staged.get(hexdigest)
        try:
            if staged is None:
                reader = self._store.open_object(oid)
            elif isinstance(staged, Path):
                reader = codec.ObjectReader(oid, hexdigest, str(staged))
            else:
                reader = codec.ObjectReader(oid, hexdigest, str(staged.path), io.BytesIO(staged.read(hexdigest)))
        except OSError as exc:
            raise StoreError(f"cannot read {staged if isinstance(staged, Path) else self._store.root}: "
                             f"{exc.strerror}") from None
        with reader:
            if reader.size is not None:
                return reader.size, True
            counted = 0
            while counted <= most and (piece := reader.read(min(codec.CHUNK, most + 1 - counted))):
                counted += len(piece)
        return counted, counted <= most

    def read_record(self, record_id: str) -> bytes:
        """A record's content (verified), refused above the size of any record."""
        return self.read(record_id, ENTRY_READ_MAX)

    def takes_over(self, current: str, incoming: str) -> bool:
        """Does the record `incoming` take the place of `current` for a key (actions.takes_over)?"""
        return takes_over(self.read_record, current, incoming)

    def entry_problem(self, key: str, record_id: str) -> str | None:
        """Why the entry `key -> record_id` does not verify (actions.entry_problem), None if it does."""
        try:
            record = jsontext.loads(self.read_record(record_id))
        except ValueError:
            record = None
        return entry_problem(key, record, self.has)

    def outputs_at_hand(self, record_id: str) -> bool:
        """Is every output the record names arriving or here (False if it names them wrongly)?"""
        try:
            outputs = record_outputs(jsontext.loads(self.read_record(record_id)))
        except ValueError:
            return False
        return outputs is not None and all(map(self.has, outputs))


class ArrivingPacks(ArchiveContents):
    """ArchiveContents of a pull's packs, whose `listed` holds whole ids (PREFIX + hex): asking about an id a listing
    names (a string whose hash Python keeps) is one set lookup, not a slice and a new string's hash each (a third of
    the entry checks' time)."""

    def __init__(self, store: Store, staged: Mapping[str, Path | FrameSource], listed: set[str],
                 kept: dict[str, bytes] | None = None, vetted: Mapping[tuple[str, str], str | None] | None = None):
        super().__init__(store, staged, listed, kept)
        self._vetted = vetted or {}  # (key, record) -> actions.record_problem, asked as the record arrived

    def in_archive(self, oid: str) -> bool:
        return oid in self._listed

    def has(self, oid: str) -> bool:
        return oid in self._listed or (is_oid(oid) and self._store.has(oid))

    def entry_problem(self, key: str, record_id: str) -> str | None:
        """As ArchiveContents', the record not read again if it was vetted as it arrived (its content is its id's)."""
        why = self._vetted.get((key, record_id), _UNVETTED)
        if why is _UNVETTED:
            return super().entry_problem(key, record_id)
        return MISSING_INPUT if why is None and not self.has(key) else why  # type: ignore[return-value]


_UNVETTED = object()


Trusts = Callable[[str | None], bool]


def user_trusts(signer: str | None) -> bool:
    """The default policy: signed by the user's own key or one in their trust list."""
    from clawstore.trust import keys

    return signer is not None and signer in keys.trusted()


def import_archive(store: Store, path: Path, pins: Iterable[str] = (), check: ContentCheck | None = None,
                   untrusted: bool = False, trusts: Trusts = user_trusts,
                   then: Callable[[Store, ImportReport], None] | None = None) -> ImportReport:
    """Verify the whole archive, then publish its objects, entries and refs; nothing becomes visible unless every byte
    and `check(manifest, contents)` passed, and importing twice changes nothing. `pins`: extra refs to the archive's
    head; `untrusted`: keep unsigned content apart; `then`: what reads the published archive from the store next (the
    head given a build log, the configs checked out), under the import's lease: no ref names the config tree, and
    before session 77 a `claw gc` once the import had published deleted it before `--configs-to` wrote it out
    (tests/gc/test_writers_beside_gc.py). Details: docs/gc-and-archives.md (Details by module)."""
    path = Path(path)
    staged: dict[str, Path] = {}  # large frames, each in a file of its own (small ones: in `shared`, by place)
    present = 0
    shared = PackStage(store.runtime.own_pack)

    def on_object(hexdigest: str, size: int) -> Stage | None:
        """Where to stage this object's frame (small ones: one pack), None if the store has it."""
        nonlocal present
        if store.has_fresh(bytes.fromhex(hexdigest)):  # present: its pack's mtime is refreshed for gc
            present += 1
            return None
        if size <= WHOLE_MAX:
            return shared
        staged[hexdigest] = store.tmp_dir / temp_name()
        return staged[hexdigest]

    with store.lease("archive-import " + path.name):
        try:
            kept = Kept()
            summary = scan_archive(path, on_object, kept, signature=True, on_manifest=shared.attach)
            report = ImportReport(summary, present_objects=present)
            pin_refs = _pin_refs(summary.manifest, pins)
            contents = ArchiveContents(store, _Staged(staged, shared), summary.manifest.objects, kept.contents)
            _check_entries(summary.manifest.actions, contents, str(path))
            if check is not None:
                check(summary.manifest, contents)
            report.signer = _signer(summary.manifest, str(path))
            trusted = trusts(report.signer)
            if not trusted and not untrusted:
                raise ArchiveError(f"{path}: {untrusted_why(report.signer)}")
            _publish(store, staged, shared, report)
        finally:
            _unstage(staged, shared)
        refs = {**summary.manifest.refs, **pin_refs}
        if trusted:
            write_actions(store, summary.manifest.actions, report)
            write_refs(store, refs, report)
        else:
            actions = dict(summary.manifest.actions.items())
            report.kept_apart = store.keep_apart(report.signer, actions, refs, report.summary.digest)
            report.actions_kept_apart = len(actions)
        if then is not None:
            then(store, report)
    return report


def archive_signer(path: Path) -> str | None:
    """The key whose signature the archive's manifest carries (None: unsigned), reading only the
    manifest; ArchiveError if the signature is forged or damaged. Import verifies everything again."""
    return _signer(read_manifest(path, signature=True), f"archive {path}")


def _signer(manifest: ArchiveManifest, where: str) -> str | None:
    """The key whose signature the manifest carries (checked as it was read, over its bytes); ArchiveError if it does
    not verify."""
    verdict = manifest.signature
    if verdict is None:
        raise ValueError("the manifest was read without checking its signature")
    if verdict.problem is not None:
        raise ArchiveError(f"{where}: {verdict.problem}")
    return verdict.signer


class _Staged(Mapping[str, "Path | FrameSource"]):
    """Where an import staged each new object: large ones in files of their own, small ones in its pack."""

    def __init__(self, files: dict[str, Path], shared: PackStage):
        self._files, self._shared = files, shared

    def get(self, hexdigest: str, default: Path | FrameSource | None = None) -> Path | FrameSource | None:
        found = self._files.get(hexdigest)
        if found is not None:
            return found
        return self._shared if self._shared.holds(hexdigest) else default

    def __getitem__(self, hexdigest: str) -> Path | FrameSource:
        found = self.get(hexdigest)
        if found is None:
            raise KeyError(hexdigest)
        return found

    def __iter__(self) -> Iterator[str]:
        raise TypeError("the staged objects are not listed one by one")

    def __len__(self) -> int:
        raise TypeError("the staged objects are not counted")


def untrusted_why(signer: str | None, verb: str = "import") -> str:
    """Why content is refused, and the two ways on (`verb`: the command that brought it: import, pull)."""
    if signer is None:
        return f"not signed (made before claw signed archives, or its signature was removed); {verb} it " \
               "with --untrusted to keep it apart"
    return f"signed by {signer}, a key you do not trust (claw trust add {signer}, or {verb} with --untrusted " \
           "to keep it apart)"


def _in_key_order(actions: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    """An archive's entries come in key order (packed); others are sorted."""
    return actions.items() if isinstance(actions, ActionEntries) else sorted(actions.items())


def _check_entries(actions: Mapping[str, str], contents: ArchiveContents, where: str) -> None:
    """Every action-cache entry the archive brings must verify against its input document (each entry,
    whether or not the store has one for that key: a refused archive is refused whole)."""
    for key, record_id in _in_key_order(actions):
        why = contents.entry_problem(key, record_id)
        if why is not None:
            raise ArchiveError(f"{where}: action-cache entry {one_line(str(key), 80)}: {why}")


def _pin_refs(manifest: ArchiveManifest, pins: Iterable[str]) -> dict[str, str]:
    head = manifest.head
    wanted = {check_ref_name(name): head for name in pins}
    if wanted and head is None:  # (a head the manifest names is an object of the archive: read_archive_manifest)
        raise ArchiveError("the archive has no head object to pin")
    return wanted  # type: ignore[return-value]


PUBLISH_EACH = 1 << 16  # objects (or entries) one commit names: its pending index entries, ~250 bytes each, bounded


def _publish(store: Store, staged: dict[str, Path], shared: PackStage, report: ImportReport) -> None:
    """Index every staged object: the small ones where they were staged (the import's own pack, sealed first), the
    large ones appended from their staging files; PUBLISH_EACH objects a commit (a commit holds each pending, and its
    segment is read in place once written). An import killed between two leaves objects named and no entry or ref
    naming them yet: gc's after its grace, or the next import's (nothing the archive refs is visible before all is)."""
    writer = shared.seal()
    if writer is None and not staged:
        return
    blobs = shared.staged()
    while chunk := list(islice(blobs, PUBLISH_EACH)):
        assert writer is not None  # a frame was staged there, so the pack exists
        adopted = 0
        with store.batch():
            for blob in chunk:
                added = store.adopt_blob(blob.id, blob, writer)
                adopted += added
                if added:  # another writer may have it now
                    report.new_bytes += blob.length
                    report.new_objects += 1
        if adopted:
            shared.published = True  # an index names the pack now: it stays (else nothing names it: it goes)
        del chunk
    with store.batch():
        for hexdigest, path in sorted(staged.items()):
            size, added = path.stat().st_size, store.put_frame_file(bytes.fromhex(hexdigest), path)
            if added:
                report.new_bytes += size
                report.new_objects += 1


def _unstage(staged: dict[str, Path], shared: PackStage) -> None:
    """Remove the staging files of large frames; the pack of small ones too unless it was published."""
    if not shared.published:
        shared.discard()
    for stage in staged.values():
        with contextlib.suppress(FileNotFoundError):
            stage.unlink()
    staged.clear()


def write_actions(store: Store, actions: Mapping[str, str], report: ImportReport) -> None:
    """Entries the store lacks point at the archive's records; the store's own entries are kept, unless
    one is a failure a build would run again and the archive's record a result (actions.takes_over)."""
    now = time.time_ns()
    entries: dict[bytes, tuple[bytes | None, int]] = {}
    store.runtime.index.refresh()
    for key, record in _in_key_order(actions):
        current = get_action_record_id(store, key, look_again=False)  # index/ listed once, not per key
        if current is not None and not takes_over(store.get_bytes, current, record):
            report.actions_kept += current != record
            continue
        entries[key_digest(key)] = (bytes.fromhex(record[len(PREFIX):]), now)
        report.actions_written += 1
        if len(entries) >= PUBLISH_EACH:  # (a commit's pending entries bounded, as _publish's objects)
            set_entries(store, entries)
            entries = {}
    set_entries(store, entries)


def write_refs(store: Store, refs: dict[str, str], report: ImportReport) -> None:
    """Create refs the store lacks; a ref that already points elsewhere is left alone (and reported)."""
    for name, target in sorted(refs.items()):
        current = store.get_ref(name)
        if current == target:
            report.refs_unchanged.append(name)
            continue
        if current is not None:
            report.refs_kept[name] = current
            continue
        try:
            store.set_ref(name, target, expected=None)
            report.refs_set.append(name)
        except RefConflict as exc:  # created concurrently
            if exc.actual == target:
                report.refs_unchanged.append(name)
            else:
                report.refs_kept[name] = str(exc.actual)


# ---------------------------------------------------------------------------------------------- target stores

def import_target_problem(store_dir: Path) -> str | None:
    """Why an import may not write into `store_dir` (None if it may): it must be a store, or an empty
    or absent directory. Any other folder is someone's data, never turned into a store."""
    if (store_dir / FORMAT_FILE).is_file():
        return None
    if not store_dir.exists() and not store_dir.is_symlink():
        # (below a file, the store's directory could not be made: said before the archive is read)
        above = next((p for p in store_dir.absolute().parents if p.exists() or p.is_symlink()), None)
        return None if above is None or above.is_dir() else f"{above} is not a directory"
    if not store_dir.is_dir():
        return "exists and is not a directory"
    if any(store_dir.iterdir()):
        return "is not a claw store and not empty (refusing to turn it into one)"
    return None


def import_into(store_dir: Path, path: Path, pins: Iterable[str] = (), check: ContentCheck | None = None,
                untrusted: bool = False, then: Callable[[Store, ImportReport], None] | None = None
                ) -> tuple[Store, ImportReport]:
    """Import into the store at `store_dir`, or into a new store there when it is empty or absent (`then`: as
    import_archive's, in the store the import ends in).

    A new store is built whole in a hidden sibling directory and renamed into place once the import
    succeeded: a refused archive leaves nothing behind, not even an empty store (`then` runs there, before the
    rename: no gc knows that directory)."""
    from clawstore.store.store import Store

    problem = import_target_problem(store_dir)
    if problem is not None:
        raise UsageError(f"--store {store_dir}: {problem}")
    if (store_dir / FORMAT_FILE).is_file():
        store = Store(store_dir, create=False)
        return store, import_archive(store, path, pins, check, untrusted, then=then)
    anchor = store_dir.absolute().parent
    while not anchor.is_dir():
        anchor = anchor.parent
    prefix = f".{store_dir.name or 'store'}.importing-"
    _remove_dead_stagings(anchor, prefix)
    staging = anchor / f"{prefix}{temp_name('')}"
    try:
        with Store(staging) as staged:  # closed (its pack sealed, its files let go): the directory is about to move
            report = import_archive(staged, path, pins, check, untrusted, then=then)
        store_dir.absolute().parent.mkdir(parents=True, exist_ok=True)
        placed = _take_place(staging, store_dir)
        if placed:
            fsync_path(store_dir.absolute().parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not placed:  # another import made the store there meanwhile (it said "st: Directory not empty", exit 3)
        shutil.rmtree(staging, ignore_errors=True)
        # Into that store (or the folder's problem said), `then` again: what it wrote into the staged store went with
        # it (project/keeping.py: the ref keeping what the archive carries beyond its head, the head's build log).
        # Before session 77 it ran only there, and another archive's import had taken the place: nothing kept those
        # records, and a build after a `claw gc` paid for them again (tests/gc/test_archive_elsewhere.py). A `then`
        # writing outside the store (configs checked out) writes that once.
        return import_into(store_dir, path, pins, check, untrusted, then)
    return Store(store_dir, create=False), report


def _remove_dead_stagings(anchor: Path, prefix: str) -> None:
    """Remove the new stores earlier imports into this place were building when they were killed (`prefix` then a
    temp name naming their process, now gone): whole stores no one will use, which nothing else would remove. A live
    import's is left alone."""
    try:
        names = [name for name in os.listdir(anchor) if name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        owner = temp_owner(name[len(prefix):])
        path = anchor / name
        if owner is None or process_alive(*owner) or path.is_symlink() or not path.is_dir():
            continue
        shutil.rmtree(path, ignore_errors=True)


def _take_place(staging: Path, store_dir: Path) -> bool:
    """Rename the staged store to `store_dir` (empty or absent when checked); False when it has been filled since."""
    try:
        if store_dir.is_dir():
            with contextlib.suppress(FileNotFoundError):  # (another import removed it first, to put its store there)
                store_dir.rmdir()
        os.rename(staging, store_dir)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    return True
