"""`claw push`: send the packs the remote lacks, then move the refs by compare-and-swap.

What is sent whole, what is repacked and why: docs/remote.md (Details by module)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import blake3

from clawstore.errors import UsageError
from clawstore.host import process_end
from clawstore.host.durable import write_file_atomic
from clawstore.host.scratch import writer_scratch_dir
from clawstore.remote import listing, refsign
from clawstore.remote.backends import (
    Backend,
    RefValue,
    RemoteDamage,
    RemoteError,
    RemoteRefConflict,
    open_backend,
)
from clawstore.remote.config import Remote
from clawstore.remote.progress import TransferProgress
from clawstore.remote.sync import (
    PACKS,
    REFS,
    SHARED_REFS,
    SWAPPING,
    WORKERS,
    PackIds,
    SyncReport,
    cache_dir,
    hex_digests,
    listing_name,
    remember_table,
    remote_content,
    seen_there,
    swapping,
    tracking_ref,
    where,
)
from clawstore.store import Transfer
from clawstore.store.core.ids import PREFIX, file_digest, is_oid, oid_of
from clawstore.store.face import pack_table
from clawstore.values.canonical import canonical_json

PACK_OBJECTS = 20_000  # objects per pack push makes: bounded files, parallel transfers, fine-grained resume
# The first pack push makes holds at most this many, and each next one twice the one before, up to PACK_OBJECTS: each
# is made while the smaller ones before it are on the link, so two or three streams fill it early (one gets about
# half of it) instead of one while a full pack is made (docs/remote.md, "Scale: transfers that overlap").
FIRST_PACK_OBJECTS = 2_500


@dataclass
class RemoteKnowledge:
    """What a remote holds as far as one session knows it, kept by a `build --remote` between its interim pushes so that
    each sends what was committed since without listing the remote again. Anything sent twice is skipped by pulls
    (content-named, deduplicated)."""

    objects: set[bytes] = field(default_factory=set)  # digests
    actions: dict[bytes, bytes] = field(default_factory=dict)  # key digest -> record digest
    segments: frozenset[str] = frozenset()  # the index segments the last push_new had sent all of


def _settled(path: Path, remote: Remote, files: dict[str, int]) -> dict[str, str]:
    """{pack id: name it was sent under, or "-" (found mostly on the remote)} of this store's packs an
    earlier push to this very remote settled, and that still are: a pack sent is settled only while
    the remote lists it (a remote name pointed elsewhere, or a remote emptied, gets it whole again)."""
    lines = path.read_text(encoding="ascii").splitlines() if path.exists() else []
    if not lines or lines[0] != where(remote):
        return {}
    settled = {}
    for line in lines[1:]:
        pack_id, _, sent_as = line.partition(" ")
        if sent_as == "-" or listing_name(sent_as) in files:
            settled[pack_id] = sent_as
    return settled


def _closure_content(store: Transfer, refs: dict[str, str]) -> tuple[set[bytes], dict[bytes, bytes]]:
    """Every object and action entry (digests) of the closure of the given refs."""
    objects: set[bytes] = set()
    actions = {}
    for target in refs.values():
        closure = store.head_closure(target)
        objects.update(map(bytes.fromhex, closure.objects))
        actions.update(closure.actions)
    return objects, _entry_digests(actions)


def _listed(listings: dict[str, listing.Listing], ids: PackIds) -> set[bytes]:
    """Every object the remote's packs hold (`ids`: each pack's, all known) and their entries documents."""
    held = set(hex_digests("".join(h for doc in listings.values() for h in doc.document_ids)))
    for pack in listings:
        held.update(ids.known[pack])
    return held


@dataclass
class _Outgoing:
    """One pack to send: the file, the objects it holds, and the entries its listing carries."""

    path: Path
    objects: list[bytes]  # digests
    entries: bytes = b""  # its entries, as the listing carries them (listing.entries)
    document: str | None = None  # the pack's one other object: its entries' digest (never adopted)
    own: str | None = None  # the store's pack sent as it is: its id
    named: _Named | None = None  # its name and listing, once made (`_named`)
    unadopted: bool = False  # its entries are what killed builds finished (`_unadopted_packs`)
    campaigns: tuple[str, ...] = ()  # of those builds (none: what no killed build of a campaign wrote)


@dataclass(frozen=True)
class _Named:
    """A pack's name (the BLAKE3 of its bytes), size and table, and its signed listing written beside it."""

    name: str
    size: int
    table: bytes
    signed: Path


