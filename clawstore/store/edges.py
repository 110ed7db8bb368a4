"""A verified cache of each sealed pack's objects and what each names (its outgoing ids), one file a pack in edges/.

Objects are immutable, so what they name is too. The writer that seals a pack writes its file (what it noted of the
content it hashed); gc writes one for a pack that has none when its walk first takes the pack up; fsck rewrites it
after verifying every blob, with each record's facts (key and outputs), so that a later fsck of the unchanged pack
only hashes it. A file is trusted only while the pack still hashes to what it records and its own checksum holds: a
damaged, truncated, foreign or stale file is ignored and written anew. docs/gc-and-archives.md (Roots and
reachability; Details by module).
"""

from __future__ import annotations

import contextlib
import os
import re
from array import array
from collections.abc import Iterator
from functools import partial
from itertools import chain, repeat
from operator import is_not
from pathlib import Path
from typing import Any, BinaryIO

import blake3
import msgspec

from clawstore.store.core import codec
from clawstore.store.core.adopt import blob_problem
from clawstore.store.core.edgefile import (
    DIR,
    ID_RE,
    SUFFIX,
    EdgeLog,
    PackEdges,
    Table,
    children_in,
    decode,
    edges_path,
    looks_json,
    pack_digest,
    recorded,
    says_verified,
    write,
)
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.index import IndexView
from clawstore.store.core.packfile import (
    KIND_ACTION,
    KIND_OBJECT,
    Blob,
    NotAPackError,
    PackScan,
    is_sealed,
    iter_pack_ids,
    pack_path,
    scan_pack,
    table_of,
    writer_alive,
)

__all__ = ["DIR", "ID_RE", "SUFFIX", "EdgeCache", "EdgeLog", "PackEdges", "build", "children_in", "edges_path", "load",
           "looks_json", "pack_digest", "record_facts", "remove_stale", "save", "verify_blobs",
           "verify_noting"]

REGION = 8 << 20  # pack bytes read at once when verifying: fsck's memory bound per pack, with DECODED
DECODED = 8 << 20  # content decoded at once in a region (two batches alive at most: the last content of one is
#   still held while the next decodes)
_STORED_MAX = 1 << 20  # objects stored larger than this are verified on their own (streamed over 4 MiB)
_OUTPUTS = re.compile(rb'"outputs"')  # (a memoryview has no substring test)


class _RecordFacts(msgspec.Struct):
    """What a record check reads of a record (actions.entry_problem, output_ids): the rest is only validated."""

    key: Any = msgspec.UNSET
    input: Any = msgspec.UNSET
    outputs: Any = msgspec.UNSET


_FACTS = msgspec.json.Decoder(_RecordFacts)


def record_facts(content: bytes | memoryview) -> dict[str, Any] | None:
    """A record's `key`, `input` and `outputs` (those present) if it is a JSON object msgspec reads, else None (the
    caller then reads it whole, with jsontext's verdict): about 3x cheaper than making every value of it."""
    try:
        facts = _FACTS.decode(content)
    except ValueError:  # (msgspec's errors are ValueErrors)
        return None
    return {name: value for name in _RecordFacts.__struct_fields__
            if (value := getattr(facts, name)) is not msgspec.UNSET}


def _fact(content: memoryview, children: list[bytes]) -> tuple[int, list[int]] | None:
    """A well-formed record's key and outputs as indices into what it names (the facts fsck's entry check needs: an
    entry is then checked by look-ups alone); None for anything else, which a check reads and judges itself. Read from
    the decoded struct, not a dict of it, the key and the outputs' ids checked and turned into digests at once: the
    rules of actions.record_input_id and output_ids, about 40% cheaper a record (tests/store/test_edges_facts.py)."""
    if len(children) >= 0xFFFF or _OUTPUTS.search(content) is None:
        return None
    try:
        facts = _FACTS.decode(content)
    except ValueError:  # (msgspec's errors are ValueErrors)
        return None
    key, outputs = facts.key, facts.outputs
    if not isinstance(outputs, dict) or type(key) is not str:
        return None
    named = outputs.get("input_document") if facts.input is msgspec.UNSET else facts.input  # (record_input_id)
    if (key if named is None else named) != key:
        return None
    oids = _output_values(outputs)
    digests = _digests([key, *oids]) if oids is not None else None
    if digests is None:
        return None
    try:  # (each index of the first of its kind: what children_in deduplicated)
        return children.index(digests[:32]), [children.index(digests[at:at + 32]) for at in range(32, len(digests), 32)]
    except ValueError:
        return None  # (an id in another spelling than the one gc's rule finds: read)


