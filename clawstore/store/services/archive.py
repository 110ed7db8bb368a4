"""Campaign archives: one file holding objects, action-cache entries and refs, verifiable end to end; writing and
reading them (importing: archive_import.py). Layout: docs/gc-and-archives.md (Archives; Details by module)."""

from __future__ import annotations

import mmap
import os
import tempfile
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3
import msgspec

from clawstore.errors import MissingObjectError, UsageError, one_line, quoted
from clawstore.host.durable import atomic_file, naming
from clawstore.store.core.ids import PREFIX, is_hex64, is_oid
from clawstore.store.core.index import Loc
from clawstore.store.core.leftovers import remove_stale_temp_files
from clawstore.store.core.names import name_problem, ref_name_problem
from clawstore.store.core.packmaps import PackMaps
from clawstore.store.documents import ARCHIVE_FORMAT, ARCHIVE_VERSION, ArchiveManifest, SignatureCheck
from clawstore.store.services.archive_listing import (
    NO_ENTRIES,
    ActionEntries,
    ObjectListing,
    SortedDigests,
    scan_actions,
    scan_objects,
)
from clawstore.store.services.archive_tar import TRAILER, Reader, TarFormatError, header, padding
from clawstore.store.services.archive_verify import WHOLE_MAX, Kept, ObjectCheckError, Stage, Verifier
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json

if TYPE_CHECKING:
    from clawstore.store.store import Store

FORMAT = ARCHIVE_FORMAT
VERSION = ARCHIVE_VERSION
MANIFEST = "clawarchive.json"
SEAL = "clawarchive.seal"
OBJECTS = "objects/"
_CHUNK = 1 << 20
_MANIFEST_MAX = 1 << 30  # a manifest is read into memory: refuse absurd sizes before allocating


class ArchiveError(UsageError):
    """The archive is unreadable, truncated, tampered with or not ours (exit 2: bad input)."""


@dataclass
class ArchiveSummary:
    path: Path
    digest: str  # blake3 of the whole file
    size: int
    manifest: ArchiveManifest
    objects: int
    stored_bytes: int


# ---------------------------------------------------------------------------------------------- writing

class _HashingWriter:
    """Writes and hashes in pieces of about 1 MiB: an archive of small objects is many small writes."""

    FLUSH_AT = 1 << 20

    def __init__(self, out: BinaryIO):
        self.out = out
        self.hasher = blake3.blake3()
        self.size = 0
        self._buffer = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        self._buffer += data
        self.size += len(data)
        if len(self._buffer) >= self.FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        self.out.write(self._buffer)
        self.hasher.update(self._buffer)
        self._buffer.clear()

    def hexdigest(self) -> str:
        self.flush()
        return self.hasher.hexdigest()