def _named(item: _Outgoing, work: Path) -> _Named:
    """Name a pack and write its signed listing in `work` (first: the listing follows the pack's upload at once)."""
    name = file_digest(item.path)
    signed = work / f"{name}.ids"
    table = pack_table(item.path)
    count = len(item.objects) - (item.document is not None and bytes.fromhex(item.document) in set(item.objects))
    size = item.path.stat().st_size
    signed.write_bytes(listing.encode(name, size, table, count, item.entries, item.document, item.unadopted,
                                      item.campaigns))
    return _Named(name, size, table, signed)


def _made(item: _Outgoing, work: Path) -> _Outgoing:
    """A pack push made, named by the thread that made it while its bytes are fresh: its upload thread then has
    nothing to do but send (naming it there waited on the interpreter lock while the next pack was made)."""
    item.named = _named(item, work)
    return item


def _entry_objects(store: Transfer, actions: dict[bytes, bytes], objects: set[bytes]) -> set[bytes]:
    """Each entry travels with its record and its input document (the key's id), so the receiving side
    can verify it whatever else it has: those of them not among `objects` that the store has."""
    missing = (actions.keys() | actions.values()) - objects
    # One set operation: asking the store per id would list its index again at every miss.
    return missing & store.object_digests() if missing else set()


def _whole_packs(store: Transfer, remote_has: set[bytes], work: Path, covered: dict[str, str]) -> Iterator[_Outgoing]:
    """This store's sealed packs at least half of whose objects the remote lacks, largest first, sent as they are
    (hard-linked into `work` so a gc cannot take them away). Packs in `covered` are not read again. Details:
    docs/remote.md (Details by module)."""
    for pack in store.sealed_packs(covered):
        ids = pack.objects
        if not ids or 2 * len(remote_has.intersection(ids)) > len(ids):
            covered[pack.pack_id] = "-"
            continue
        link = work / f"{pack.pack_id}.pack"
        try:
            os.link(pack.path, link)
        except FileNotFoundError:
            continue
        yield _Outgoing(link, ids, own=pack.pack_id)


def _entries_document(entries: bytes, unadopted: bool = False, campaigns: Collection[str] = ()) -> bytes:
    """The one object of a pack whose listing carries entries (`listing.entries`) alone: names those
    entries by their digest, so that each set of entries makes a pack (and so a listing name) of its own; `unadopted`
    (`_unadopted_packs`) and its `campaigns` make another pack than the same entries unmarked, or marked for others."""
    return canonical_json({"kind": "remote-entries", "entries": blake3.blake3(entries).hexdigest(),
                           **({listing.UNADOPTED: True} if unadopted else {}),
                           **({listing.CAMPAIGNS: sorted(campaigns)} if campaigns else {})})


def _unadopted_packs(unadopted: Mapping[str | None, Mapping[bytes, bytes]], store: Transfer,
                     listings: dict[str, listing.Listing], work: Path) -> Iterator[_Outgoing]:
    """The packs whose listings mark `unadopted`, the entries of what this store's killed builds finished and no build
    adopted yet (store/buildlogs.py pushed_unadopted: what its gc keeps by their journals), one per campaign, its
    listing naming it (`"campaigns"`), and one naming none for what no killed build of a campaign wrote, so that a
    pulling store keeps those records from gc too (pull.py `_keep_unadopted`) and a pull narrowed to a campaign takes
    its own (pull.py `_fetch_unadopted`); none for a campaign whose entries the remote's marked listings for it hold
    already. Before session 77 they travelled unmarked, and a `claw gc` past its grace period in the pulling store
    before its build deleted them: the build paid for them again; until a later change of it they named no campaign,
    and a pull narrowed to one took none of them (tests/gc/test_pull_beyond_head.py)."""
    for campaign, entries_of in sorted(unadopted.items(), key=lambda item: item[0] or ""):
        if not entries_of:
            continue
        marked: dict[bytes, bytes] = {}
        for doc in listings.values():
            if doc.unadopted and (campaign is None or campaign in doc.campaigns):
                marked.update(_entry_digests(doc.actions))
        if all(marked.get(key) == record for key, record in entries_of.items()):
            continue
        campaigns = () if campaign is None else (campaign,)
        entries = listing.entries(dict(entries_of))
        document = _entries_document(entries, unadopted=True, campaigns=campaigns)
        yield _made(_Outgoing(store.make_pack([], work, document), [], entries, oid_of(document)[len(PREFIX):],
                              unadopted=True, campaigns=campaigns), work)