def _output_values(outputs: dict[Any, Any]) -> list[Any] | None:
    """What actions.output_ids(outputs) would name, each value or list item but nulls, not yet checked to be ids
    (_digests does); None where it holds anything but strings."""
    values = [*outputs.values()]
    if list in set(map(type, values)):  # (a list of ids: flattened once; a list in it is no id)
        values = [*chain.from_iterable(value if type(value) is list else (value,) for value in values)]
    found = [*filter(_not_none, values)]
    return found if set(map(type, found)) <= {str} else None


def _digests(oids: list[str]) -> bytes | None:
    """The digests of `oids` joined, None unless each is an id (ids.is_oid: `blake3:` and 64 lowercase hex digits),
    all checked by a few calls in C, not a match an id."""
    if set(map(len, oids)) != {_OID_LENGTH} or not all(map(str.startswith, oids, repeat(PREFIX))):
        return None
    hexed = "".join(oids).replace(PREFIX, "")  # (a prefix inside an id: the length below refuses it)
    if len(hexed) != 64 * len(oids) or hexed.lower() != hexed:
        return None
    try:
        digests = bytes.fromhex(hexed)  # (which skips ASCII whitespace: the length refuses it)
    except ValueError:
        return None
    return digests if len(digests) == 32 * len(oids) else None


_OID_LENGTH = 71
_not_none = partial(is_not, None)


def load(root: Path, packs_dir: Path, pack: str, digest: bytes | None = None, verified: bool = False
         ) -> PackEdges | None:
    """The pack's file if it is whole and the pack's bytes still hash to what it records, else None. `digest`: the
    pack's BLAKE3 if the caller has just hashed it (fsck, which hashes each pack once a run). `verified`: only a file
    fsck verified (one whose head does not say so is not checked: a first fsck found every pack's writer's file and
    checked each whole, ~20 ms a pack at 10,000 x 5, to drop it)."""
    path = pack_path(packs_dir, pack)
    try:
        data = edges_path(root, pack).read_bytes()
        if verified and not says_verified(data):
            return None
        size = os.stat(path).st_size
        wanted = recorded(data, pack, size)
        table = table_of(path) if wanted is not None else None
        found = decode(pack, data, size, table) if table is not None else None
        if found is None or (digest if digest is not None else pack_digest(path)) != wanted:
            return None  # (the pack changed since it was hashed: what it names must be read again)
    except (OSError, NotAPackError):
        return None
    return found


def save(root: Path, tmp_dir: Path, scan: PackScan, pack: str, digest: bytes, log: EdgeLog, verified: bool,
         by_arrays: bool = False) -> PackEdges | None:
    """Write the file of a sealed pack (`scan`, hashed to `digest` before it was read) from what `log` noted of it;
    what the file says (None if the log is not about these blobs). `by_arrays`: made by numpy (EdgeLog.against)."""
    table = Table(b"".join(blob.id for blob in scan.blobs), array("Q", [blob.offset for blob in scan.blobs]))
    found = log.against(pack, table, verified, spend=True, by_arrays=by_arrays)  # (every caller's last use of its log)
    if found is not None:
        write(root, tmp_dir, pack, scan.size, digest, found)
    return found