def write_archive(store: Store, out: Path, manifest: dict[str, Any],
                  object_ids: Iterable[str] | bytes) -> ArchiveSummary:
    """Write `manifest` (refs, actions, caller fields) and the objects into `out`, atomically.

    Streams: each object's frame is copied in chunks, never held whole in memory. What is held per object is its
    digest (32 bytes, in one sorted array) and where it is (a pack number, an offset and a length: 24 bytes, in
    arrays); the manifest's canonical JSON is written a few thousand objects at a time to an unnamed temporary file
    in the store's tmp/, signed from there (mapped) and copied into the archive in pieces: the same bytes as
    encoding the whole document at once (`canonical_json`), never held as Python objects. `object_ids`: ids or hex
    digests, or bytes of 32-byte digests one after the other (an export's: head_closure's `packed`), in any order,
    repeats ignored.
    The summary's manifest holds every field but the object listing (`objects` empty).
    """
    digests = _sorted_digests(object_ids)
    count = len(digests) // 32
    sizes = array("q")
    pack_numbers = array("l")
    offsets = array("q")
    packs: dict[str, int] = {}
    for at in range(0, len(digests), 32):
        hexdigest = digests[at:at + 32].hex()
        try:
            pack, offset, length = store.locate(PREFIX + hexdigest)
        except MissingObjectError:
            raise ArchiveError(f"cannot export: object {PREFIX}{hexdigest} is not in the store "
                               f"{store.root} (run claw fsck)") from None
        pack_numbers.append(packs.setdefault(pack, len(packs)))
        offsets.append(offset)
        sizes.append(length)
    pack_names = list(packs)
    fields = {k: v for k, v in manifest.items() if k not in ("objects", signature_field())}
    fields.update(format=FORMAT, version=VERSION)
    _check_manifest_fields(fields, SortedDigests(digests), "export")
    from clawstore.trust import signature  # (cryptography is loaded only where archives are written)

    remove_stale_temp_files(store)  # (a killed export's temp file beside its output, among others)
    store.tmp_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=store.tmp_dir) as message:  # (unnamed: nothing left if this process is killed)
        with naming(store.tmp_dir):
            message.write(signature.MESSAGE_PREFIX)
            cut = _write_manifest_json(message, fields, digests, sizes)  # where the signature goes
            message.flush()
        with mmap.mmap(message.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            sig = signature.signature_over(mapped)
        start = len(signature.MESSAGE_PREFIX)
        field = canonical_json(signature.FIELD) + b":" + canonical_json(sig)
        end = message.seek(0, os.SEEK_END)
        inserted = field + b"," if cut < end - 1 else b"," + field  # (before the next key, or last before the `}`)
        with naming(out), atomic_file(out, registry=store.tmp_dir) as fh:  # (found by gc and fsck if killed)
            writer = _HashingWriter(fh)
            body_size = end - start + len(inserted)
            writer.write(header(MANIFEST, body_size))
            _copy_range(message, start, cut, writer)
            writer.write(inserted)
            _copy_range(message, cut, end, writer)
            writer.write(padding(body_size))
            maps = PackMaps(store)
            try:
                for index in range(count):
                    loc = (pack_names[pack_numbers[index]], offsets[index], sizes[index])
                    _copy_object(store, maps, writer, digests[index * 32:index * 32 + 32].hex(), sizes[index], loc)
            finally:
                maps.close()
            seal = f"{PREFIX}{writer.hexdigest()}\n".encode()
            _write_member(writer, SEAL, seal)
            writer.write(TRAILER)
            writer.flush()
    fields[signature.FIELD] = sig
    summary_manifest = ArchiveManifest(objects=ObjectListing(b"", array("Q")), refs=fields.get("refs", {}),
                                       actions=fields.get("actions", {}),
                                       signed={k: v for k, v in fields.items() if k != "actions"},
                                       head=fields.get("head"), build_id=fields.get("build_id"),
                                       campaign=fields.get("campaign") or {}, configs=fields.get("configs"),
                                       version=VERSION)
    return ArchiveSummary(out, PREFIX + writer.hexdigest(), writer.size, summary_manifest, count, sum(sizes))


def signature_field() -> str:
    from clawstore.trust.signature import FIELD

    return FIELD


_LISTED = 4096  # objects (or action-cache entries) encoded at once into the manifest's JSON


def _sorted_digests(object_ids: Iterable[str] | bytes) -> bytes:
    """The distinct digests of `object_ids` (ids or hex digests, or 32-byte digests packed), sorted, as one bytes of
    32 bytes each."""
    packed: bytes | bytearray
    if isinstance(object_ids, bytes):
        packed = object_ids
    else:
        packed = bytearray()
        for oid in object_ids:
            packed += bytes.fromhex(oid[len(PREFIX):] if oid.startswith(PREFIX) else oid)
    if not packed:
        return b""
    import numpy as np  # (loaded only where archives are written: verify and import do without its ~40 MB)

    return np.unique(np.frombuffer(packed, dtype="V32")).tobytes()


def _write_manifest_json(out: BinaryIO, fields: dict[str, Any], digests: bytes, sizes: array) -> int:
    """Write the canonical JSON of `fields` with `objects` (the sorted digests with their sizes) and without a
    signature, in pieces; the big values (`objects`, `actions`) a few thousand entries at a time. Returns the file
    offset at which the `signature` field belongs (at its key's place in sorted order)."""
    from clawstore.trust.signature import FIELD

    names = sorted({*fields, "objects"})
    cut = -1
    out.write(b"{")
    for number, name in enumerate(names):
        if number:
            out.write(b",")
        if cut < 0 and name > FIELD:
            cut = out.tell()
        out.write(canonical_json(name) + b":")
        if name == "objects":
            out.write(b"[")
            for first in range(0, len(sizes), _LISTED):
                if first:
                    out.write(b",")
                chunk = [[digests[at * 32:at * 32 + 32].hex(), sizes[at]]
                         for at in range(first, min(first + _LISTED, len(sizes)))]
                out.write(canonical_json(chunk)[1:-1])
            out.write(b"]")
        elif name == "actions" and isinstance(fields[name], dict) and fields[name]:
            actions = fields[name]
            keys = sorted(actions)
            out.write(b"{")
            for first in range(0, len(keys), _LISTED):
                if first:
                    out.write(b",")
                out.write(canonical_json({key: actions[key] for key in keys[first:first + _LISTED]})[1:-1])
            out.write(b"}")
        else:
            out.write(canonical_json(fields[name]))
    if cut < 0:
        cut = out.tell()
    out.write(b"}")
    return cut


def _copy_range(source: BinaryIO, start: int, end: int, writer: _HashingWriter) -> None:
    source.seek(start)
    while start < end:
        data = source.read(min(_CHUNK, end - start))
        if not data:
            raise ArchiveError("cannot export: the manifest's temporary file was cut short")
        writer.write(data)
        start += len(data)


def _write_member(writer: _HashingWriter, name: str, data: bytes) -> None:
    writer.write(header(name, len(data)))
    writer.write(data)
    writer.write(padding(len(data)))


def _copy_object(store: Store, maps: PackMaps, writer: _HashingWriter, hexdigest: str, size: int,
                 loc: Loc) -> None:
    """Copy the object's frame from `loc`, located when the export began; if gc has moved it since (its
    pack is gone), it is located again once: a frame's bytes are the same in any pack."""
    writer.write(header(OBJECTS + hexdigest, size))
    copied = 0
    for attempt in range(2):
        try:
            while copied < min(size, loc[2]):
                chunk = maps.read(loc, min(_CHUNK, loc[2] - copied), copied)
                writer.write(chunk)
                copied += len(chunk)
                chunk.release()
            break
        except (FileNotFoundError, MissingObjectError):
            if attempt:
                raise ArchiveError(f"cannot export: object {PREFIX}{hexdigest} vanished from the store during "
                                   "the export") from None
            store.runtime.forget_pack(loc[0])
            store.runtime.index.reload()
            try:
                loc = store.locate(PREFIX + hexdigest)
            except MissingObjectError:
                continue  # reported by the next attempt's read of the old place
    if copied != size:
        raise ArchiveError(f"cannot export: object {PREFIX}{hexdigest} changed size during the export")
    writer.write(padding(size))


# ---------------------------------------------------------------------------------------------- reading

def _check_manifest(doc: Any, where: str) -> None:
    """Structural checks of a manifest (raises ArchiveError naming the field)."""
    if not isinstance(doc, dict):
        raise ArchiveError(f"{where}: the manifest is not a JSON object")
    _check_version(doc, where)
    listing = doc.get("objects")
    if not isinstance(listing, list):
        raise ArchiveError(f"{where}: manifest field 'objects' is not a list")
    previous = ""
    for index, item in enumerate(listing):
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str) or not is_hex64(item[0])
                or not isinstance(item[1], int) or isinstance(item[1], bool) or not 0 <= item[1] < 1 << 64):
            raise ArchiveError(f"{where}: manifest field 'objects[{index}]' is not [<64 hex>, <size>]")
        if item[0] <= previous:
            raise ArchiveError(f"{where}: manifest field 'objects[{index}]' is out of order or repeated")
        previous = item[0]
    _check_manifest_fields(doc, {item[0] for item in listing}, where)