def _upload(backend: Backend, item: _Outgoing, remote_sizes: dict[str, int], work: Path,
            progress: TransferProgress | None = None, tables: Path | None = None) -> tuple[str, int]:
    """Send one pack (unless the remote has it: a push run again) and then its signed listing, which
    publishes it; (the pack's name, the bytes sent). The pack's table is kept in `tables` (the listing cache):
    the next push or pull knows its objects without reading it from the remote."""
    # A made pack comes named (`_made`); the store's own sealed packs, sent whole, are named here: hashing each whole
    # file in the pushing thread would hold it from handing over the next.
    named = item.named or _named(item, work)
    name, size, signed, table = named.name, named.size, named.signed, named.table
    sent = 0
    progress = progress or TransferProgress()
    if remote_sizes.get(f"{PACKS}{name}.pack") != size:
        backend.upload(item.path, f"{PACKS}{name}.pack", progress.advance)
        sent = size
    else:
        progress.advance(size)  # (there already: done all the same)
    # Last: the listing publishes the pack. Only if there is none: another push of the same pack at the
    # same instant (same bytes) published its own first; a listing, once there, never changes.
    backend.create(signed, listing_name(name))
    if tables is not None:
        remember_table(tables, name, table)
    signed.unlink()
    item.path.unlink()
    return name, sent


class _Sender:
    """Uploads packs as they are handed over, WORKERS at a time (at most that many wait on disk)."""

    def __init__(self, backend: Backend, work: Path, report: SyncReport, remote_sizes: dict[str, int],
                 covered: dict[str, str], progress: TransferProgress | None = None, tables: Path | None = None):
        self.backend, self.work, self.report, self.tables = backend, work, report, tables
        self.progress = progress or TransferProgress()
        self.remote_sizes = remote_sizes  # {name: size} under packs/: what a push run again skips
        self.covered = covered  # the store's own packs sent: joined as their listing is published
        self.pool = ThreadPoolExecutor(max_workers=WORKERS)
        self.uploads: deque[tuple[Future[tuple[str, int]], _Outgoing]] = deque()
        self.besides: list[Future[None]] = []

    def send(self, item: _Outgoing) -> None:
        while len(self.uploads) >= WORKERS:
            self._settle()
        self.progress.plan(1, item.path.stat().st_size)
        self.uploads.append((self.pool.submit(_upload, self.backend, item, self.remote_sizes, self.work,
                                              self.progress, self.tables), item))

    def beside(self, work: Callable[..., None], *args: Any) -> Future[None]:
        """A small upload run beside the packs (not counted among them); drained with them (one handed over last
        may wait for a free thread: the pool's end would cancel it)."""
        self.besides.append(self.pool.submit(work, *args))
        return self.besides[-1]

    def drain(self) -> None:
        """Wait until everything handed over is published."""
        while self.uploads:
            self._settle()
        wait(self.besides)  # (their errors are the caller's to take)

    def _settle(self) -> None:
        future, item = self.uploads.popleft()
        name, sent = future.result()
        if item.own is not None:
            self.covered[item.own] = name
        self.report.bytes += sent
        self.report.packs += 1
        self.progress.pack_done()
        self.report.objects += len(item.objects)

    def __enter__(self) -> _Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        interrupted = isinstance(exc[1], KeyboardInterrupt)
        try:
            if exc[0] is None:
                self.drain()
        except KeyboardInterrupt:  # (while waiting for the last uploads)
            interrupted = True
            raise
        finally:
            # Interrupted, the uploads in flight do not hold the command until their last byte (minutes
            # for a big pack on a slow link): a directory's copies stop at their next chunk, removing
            # their temp files; S3's cannot be cut short so, and end with the claw program, which ends
            # as soon as the command has.
            quick = False
            if interrupted and self.backend.upload_stops_at_callback:
                self.progress.stop()
            elif interrupted:
                quick = process_end.leave_to_exit()
            self.pool.shutdown(wait=not quick, cancel_futures=True)