def build(root: Path, packs_dir: Path, tmp_dir: Path, pack: str) -> PackEdges | None:
    """Read a sealed pack no file covers (every object decoded and hashed, REGION bytes at a time) and write its file
    (gc, before any fsck; not marked verified: fsck still checks the pack's index and actions itself). None if the pack
    is not sealed, still written, or holds a damaged object (then each is read, and the damage named, as without)."""
    path = pack_path(packs_dir, pack)
    try:
        if not is_sealed(path) or writer_alive(path):  # (two small reads: a live writer's pack is not walked)
            return None
        scan = scan_pack(path)
        if not scan.sealed:
            return None
        digest = pack_digest(path)  # hashed before it is read: bytes changed later no longer match it
        log = EdgeLog()
        with open(path, "rb") as fh:
            for _, bad in verify_noting(fh, pack, scan.blobs, log):
                if bad:
                    return None
    except (OSError, ValueError):
        return None
    return save(root, tmp_dir, scan, pack, digest, log, verified=False)


class EdgeCache:
    """What objects name (and, from files fsck verified, records' facts), from the edges files of their packs that
    verify, each loaded on first use, then held: at most 32 bytes an object and an edge, plus 16 an object."""

    def __init__(self, root: Path, packs_dir: Path, index: IndexView):
        self._root, self._packs_dir, self._index = root, packs_dir, index
        self._packs: dict[str, PackEdges | None] = {}

    def add(self, found: PackEdges) -> None:
        self._packs[found.pack] = found

    def _file(self, digest: bytes) -> tuple[PackEdges | None, int]:
        loc = self._index.find_object(digest, look_again=False)  # (what the index lacks is read)
        if loc is None:
            return None, 0
        if loc[0] not in self._packs:
            self._packs[loc[0]] = load(self._root, self._packs_dir, loc[0])
        return self._packs[loc[0]], loc[1]

    def children(self, digest: bytes) -> list[bytes] | None:
        """What the object names, None when no file that verifies covers it (it is then read)."""
        found, offset = self._file(digest)
        return found.children(digest, offset) if found is not None else None

    def facts(self, digest: bytes) -> tuple[bytes, list[bytes]] | None:
        """A record's key and outputs from a file fsck verified; None when none covers it (it is then read)."""
        found, offset = self._file(digest)
        return found.facts(digest, offset) if found is not None else None


def remove_stale(root: Path, packs_dir: Path) -> None:
    """Drop the files of packs that are gone (gc rewrote or deleted them; repair moved them aside)."""
    directory = root / DIR
    if not directory.is_dir():
        return
    packs = set(iter_pack_ids(packs_dir))
    for name in os.listdir(directory):
        if name.removesuffix(SUFFIX) not in packs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)


Checked = tuple[Blob, "str | None", "list[bytes] | None", "tuple[int, list[int]] | None"]


def verify_blobs(fh: BinaryIO, pack: str, blobs: list[Blob], facts: bool = False) -> Iterator[Checked]:
    """Each blob of a pack checked, in file order: (blob, why it is damaged or None, what it names or None when not
    read here, with `facts` a record's facts or None). Objects are read a region of at most REGION bytes at a time and
    decoded by zstd's batch API; large ones, and any batch that does not decode, are checked one by one (blob_problem
    says what is wrong). A region runs on past action entries (checked in place, by their length): a pack whose
    entries sit between its objects, as a build's do, is still decoded a region at a time (it was 2-3 objects)."""
    fd = fh.fileno()
    for run in _runs(blobs):
        yield from _verify_run(fd, pack, run, fh, facts, None)


def verify_noting(fh: BinaryIO, pack: str, blobs: list[Blob], log: EdgeLog, facts: bool = False
                  ) -> Iterator[tuple[int, list[tuple[Blob, str]]]]:
    """verify_blobs's checks, each object that verifies noted in `log` where it is checked (what it names and with
    `facts` a record's facts), not yielded: for each run of blobs checked at once, how many it held and the damaged
    ones (file order) with why. (A yield and a call less an object: fsck's first run notes 473,077.)"""
    fd = fh.fileno()
    for run in _runs(blobs):
        yield len(run), [(blob, why) for blob, why, _, _ in _verify_run(fd, pack, run, fh, facts, log)
                         if why is not None]


def _runs(blobs: list[Blob]) -> Iterator[list[Blob]]:
    """The blobs a region at a time (at most REGION bytes of them); a large object or a blob of another kind alone."""
    group: list[Blob] = []
    for blob in blobs:
        if blob.kind != KIND_OBJECT and blob.kind != KIND_ACTION or blob.length > _STORED_MAX:
            if group:
                yield group
            group = []
            yield [blob]
            continue
        if group and blob.offset + blob.length - group[0].offset > REGION:
            yield group
            group = []
        group.append(blob)
    if group:
        yield group