def _check_version(doc: dict[str, Any], where: str) -> None:
    if doc.get("format") != FORMAT:
        raise ArchiveError(f"{where}: not a clawstore archive (format {doc.get('format')!r})")
    if doc.get("version") != VERSION:
        raise ArchiveError(f"{where}: unsupported archive version {doc.get('version')!r} (this claw reads {VERSION})")


def _check_manifest_fields(doc: dict[str, Any], present: Container[str], where: str) -> None:
    """The checks of every field but the object listing; `present`: the listing's hex digests."""
    def bad(field_name: str, why: str) -> ArchiveError:
        return ArchiveError(f"{where}: manifest field '{field_name}' {why}")

    _check_version(doc, where)
    refs = doc.get("refs", {})
    if not isinstance(refs, dict):
        raise bad("refs", "is not an object")
    for name, target in refs.items():
        if (why := ref_name_problem(name)) is not None:
            raise bad(f"refs.{quoted(name)}", f"is not a valid ref name: it {why}")
        if not is_oid(target) or target[len(PREFIX):] not in present:
            raise bad(f"refs.{one_line(str(name), 80)}", "does not name an object of the archive")
    actions = doc.get("actions", {})
    if not isinstance(actions, dict):
        raise bad("actions", "is not an object")
    for key, record in actions.items():
        if not is_oid(key) or not is_oid(record) or record[len(PREFIX):] not in present:
            raise bad(f"actions.{one_line(str(key), 80)}", "is not a key mapped to a record of the archive")
    _check_named_fields(doc, present, bad)