def push(store: Transfer, remote: Remote, ref_names: Iterable[str] | None = None, move_refs: bool = True,
         knowledge: RemoteKnowledge | None = None, progress: TransferProgress | None = None,
         unadopted: Mapping[str | None, Mapping[bytes, bytes]] | None = None) -> SyncReport:
    """Send what the remote lacks: whole packs, then the other objects in new packs, then the new entries in a listing
    of their own. `move_refs=False` sends no refs (a running build's first interim push) and fills `knowledge`;
    `progress` is told of packs and bytes; `unadopted` (store/buildlogs.py pushed_unadopted: a whole store's, or the
    killed builds' of the campaigns a narrowed push sends, by campaign), entries marked in listings of their own
    (`_unadopted_packs`); a narrowed push sends their records and what those reach too (before session 77 it sent the
    refs' closures alone, and the colleague who pulled paid for them again). Details: docs/remote.md (Details by
    module)."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pushed to", backend.description)
    with store.lease(f"push {remote.name}"), ExitStack() as kept, ThreadPoolExecutor(max_workers=1) as ahead, \
            ThreadPoolExecutor(max_workers=WORKERS) as asking:
        refs = _kept_refs(store, ref_names, kept)
        # A whole store is read while the remote is listed: its entries, then its objects, in that order (one thread):
        # a record is stored before its entry, so the objects read after the entries hold every entry's record.
        entries_read, objects_read = (ahead.submit(store.entry_digests), ahead.submit(store.object_digests)) \
            if ref_names is None else (None, None)
        # The refs' remote values are asked for now: their round trip overlaps the listing's instead of following it.
        reads = {name: asking.submit(backend.read_ref, REFS + name) for name in sorted(refs if move_refs else {})}
        listings, files = remote_content(store, remote, backend)
        # A ref another push moved is refused before anything is sent (the swap re-checks it at the end).
        moves = _ref_moves(store, backend, remote, refs, reads)
        ids = PackIds(store, remote, listings)
        ids.fetch(backend, list(listings), files)  # (format 4: the tables of packs this store has not seen)
        have_objects = _listed(listings, ids)
        have_actions: dict[bytes, bytes] = {}
        for doc in listings.values():
            have_actions.update(_entry_digests(doc.actions))
        covered_file = cache_dir(store, remote) / "covered"
        covered = _settled(covered_file, remote, files)
        with writer_scratch_dir(store.tmp_dir, "push") as tmp, \
                _Sender(backend, tmp, report, files, covered, progress, cache_dir(store, remote)) as sender:
            for item in _whole_packs(store, have_objects, tmp, covered) if ref_names is None else ():
                sender.send(item)
                have_objects.update(item.objects)
            # A ref the remote holds at this very value reaches nothing it lacks (a remote ref moves
            # only once what it reaches is published): a push after a no-op build walks no closure.
            held = {move.name for move in moves if not move.changes}
            if entries_read is not None:  # (the whole store)
                objects, actions = None, entries_read.result()
            else:
                objects, actions = _closure_content(store, {n: value for n, value in refs.items() if n not in held})
                if unadopted:  # (a narrowed push's: what its campaigns' killed builds finished, beyond their heads)
                    objects |= store.closure_digests(sorted({PREFIX + record.hex() for entries_of in unadopted.values()
                                                             for record in entries_of.values()}))
            new_actions = {k: v for k, v in actions.items() if have_actions.get(k) != v} if have_actions else actions
            document_id = None
            if new_actions:  # first of the packs push makes: its listing (the biggest) is on the link at once,
                # while the next pack is made. (A pull meanwhile leaves entries whose record has not arrived, and
                # reads them again; the refs move only once every pack is published.)
                entries = listing.entries(new_actions)
                document = _entries_document(entries)
                document_id = oid_of(document)[len(PREFIX):]
                sender.send(_made(_Outgoing(store.make_pack([], tmp, document), [], entries, document_id), tmp))
            for marking in _unadopted_packs(unadopted or {}, store, listings, tmp):
                sender.send(marking)  # (what its killed builds finished is among what it sends)
            if objects_read is not None:  # (the whole store's objects, read after its entries)
                objects = objects_read.result()
            lacking = objects - have_objects
            if ref_names is not None:  # (a whole store's objects hold every record and input document it has)
                lacking |= _entry_objects(store, new_actions, objects) - have_objects
            for chunk in _chunks(lacking):
                sender.send(_made(_Outgoing(store.make_pack(chunk, tmp), chunk), tmp))
            # The signed statements (a pull checks one before it moves a ref) travel beside the last uploads: needed
            # only before the swap, their signing and round trips do not hold up the first packs.
            statements = [sender.beside(refsign.publish, backend, m.name, m.value, tmp)
                          for m in moves if m.changes]
        if ref_names is None:  # everything sent: remember the packs settled (derived: a crash may lose it)
            lines = [where(remote), *(f"{pack} {sent_as}" for pack, sent_as in sorted(covered.items()))]
            write_file_atomic(covered_file, "\n".join(lines).encode(), store.tmp_dir, durable=False)
        if knowledge is not None:
            knowledge.objects.update(have_objects, lacking)
            if document_id is not None:
                knowledge.objects.add(bytes.fromhex(document_id))
            knowledge.actions.update(have_actions)
            knowledge.actions.update(new_actions)
        for statement in statements:
            statement.result()  # each ref moves only once its statement is there
        _move_refs(store, backend, remote, moves, report, asking)
    return report


def push_new(store: Transfer, remote: Remote, knowledge: RemoteKnowledge) -> SyncReport:
    """An interim push of a running build: what the store holds beyond `knowledge`, in new packs, then `knowledge` grows
    by it. Its cost follows what was committed since the last push; nothing new sends nothing; a failed push leaves
    `knowledge` as it was."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pushed to", backend.description)
    with store.lease(f"push {remote.name}"):
        held = store.committed(unless=knowledge.segments)  # every entry's record is among its objects
        if held is None:
            return report  # no commit since: not even a copy of the index is made
        actions = {key: entry.record for key, entry in held.actions.items()
                   if entry.record is not None and knowledge.actions.get(key) != entry.record}
        objects = held.objects.keys() - knowledge.objects
        if not objects and not actions:
            knowledge.segments = held.loaded
            return report
        entries = listing.entries(actions)
        document = _entries_document(entries) if entries else None
        document_id = None if document is None else oid_of(document)[len(PREFIX):]
        with writer_scratch_dir(store.tmp_dir, "push") as tmp, \
                _Sender(backend, tmp, report, {}, {}, tables=cache_dir(store, remote)) as sender:
            # push's cuts (small first packs, the same ids the same packs); the last one carries the entries' document.
            chunks = _chunks(objects)
            last = next(chunks, [])
            for chunk in chunks:
                sender.send(_made(_Outgoing(store.make_pack(last, tmp), last), tmp))
                last = chunk
            sender.send(_made(_Outgoing(store.make_pack(last, tmp, document), last, entries, document_id), tmp))
        knowledge.objects.update(objects)
        if document_id is not None:
            knowledge.objects.add(bytes.fromhex(document_id))
        knowledge.actions.update(actions)
        knowledge.segments = held.loaded
    return report