def _verify_run(fd: int, pack: str, group: list[Blob], fh: BinaryIO, facts: bool, log: EdgeLog | None
                ) -> Iterator[Checked]:
    """verify_blobs of one run; with `log`, each object that verifies is noted in it instead."""
    if len(group) == 1 and (group[0].kind != KIND_OBJECT and group[0].kind != KIND_ACTION
                            or group[0].length > _STORED_MAX):
        yield group[0], blob_problem(fh, pack, group[0]), None, None
        return
    start = group[0].offset
    region = os.pread(fd, group[-1].offset + group[-1].length - start, start)
    contents = iter(_decoded(region, start, [blob for blob in group if blob.kind == KIND_OBJECT]))
    note = log.add if log is not None else None
    for blob in group:
        if blob.kind != KIND_OBJECT:
            yield blob, blob_problem(fh, pack, blob), None, None  # (an action entry: its length, nothing read)
            continue
        content = next(contents)
        # (hashed here, not in a batch: the content is then still in the cache for what it names)
        if content is None or blake3.blake3(content).digest() != blob.id:
            # not batched (empty, no declared size), or damaged: checked alone, which names what is wrong
            why = blob_problem(fh, pack, blob)
            if why is not None:
                yield blob, why, None, None
                continue
            content = codec.decode_verified("", blob.id.hex(), "", os.pread(fd, blob.length, blob.offset))
        view = memoryview(content)
        # (this content alone: a search of the region's content at once could credit an id cut across two objects,
        # and telling its finds apart again was slower — docs/scale/gc-and-fsck.md, session 56)
        children = children_in(view)
        fact = _fact(view, children) if facts and children else None
        if note is None:
            yield blob, None, children, fact
        else:
            note(blob.id, blob.offset, children, fact)


def _decoded(region: bytes, start: int, objects: list[Blob]) -> Iterator[Any]:
    """Each object's content (not verified) if it decoded in its batch, else None. The frames' sizes are read in C
    (as a pull verifies a pack: transfer._verify_small); one by one only for a region cut short or a header that is no
    frame's. A batch is at most DECODED bytes of content, decoded when the caller reaches it: zstd's batch is one
    buffer, and a region of well-compressed objects (a campaign head's parts) decoded whole took ~30-50 MB."""
    if not objects:
        return
    ats = [blob.offset - start for blob in objects]
    whole = len(region) >= objects[-1].offset + objects[-1].length - start
    sizes = codec.declared_sizes(region, ats) if whole else None
    if sizes is None:  # (a region cut short, or a header that is no frame's: each asked)
        sizes = [codec.batch_size(region[at:at + codec.MAX_HEADER]) if at + blob.length <= len(region) else 0
                 for blob, at in zip(objects, ats, strict=True)]
    fits = list(map(codec.batched, sizes))
    first, held = 0, 0  # the batch's first object, its content's bytes
    for i, size in enumerate(sizes):
        if fits[i] and held and held + size > DECODED:
            yield from _batch(region, ats, objects, fits, range(first, i))
            first, held = i, 0
        held += size if fits[i] else 0
    yield from _batch(region, ats, objects, fits, range(first, len(objects)))


def _batch(region: bytes, ats: list[int], objects: list[Blob], fits: list[bool], part: range) -> Iterator[Any]:
    """_decoded's objects `part` of the region, those that fit decoded in one call (when the caller reaches them)."""
    spans = [(ats[i], objects[i].length) for i in part if fits[i]]
    # On one thread (held 0): fsck verifies on both cores already, and zstd's threads beside the other process's
    # stalled a region on its slowest (a first fsck at 134% CPU, 22,000 involuntary switches against 2,300)
    decoded = codec.decode_frames(region, spans, 0) if spans else None
    contents = iter(decoded) if decoded is not None and len(decoded) == len(spans) else None
    for i in part:
        yield next(contents) if contents is not None and fits[i] else None