def _check_named_fields(doc: dict[str, Any], present: Container[str], bad: Callable[[str, str], ArchiveError]) -> None:
    """The fields a campaign archive adds: names that become paths or refs, ids of archive objects."""
    if "build_id" in doc and doc["build_id"] is not None and (why := name_problem(doc["build_id"])):
        raise bad("build_id", why)
    campaign = doc.get("campaign")
    if campaign is not None:
        if not isinstance(campaign, dict):
            raise bad("campaign", "is not an object")
        if "id" in campaign and (why := name_problem(campaign["id"])):
            raise bad("campaign.id", why)
    for name, value in (("head", doc.get("head")), ("configs.tree", (doc.get("configs") or {}).get("tree")
                                                     if isinstance(doc.get("configs"), dict) else None)):
        if value is not None and (not is_oid(value) or value[len(PREFIX):] not in present):
            raise bad(name, "does not name an object of the archive")
    if "configs" in doc and not isinstance(doc["configs"], dict):
        raise bad("configs", "is not an object")


def scan_archive(path: Path, on_object: Callable[[str, int], Stage | None] | None,
                 kept: Kept | None = None, signature: bool = False,
                 on_manifest: Callable[[ObjectListing], None] | None = None) -> ArchiveSummary:
    """Read and verify the whole archive. `on_object(hex, size)` may name where to copy the frame (a new file, or
    a pack the import stages in); `on_manifest(listing)` is told the listing first. `signature`: check the
    manifest's signature too (the verdict in `manifest.signature`, for the caller to act on)."""
    where = f"archive {path}"
    try:
        fh = open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - closed below; many small members
    except FileNotFoundError:
        raise ArchiveError(f"{where}: no such file") from None
    except OSError as exc:
        raise ArchiveError(f"{where}: cannot read ({exc.strerror})") from None
    file_hash = blake3.blake3()
    verifier = Verifier(where)
    try:
        with fh:
            reader = Reader(fh, file_hash.update)
            manifest = _read_manifest_member(reader, where, signature)
            listing = manifest.objects
            verifier.limit(listing.stored_bytes)
            if on_manifest is not None:
                on_manifest(listing)
            wanted = bytearray(len(listing))
            if kept is not None:  # records, read next by the entry checks
                wanted = listing.places(_record_digests(manifest.actions))
                verifier.kept = kept
            for index, (hexdigest, size) in enumerate(listing):
                member = reader.next_header()
                expected = OBJECTS + hexdigest
                if member is None or member[0] != expected or member[1] != size:
                    got = "the end of the archive" if member is None else f"{member[0]} ({member[1]} bytes)"
                    raise ArchiveError(f"{where}: member {index + 1} should be {expected} ({size} bytes), "
                                       f"found {got}")
                _read_object(reader, hexdigest, size, on_object, verifier, wanted[index])
            verifier.finish()  # a damaged object is named before the seal says the file changed
            before_seal = file_hash.copy()
            member = reader.next_header()
            if member is None or member[0] != SEAL:
                raise ArchiveError(f"{where}: truncated or damaged (no {SEAL} after the objects)")
            seal_parts: list[bytes] = []
            reader.read_data(member[1], seal_parts.append)
            if b"".join(seal_parts) != f"{PREFIX}{before_seal.hexdigest()}\n".encode():
                raise ArchiveError(f"{where}: damaged (the seal does not match the archive's bytes)")
            if reader.next_header() is not None:
                raise ArchiveError(f"{where}: unexpected member after {SEAL}")
            size = reader.offset
    except TarFormatError as exc:
        raise ArchiveError(f"{where}: {exc}") from None
    except ObjectCheckError as exc:
        raise ArchiveError(str(exc)) from None
    except OSError as exc:
        raise ArchiveError(f"{where}: cannot read ({exc.strerror})") from None
    finally:
        verifier.close()
    return ArchiveSummary(path, PREFIX + file_hash.hexdigest(), size, manifest, len(listing), listing.stored_bytes)


def _record_digests(actions: Mapping[str, str]) -> Iterator[bytes]:
    if isinstance(actions, ActionEntries):
        return actions.record_digests()
    return (bytes.fromhex(record[len(PREFIX):]) for record in actions.values())