def _chunks(ids: Iterable[bytes]) -> Iterator[list[bytes]]:
    """`ids` in id order, cut into the packs push makes: the first at most FIRST_PACK_OBJECTS, each next one twice the
    one before, up to PACK_OBJECTS, so that the link starts at once and soon carries several. The same ids, the same
    cuts. Sorted a first byte at a time as the packs ask for them: the first pack does not wait for all to be sorted
    (60,000 ids: 30-40 ms, ~10 to share out)."""
    by_first: list[list[bytes]] = [[] for _ in range(256)]
    for digest in ids:
        by_first[digest[0]].append(digest)
    ordered = (digest for share in by_first for digest in sorted(share))
    size = min(FIRST_PACK_OBJECTS, PACK_OBJECTS)
    while chunk := list(islice(ordered, size)):
        yield chunk
        size = min(2 * size, PACK_OBJECTS)


def _entry_digests(actions: dict[str, str]) -> dict[bytes, bytes]:
    return {bytes.fromhex(key[len(PREFIX):]): bytes.fromhex(record[len(PREFIX):]) for key, record in actions.items()}


def _kept_refs(store: Transfer, ref_names: Iterable[str] | None, kept: ExitStack) -> dict[str, str]:
    """The refs to push, each value kept from a gc until `kept` ends (a lease naming it, as Store.reading_ref takes:
    taken after the refs are read, kept once they are read again unchanged). A push reads them first and names them
    last (the remote's refs, then its tracking refs here), and its own lease keeps only the action cache and young
    packs: before session 77 a build moving a campaign on and a gc meanwhile deleted the head it was pushing, and the
    push failed once it had moved the remote's ref ("cannot set ref remotes/…: object … is not in the store";
    tests/gc/test_writers_beside_gc.py)."""
    refs = _selected_refs(store, ref_names)
    for _ in range(_READ_AGAIN):
        with ExitStack() as leases:
            for value in sorted(set(refs.values())):
                leases.enter_context(store.keeping(value))
            now = _selected_refs(store, ref_names)
            if now == refs:
                kept.enter_context(leases.pop_all())
                return refs
        refs = now
    return refs  # (refs moving faster than they can be read twice: pushed as read, as before)