def _read_manifest_member(reader: Reader, where: str, signature: bool = False) -> ArchiveManifest:
    """The archive's first member, its manifest, read and checked (`signature`: its signature checked too)."""
    try:
        first = reader.next_header()
    except TarFormatError:
        if reader.start.startswith(MANIFEST.encode() + b"\0"):
            raise  # an archive's beginning, cut or damaged: said so
        first = None  # a text file (or any other) was called "truncated (a member header ends early at byte 25)"
    if first is None or first[0] != MANIFEST:
        why = "the file is empty" if not reader.start else f"it does not begin with its {MANIFEST} member"
        raise ArchiveError(f"{where}: not a clawstore archive ({why})")
    if first[1] > _MANIFEST_MAX:
        raise ArchiveError(f"{where}: manifest too large ({first[1]} bytes)")
    prefix = b""
    if signature:
        from clawstore.trust.signature import MESSAGE_PREFIX as prefix
    # Read into one buffer, with room before it for what a signed message begins with: the signature is checked
    # over these bytes, its field cut out in place (never a second copy, never encoded again).
    buffer = bytearray(len(prefix) + first[1])
    buffer[:len(prefix)] = prefix
    at = len(prefix)

    def fill(piece: bytes) -> None:
        nonlocal at
        buffer[at:at + len(piece)] = piece
        at += len(piece)

    reader.read_data(first[1], fill)
    return _parse_manifest(buffer, len(prefix), where, signature)


def _parse_manifest(buffer: bytearray, start: int, where: str, signature: bool = False) -> ArchiveManifest:
    """The manifest in buffer[start:]. A manifest in its canonical form (every claw writes it so) is read with its
    two big fields scanned into arrays (`_parse_canonical`); anything else is parsed whole as before, which accepts
    what it accepted and refuses what it refused, in the same words."""
    manifest = _parse_canonical(buffer, start, signature)
    if manifest is not None:
        return manifest
    body = bytes(memoryview(buffer)[start:])
    try:
        doc = jsontext.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise ArchiveError(f"{where}: damaged manifest (not JSON)") from None
    manifest = read_archive_manifest(doc, where, signature)
    if canonical_json(doc) != body:
        raise ArchiveError(f"{where}: damaged manifest (not in canonical form)")
    return manifest


_TOP_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])  # each value left as its bytes (a view, not a copy)


def _parse_canonical(buffer: bytearray, start: int, signature: bool) -> ArchiveManifest | None:
    """The manifest in buffer[start:] if it is in canonical form and passes every check; None for anything else (the
    caller's whole parse then says what is wrong, as it always did). Canonical form is proven piece by piece: the
    top-level keys sorted, each written as canonical JSON writes it and followed by its value with no space, the
    listing and the entries scanned by patterns that accept only their canonical spelling (archive_listing), every
    other value parsed and encoded again to its very bytes. With `signature`, buffer[:start] holds what a signed
    message begins with and the signature's field is then cut out of the buffer in place to check it."""
    places = _top_fields(buffer, start)
    if places is None:
        return None
    fields: dict[str, Any] = {}
    listing: ObjectListing | None = None
    entries = NO_ENTRIES
    for name, (_, first, end) in places.items():
        if name == "objects":
            listing = scan_objects(buffer, first, end)
            if listing is None:
                return None
        elif name == "actions":
            scanned = scan_actions(buffer, first, end)
            if scanned is None:
                return None
            entries = scanned
        else:
            text = bytes(memoryview(buffer)[first:end])
            try:
                value = jsontext.loads(text)
                if canonical_json(value) != text:
                    return None
            except (ValueError, TypeError, RecursionError):
                return None
            fields[name] = value
    if listing is None:
        return None
    try:
        _check_manifest_fields(fields, listing, "manifest")
    except ArchiveError:
        return None
    records = entries.records
    for at in range(0, len(records), 32):
        if listing.index(records[at:at + 32]) < 0:
            return None  # (an entry naming a record not listed: said by the whole parse)
    verdict = None
    if signature:
        verdict = _signature_over(buffer, start, places.get(signature_field()), fields.get(signature_field()))
    return ArchiveManifest(objects=listing, refs=fields.get("refs", {}), actions=entries, signed=fields,
                           head=fields.get("head"), build_id=fields.get("build_id"),
                           campaign=fields.get("campaign") or {}, configs=fields.get("configs"),
                           version=fields["version"], signature=verdict)


def _top_fields(buffer: bytearray, start: int) -> dict[str, tuple[int, int, int]] | None:
    """Where each top-level field of the JSON object in buffer[start:] is (its key's start, its value's start and
    end), if the object is written as canonical JSON writes one at the top level: keys sorted and distinct, each in
    canonical spelling, no space anywhere between; None otherwise. (No view of the buffer outlives this call.)"""
    view = memoryview(buffer)[start:]
    try:
        raws = _TOP_FIELDS.decode(view)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    places: dict[str, tuple[int, int, int]] = {}
    at = 1
    previous: str | None = None
    for name, raw in raws.items():
        key = canonical_json(name)
        if ((at > 1 and view[at - 1] != 0x2C)  # ,
                or (previous is not None and name <= previous) or view[at:at + len(key)] != key
                or view[at + len(key):at + len(key) + 1] != b":"):
            return None
        value_at = at + len(key) + 1
        value = memoryview(raw)
        if view[value_at:value_at + len(value)] != value:
            return None
        end = value_at + len(value)
        places[name] = (start + at, start + value_at, start + end)
        previous, at = name, end + 1
    if len(view) < 2 or view[0] != 0x7B or at != len(view) or view[at - 1] != 0x7D:  # { ... }
        return None
    return places


def _signature_over(buffer: bytearray, start: int, place: tuple[int, int, int] | None, field: Any) -> SignatureCheck:
    """The signature's verdict over buffer: what a signed message begins with, then the manifest's canonical bytes
    from `start` with the signature's field (`place`) cut out here, in place."""
    from clawstore.trust import signature

    if place is not None:
        key_at, _, end = place
        if end < len(buffer) - 1:  # a field follows: cut the field and its comma
            del buffer[key_at:end + 1]
        else:  # the last field: cut its comma before
            del buffer[key_at - 1:end]
    try:
        return SignatureCheck(signature.signer_of(field, buffer))
    except signature.BadSignature as exc:
        return SignatureCheck(None, str(exc))


def read_archive_manifest(doc: Any, where: str, signature: bool = False) -> ArchiveManifest:
    """A manifest from its JSON; ArchiveError (exit 2: the archive is bad input) naming the field a
    hostile one gets wrong. `signature`: check the signature (over the document encoded again)."""
    _check_manifest(doc, where)
    verdict = None
    if signature:
        from clawstore.trust import signature as signatures

        try:
            verdict = SignatureCheck(signatures.signer(doc))
        except signatures.BadSignature as exc:
            verdict = SignatureCheck(None, str(exc))
    return ArchiveManifest(objects=ObjectListing.of_pairs(doc["objects"]), refs=doc.get("refs", {}),
                           actions=ActionEntries.of_dict(doc.get("actions", {})),
                           signed={k: v for k, v in doc.items() if k not in ("objects", "actions")},
                           head=doc.get("head"), build_id=doc.get("build_id"), campaign=doc.get("campaign") or {},
                           configs=doc.get("configs"), version=doc["version"], signature=verdict)


def _read_object(reader: Reader, hexdigest: str, size: int,
                 on_object: Callable[[str, int], Stage | None] | None, verifier: Verifier, wanted: int = 0) -> None:
    stage = on_object(hexdigest, size) if on_object else None
    if size <= WHOLE_MAX:  # one read, no joining of pieces
        verifier.check_whole(hexdigest, reader.read_whole(size), stage, bool(wanted))
        return
    verifier.start(hexdigest, stage)
    reader.read_data(size, verifier.feed)
    verifier.end()


def verify_archive(path: Path) -> ArchiveSummary:
    """Check every byte of the archive; needs no store."""
    return scan_archive(Path(path), None)


def read_manifest(path: Path, signature: bool = False) -> ArchiveManifest:
    """Only the manifest (fast: the first member); use verify_archive to trust the rest. `signature`: check its
    signature too (the verdict in `.signature`)."""
    where = f"archive {path}"
    try:
        with open(path, "rb") as fh:
            return _read_manifest_member(Reader(fh, lambda _data: None), where, signature)
    except FileNotFoundError:
        raise ArchiveError(f"{where}: no such file") from None
    except TarFormatError as exc:
        raise ArchiveError(f"{where}: {exc}") from None
    except OSError as exc:
        raise ArchiveError(f"{where}: cannot read ({exc.strerror})") from None