_READ_AGAIN = 3


def _selected_refs(store: Transfer, ref_names: Iterable[str] | None) -> dict[str, str]:
    if ref_names is None:
        return {name: value for prefix in SHARED_REFS for name, value in store.list_refs(prefix).items()}
    refs = {}
    for name in ref_names:
        value = store.get_ref(name)
        if value is None:
            raise UsageError(f"no ref {name} in this store (build or pin it first)")
        refs[name] = value
    return refs


@dataclass
class _RefMove:
    name: str
    value: str
    current: RefValue | None  # the remote's value when read: the swap succeeds only if it still is

    @property
    def changes(self) -> bool:
        return self.current is None or self.current.value != self.value


def _ref_moves(store: Transfer, backend: Backend, remote: Remote, refs: dict[str, str],
               reads: dict[str, Future[RefValue | None]]) -> list[_RefMove]:
    """Each ref's remote value (`reads`: each ref's read, all asked at once, in name order); RemoteRefConflict for a
    ref the remote moved since this store last saw it there (the tracking ref; or the value this store's last swap of
    it set out to put, `sync.swapping`), whatever the order of the names."""
    moves = [_RefMove(name, refs[name], read.result()) for name, read in reads.items()]
    noted = swapping(store, remote) if moves else {}
    for move in moves:
        if move.current is not None and not is_oid(move.current.value):  # (a pull skips it: "pull, then push" loops)
            raise RemoteDamage(f"remote {backend.description}: ref {REFS + move.name} holds no object id: remove it "
                               "from the remote, then push again")
        # (a value this store's own swap put there, its end unknown to it, is not another push's: the push was killed,
        # or its answer never came, after the server applied it)
        if move.current is not None and move.current.value not in {move.value, noted.get(move.name),
                                                                    *seen_there(store, remote, move.name)}:
            raise RemoteRefConflict(REFS + move.name)
    return moves


def _holds(backend: Backend, move: _RefMove) -> bool:
    """Does the remote's ref hold `move`'s value now?"""
    now = backend.read_ref(REFS + move.name)
    return now is not None and now.value == move.value


def _holds_if_answered(backend: Backend, move: _RefMove) -> bool:
    """`_holds`, False if the remote cannot tell (the failure already raised says why)."""
    try:
        return _holds(backend, move)
    except (RemoteError, RemoteDamage):
        return False


def _move_refs(store: Transfer, backend: Backend, remote: Remote, moves: list[_RefMove], report: SyncReport,
               pool: ThreadPoolExecutor) -> None:
    """Swap every ref that changes, in parallel (in `pool`, whose threads read the refs: none started for the
    tail), now that all it reaches is published and its statement too; remember each value the remote holds as soon
    as its swap is answered (the other swaps still on their way). A swap another push won is reported once the
    others are remembered (they did move). A swap lost to a push of the same value (this store pushed twice at once)
    is no conflict: the remote holds what this push came to put (before session 74, "changed by another push"). Nor
    is a swap whose answer never came (every retry's lost or timed out: RemoteError) found applied when the ref is
    read back: before session 75 the push failed, its tracking ref unwritten, and the next push after a build said
    "changed by another push"."""
    changes = {m.name: m.value for m in moves if m.changes}
    if changes:  # noted before any swap is sent: a push killed after the server applied one does not know it did
        # (not fsynced: a machine's crash may lose it, and the next push's conflict is then the one before session 75)
        noted = swapping(store, remote) | changes
        lines = [where(remote), *(f"{name} {value}" for name, value in sorted(noted.items()))]
        write_file_atomic(cache_dir(store, remote) / SWAPPING, "\n".join(lines).encode(), store.tmp_dir,
                          durable=False)
    swaps = {m.name: pool.submit(backend.swap_ref, REFS + m.name, m.value, m.current) for m in moves if m.changes}
    lost = None
    for move in moves:
        swap = swaps.get(move.name)
        failed = swap.exception() if swap is not None else None
        if isinstance(failed, RemoteRefConflict) and _holds(backend, move):
            swap = None  # (moved, by the other push)
        elif isinstance(failed, RemoteError) and _holds_if_answered(backend, move):
            pass  # (its answer never came, after every retry: the server had applied it)
        elif failed is not None:
            lost = lost or failed
            continue
        if swap is not None:
            report.refs_moved.append(move.name)
        store.set_ref(tracking_ref(remote, move.name), move.value)
    if lost is not None:
        raise lost
