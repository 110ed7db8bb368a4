"""`claw push` / `claw pull`: move the packs the other side lacks, verified, then refs by CAS.

Remote layout (under the remote's prefix):

    packs/<hex>.pack      a sealed pack (store/packfile.py), named by the BLAKE3 of its bytes
    packs/<hex>.ids       its listing, signed by the pusher (remote/listing.py: one line of signed
                          JSON naming the pack, its size and the BLAKE3 of the raw ids and entries
                          that follow); written after the pack, so a listing always names a
                          complete pack. A listing with entries names a pack that also holds a
                          small document naming those entries by digest ("document": its id; an
                          older claw put the entries themselves there), never adopted: it only makes
                          that pack's bytes, and so its name, its own (a push's entries travel in a
                          pack of that document alone; an interim push's beside its new objects)
    packs/<hex>.claw      (pushed by claw before packs travelled whole) a bundle: a campaign-archive
                          file; its listing has no "format". Still pulled.
    refs/<name>           campaign heads and pins, moved only by compare-and-swap
    refsigs/<name>/<hex>  the pusher's signed statement that ref <name> was set to <hex> (refsign.py)

Push lists the remote's packs, then sends the store's own sealed packs that are mostly new to the
remote as they are, and the other objects the remote lacks copied into new packs (in parallel); the
action-cache entries the remote lacks travel in the listings. It reads the remote's refs first: one
the remote moved since this store last saw it there (`remotes/<remote>/<name>`, a tracking ref) stops
the push with "pull first" before anything is sent. Once everything is published it swaps the refs
(each created if absent, replaced only if it still holds the value read: a push that won meanwhile
stops this one the same way). A push narrowed to some refs sends only what their heads reach, always
in new packs. The interim pushes of a running build (push_new) send what was committed since the last
one, from what the session knows the remote holds, without listing it.

Pull checks who signed each ref's value and each listing before fetching anything, downloads the
packs holding objects this store lacks, checks each whole (store/transfer.py: every object hashed
before anything becomes visible; a pack is all or nothing) and moves it into the store as it is; then
it adds the listings' entries that verify against their input documents, then fast-forwards each
local ref that did not move since the last sync. Of two records for one key, a reusable one wins
(over another listing's, or this store's own entry): a failure never hides a result. A killed push or
pull is resumed by running it again: packs are immutable and named by content, and what is already
there is skipped.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from clawstore.canonical import canonical_json
from clawstore.errors import UsageError
from clawstore.remote import listing, refsign
from clawstore.remote.backends import Backend, RefValue, RemoteRefConflict, open_backend
from clawstore.remote.config import Remote
from clawstore.store.actions import all_entry_digests, entry_record, get_action_record_id, set_entries, takes_over
from clawstore.store.archive import (
    ArchiveContents,
    archive_signer,
    import_archive,
    keep_apart,
    untrusted_why,
    user_trusts,
)
from clawstore.store.archive_verify import Kept
from clawstore.store.durable import temp_name, write_file_atomic
from clawstore.store.ids import PREFIX, is_hex64, is_oid, oid_of
from clawstore.store.packfile import (
    SMALL_PACK_BYTES,
    Blob,
    NotAPackError,
    iter_pack_ids,
    pack_path,
    sealed_object_ids,
    writer_alive,
)
from clawstore.store.reach import Reach
from clawstore.store.transfer import (
    PackCheckError,
    ReceivedPack,
    adopt_pack,
    copy_objects,
    file_digest,
    make_pack,
    verify_pack,
)

if TYPE_CHECKING:
    from clawstore.store.store import Store

PACKS = "packs/"
REFS = "refs/"
SHARED_REFS = ("campaigns/", "pins/")
PACK_OBJECTS = 20_000  # objects per pack push makes: bounded files, parallel transfers, fine-grained resume
WORKERS = 8
ADOPT_BYTES = SMALL_PACK_BYTES  # a pulled pack this big moves in whole; a smaller one's objects are copied
TRACKING = "remotes/"
UNSIGNED = "unsigned"  # SyncReport.kept_apart's name for packs and refs nobody signed
LISTING_BATCH = 64  # listings fetched together, then checked, before the next ones are fetched
LISTING_MAX = 256 << 20  # bytes: a listing of a million objects is 70 MB in format 2; a bigger file is not one


@dataclass
class SyncReport:
    verb: str
    remote: str
    packs: int = 0
    objects: int = 0
    bytes: int = 0
    refs_moved: list[str] = field(default_factory=list)
    refs_kept: dict[str, str] = field(default_factory=dict)  # name -> why it did not move
    kept_apart: set[str] = field(default_factory=set)  # signers of packs kept apart (pull --untrusted)

    def summary(self) -> str:
        lines = [f"{self.verb} {self.remote}: {self.packs} pack(s), {self.objects} object(s), "
                 f"{self.bytes} bytes; {len(self.refs_moved)} ref(s) moved"]
        lines += [f"  {name}: {why}" for name, why in sorted(self.refs_kept.items())]
        if self.kept_apart:
            keys = sorted(self.kept_apart - {UNSIGNED})
            whose = ([f"signed by {', '.join(keys)}, not trusted"] if keys else []) + (
                ["not signed"] if UNSIGNED in self.kept_apart else [])
            lines.append(f"  kept apart ({'; '.join(whose)}): no build reuses it until you claw trust add "
                         "its signer (what nobody signed, never); refs not moved")
        return "\n".join(lines)


@dataclass
class RemoteKnowledge:
    """What a remote holds as far as one session knows it, kept by a `build --remote` between its interim
    pushes (remote/live.py): each after the first sends what the store committed since, without listing
    the remote again. Whatever another push adds meanwhile is not known: sent again, it is only skipped
    by the pulls (packs are named by content, objects and entries deduplicated on arrival)."""

    objects: set[bytes] = field(default_factory=set)  # digests
    actions: dict[bytes, bytes] = field(default_factory=dict)  # key digest -> record digest
    segments: frozenset[str] = frozenset()  # the index segments the last push_new had sent all of


# ------------------------------------------------------------------------------------------ listings

def _listing_name(pack: str) -> str:
    return f"{PACKS}{pack}.ids"


def remote_packs(files: dict[str, int]) -> list[str]:
    """Packs whose listing exists among the remote's `files` (a pack without a listing is an
    interrupted push: ignored)."""
    return sorted(name[len(PACKS):-len(".ids")] for name in files
                  if name.endswith(".ids") and is_hex64(name[len(PACKS):-len(".ids")]))


def _remembered(path: Path) -> set[str]:
    """The names a pull's cache file of remotes/<name>/ lists (listings it is done with)."""
    return set(path.read_text(encoding="ascii").split()) if path.exists() else set()


def _where(remote: Remote) -> str:
    return f"url {remote.url} {remote.endpoint_url or '-'}"


def _settled(path: Path, remote: Remote, files: dict[str, int]) -> dict[str, str]:
    """{pack id: name it was sent under, or "-" (found mostly on the remote)} of this store's packs an
    earlier push to this very remote settled, and that still are: a pack sent is settled only while
    the remote lists it (a remote name pointed elsewhere, or a remote emptied, gets it whole again)."""
    lines = path.read_text(encoding="ascii").splitlines() if path.exists() else []
    if not lines or lines[0] != _where(remote):
        return {}
    settled = {}
    for line in lines[1:]:
        pack_id, _, sent_as = line.partition(" ")
        if sent_as == "-" or _listing_name(sent_as) in files:
            settled[pack_id] = sent_as
    return settled


def _cache_dir(store: Store, remote: Remote) -> Path:
    path = store.root / "remotes" / remote.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fetch_listings(store: Store, remote: Remote, backend: Backend, packs: list[str], files: dict[str, int]
                    ) -> None:
    """Download the listings not in the local cache yet, WORKERS at a time: a remote that interim
    pushes filled with hundreds of packs costs a new colleague one round trip per listing."""
    cache = _cache_dir(store, remote)
    unseen = [pack for pack in packs if not (cache / f"{pack}.ids").exists()]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(lambda pack: _download_listing(backend, pack, cache / f"{pack}.ids",
                                                     files[_listing_name(pack)]), unseen))


def _download_listing(backend: Backend, pack: str, cached: Path, size: int) -> None:
    tmp = cached.with_name(temp_name())
    try:
        backend.download(_listing_name(pack), tmp, size)
        os.replace(tmp, cached)
    finally:
        tmp.unlink(missing_ok=True)


def _read_listing(store: Store, remote: Remote, backend: Backend, pack: str, size: int) -> dict[str, Any]:
    """A pack's listing (decoded: listing.decode), from the local cache when it was seen before
    (listings never change), else downloaded again (another pull dropped the cached copy) no bigger
    than the remote listed (`size`)."""
    cached = _cache_dir(store, remote) / f"{pack}.ids"
    if not cached.exists():
        _download_listing(backend, pack, cached, size)
    try:
        return listing.decode(cached.read_bytes(), pack)
    except listing.ListingError as exc:
        cached.unlink(missing_ok=True)
        why = "is not JSON" if exc.not_json else f"is malformed ({exc})"
    except OSError:
        cached.unlink(missing_ok=True)
        why = "is not JSON"
    raise UsageError(f"remote {remote.url}: listing of pack {pack} {why}")


def _document(doc: dict[str, Any]) -> list[str]:
    """The id of the entries document a listing's pack also holds ([] for most listings)."""
    return [doc["document"]] if "document" in doc else []


def _remote_content(store: Store, remote: Remote, backend: Backend) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """{pack: listing} of every pack on the remote, and {name: size} of its files under packs/."""
    files = backend.list(PACKS)
    packs = remote_packs(files)
    for pack in packs:
        if files[_listing_name(pack)] > LISTING_MAX:
            raise UsageError(f"remote {remote.url}: listing of pack {pack} is {files[_listing_name(pack)]} bytes, "
                             f"more than any listing (at most {LISTING_MAX})")
    listings = {}
    for start in range(0, len(packs), LISTING_BATCH):  # a remote full of junk fails within one batch
        batch = packs[start:start + LISTING_BATCH]
        _fetch_listings(store, remote, backend, batch, files)
        listings.update((pack, _read_listing(store, remote, backend, pack, files[_listing_name(pack)]))
                        for pack in batch)
    return listings, files


# ------------------------------------------------------------------------------------------ push

def _local_content(store: Store, refs: dict[str, str] | None) -> tuple[set[bytes], dict[bytes, bytes]]:
    """Every object and action entry (digests) of the whole store, or of the closure of the given refs."""
    if refs is None:  # entries first: a record is stored before its entry, so the objects read next hold it
        return store.object_digests(), all_entry_digests(store)
    from clawstore.builder.closure import head_closure

    objects: set[bytes] = set()
    actions = {}
    for target in refs.values():
        closure = head_closure(store, target)
        objects.update(map(bytes.fromhex, closure.objects))
        actions.update(closure.actions)
    return objects, _entry_digests(actions)


def _digests(hexes: str) -> list[bytes]:
    """The digests of ids written one after another as one hex string (a listing's "objects")."""
    raw = bytes.fromhex(hexes)
    return [raw[i:i + 32] for i in range(0, len(raw), 32)]


def _listed(listings: dict[str, dict[str, Any]]) -> set[bytes]:
    """Every object the remote's listings name (their entries documents too)."""
    return set(_digests("".join(h for doc in listings.values() for h in (*doc["objects"], *_document(doc)))))


@dataclass
class _Outgoing:
    """One pack to send: the file, the objects it holds, and the entries its listing carries."""

    path: Path
    objects: list[bytes]  # digests
    entries: bytes = b""  # its entries, as the listing carries them (listing.entries)
    document: str | None = None  # the pack's one other object: its entries' digest (never adopted)
    own: str | None = None  # the store's pack sent as it is: its id


def _entry_objects(store: Store, actions: dict[bytes, bytes], objects: set[bytes]) -> set[bytes]:
    """Each entry travels with its record and its input document (the key's id), so the receiving side
    can verify it whatever else it has: those of them not among `objects` that the store has."""
    missing = (actions.keys() | actions.values()) - objects
    # One set operation: asking the store per id would list its index again at every miss.
    return missing & store.object_digests() if missing else set()


def _whole_packs(store: Store, remote_has: set[bytes], work: Path, covered: dict[str, str]) -> Iterator[_Outgoing]:
    """This store's sealed packs at least half of whose objects the remote lacks, chosen from the
    remote's content alone (so they leave before the rest is worked out): sent as they are, hard-linked
    into `work` first so that a gc repacking meanwhile cannot take them away. Packs in `covered` (sent,
    or mostly on the remote, at an earlier push; packs never change) are not read again; those found
    mostly on the remote join it now, those sent once their upload ends (_Sender). (Should the remote
    lose objects of a pack found mostly there, they still go: copied, as the rest.)"""
    packs_dir = store.runtime.packs_dir
    for pack_id in _largest_first(packs_dir, covered):
        path = pack_path(packs_dir, pack_id)
        try:
            if writer_alive(path):
                continue
            ids = list(dict.fromkeys(sealed_object_ids(path)))  # in table order (sorting costs more than it tells)
        except (NotAPackError, OSError):  # unsealed (its writer was killed) or gone: its objects go copied
            continue
        if not ids or 2 * len(remote_has.intersection(ids)) > len(ids):
            covered[pack_id] = "-"
            continue
        link = work / f"{pack_id}.pack"
        try:
            os.link(path, link)
        except FileNotFoundError:
            continue
        yield _Outgoing(link, ids, own=pack_id)


def _largest_first(packs_dir: Path, covered: dict[str, str]) -> list[str]:
    """The packs not covered yet, largest first: the longest upload starts first, so the last one to end
    is not a big pack whose table happened to be read last."""
    sizes = {}
    for pack_id in iter_pack_ids(packs_dir) if packs_dir.is_dir() else ():
        if pack_id not in covered:
            with contextlib.suppress(OSError):
                sizes[pack_id] = pack_path(packs_dir, pack_id).stat().st_size
    return sorted(sizes, key=sizes.__getitem__, reverse=True)


def _entries_document(entries: bytes) -> bytes:
    """The one object of a pack whose listing carries entries (`listing.entries`) alone: names those
    entries by their digest, so that each set of entries makes a pack (and so a listing name) of its own."""
    return canonical_json({"kind": "remote-entries", "entries": blake3.blake3(entries).hexdigest()})


def _upload(backend: Backend, item: _Outgoing, remote_sizes: dict[str, int], work: Path) -> tuple[str, int]:
    """Send one pack (unless the remote has it: a push run again) and then its signed listing, which
    publishes it; (the pack's name, the bytes sent)."""
    name = file_digest(item.path)
    size = item.path.stat().st_size
    signed = work / f"{name}.ids"  # made first: the last pack's listing follows its upload at once
    signed.write_bytes(listing.encode(name, size, item.objects, item.entries, item.document))
    sent = 0
    if remote_sizes.get(f"{PACKS}{name}.pack") != size:
        backend.upload(item.path, f"{PACKS}{name}.pack")
        sent = size
    # Last: the listing publishes the pack. Only if there is none: another push of the same pack at the
    # same instant (same bytes) published its own first; a listing, once there, never changes.
    backend.create(signed, _listing_name(name))
    signed.unlink()
    item.path.unlink()
    return name, sent


class _Sender:
    """Uploads packs as they are handed over, WORKERS at a time (at most that many wait on disk)."""

    def __init__(self, backend: Backend, work: Path, report: SyncReport, remote_sizes: dict[str, int],
                 covered: dict[str, str]):
        self.backend, self.work, self.report = backend, work, report
        self.remote_sizes = remote_sizes  # {name: size} under packs/: what a push run again skips
        self.covered = covered  # the store's own packs sent: joined as their listing is published
        self.pool = ThreadPoolExecutor(max_workers=WORKERS)
        self.uploads: deque[tuple[Future[tuple[str, int]], _Outgoing]] = deque()

    def send(self, item: _Outgoing) -> None:
        while len(self.uploads) >= WORKERS:
            self._settle()
        self.uploads.append((self.pool.submit(_upload, self.backend, item, self.remote_sizes, self.work), item))

    def beside(self, work: Callable[..., None], *args: Any) -> Future[None]:
        """A small upload run beside the packs (not counted among them)."""
        return self.pool.submit(work, *args)

    def drain(self) -> None:
        """Wait until everything handed over is published."""
        while self.uploads:
            self._settle()

    def _settle(self) -> None:
        future, item = self.uploads.popleft()
        name, sent = future.result()
        if item.own is not None:
            self.covered[item.own] = name
        self.report.bytes += sent
        self.report.packs += 1
        self.report.objects += len(item.objects)

    def __enter__(self) -> _Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.drain()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def push(store: Store, remote: Remote, ref_names: Iterable[str] | None = None, move_refs: bool = True,
         knowledge: RemoteKnowledge | None = None) -> SyncReport:
    """Send what the remote lacks; `move_refs=False` sends objects and action entries only (the first
    interim push of a running build: another machine can reuse them before the head moves), and
    `knowledge` is then filled with what the remote holds once it is done (push_new sends the rest).

    Whole packs go first; then the other objects the remote lacks, copied into new packs of
    PACK_OBJECTS objects; then the new entries, in a listing of their own. (Its pack holds one object,
    a document naming the entries by digest: a pack's bytes, and so its name, tell its listing. A pull
    that sees the entries before their records takes them on a later pull: _Pull.incomplete.)"""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pushed to", backend.description)
    with store.lease(f"push {remote.name}"):
        refs = _selected_refs(store, ref_names)
        listings, files = _remote_content(store, remote, backend)
        # A ref another push moved is refused before anything is sent (the swap re-checks it at the end).
        moves = _ref_moves(store, backend, remote, refs if move_refs else {})
        have_objects = _listed(listings)
        have_actions: dict[bytes, bytes] = {}
        for doc in listings.values():
            have_actions.update(_entry_digests(doc["actions"]))
        covered_file = _cache_dir(store, remote) / "covered"
        covered = _settled(covered_file, remote, files)
        with tempfile.TemporaryDirectory(dir=store.tmp_dir, prefix="push-") as tmp, \
                _Sender(backend, Path(tmp), report, files, covered) as sender:
            # The signed statements travel beside the packs (a pull checks one before it moves a ref).
            statements = [sender.beside(refsign.publish, backend, m.name, m.value, Path(tmp))
                          for m in moves if m.changes]
            for item in _whole_packs(store, have_objects, Path(tmp), covered) if ref_names is None else ():
                sender.send(item)
                have_objects.update(item.objects)
            # A ref the remote holds at this very value reaches nothing it lacks (a remote ref moves
            # only once what it reaches is published): a push after a no-op build walks no closure.
            held = {move.name for move in moves if not move.changes}
            objects, actions = _local_content(store, None if ref_names is None else
                                              {name: value for name, value in refs.items() if name not in held})
            new_actions = {k: v for k, v in actions.items() if have_actions.get(k) != v} if have_actions else actions
            lacking = objects - have_objects
            if ref_names is not None:  # (a whole store's objects hold every record and input document it has)
                lacking |= _entry_objects(store, new_actions, objects) - have_objects
            rest = sorted(lacking)
            for start in range(0, len(rest), PACK_OBJECTS):
                chunk = rest[start:start + PACK_OBJECTS]
                sender.send(_Outgoing(make_pack(store, chunk, Path(tmp)), chunk))
            document_id = None
            if new_actions:
                entries = listing.entries(new_actions)
                document = _entries_document(entries)
                document_id = oid_of(document)[len(PREFIX):]
                sender.send(_Outgoing(make_pack(store, [], Path(tmp), document), [], entries, document_id))
        if ref_names is None:  # everything sent: remember the packs settled (derived: a crash may lose it)
            lines = [_where(remote), *(f"{pack} {sent_as}" for pack, sent_as in sorted(covered.items()))]
            write_file_atomic(covered_file, "\n".join(lines).encode(), store.tmp_dir, durable=False)
        if knowledge is not None:
            knowledge.objects.update(have_objects, lacking)
            if document_id is not None:
                knowledge.objects.add(bytes.fromhex(document_id))
            knowledge.actions.update(have_actions)
            knowledge.actions.update(new_actions)
        for statement in statements:
            statement.result()  # each ref moves only once its statement is there
        _move_refs(store, backend, remote, moves, report)
    return report


def push_new(store: Store, remote: Remote, knowledge: RemoteKnowledge) -> SyncReport:
    """An interim push of a running build: the objects and entries the store holds that `knowledge` (what
    the remote holds, from the session's first push) does not, in new packs (the entries in the listing
    of the last, with their document), then `knowledge` grows by them. It neither lists the remote nor
    reads a pack's table: its cost follows what was committed since the last push, not the store.
    Nothing new: nothing is sent. A push that fails leaves `knowledge` as it was: the next sends it all."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pushed to", backend.description)
    with store.lease(f"push {remote.name}"):
        index = store.runtime.index
        index.refresh()
        if index.loaded == knowledge.segments:
            return report  # no commit since: not even a copy of the index is made
        held = index.snapshot()  # objects and entries of one instant: every entry's record is among them
        actions = {key: entry.record for key, entry in held.actions.items()
                   if entry.record is not None and knowledge.actions.get(key) != entry.record}
        objects = sorted(held.objects.keys() - knowledge.objects)
        if not objects and not actions:
            knowledge.segments = held.loaded
            return report
        entries = listing.entries(actions)
        document = _entries_document(entries) if entries else None
        document_id = None if document is None else oid_of(document)[len(PREFIX):]
        with tempfile.TemporaryDirectory(dir=store.tmp_dir, prefix="push-") as tmp, \
                _Sender(backend, Path(tmp), report, {}, {}) as sender:
            starts = range(0, len(objects), PACK_OBJECTS)
            for start in starts[:-1]:
                chunk = objects[start:start + PACK_OBJECTS]
                sender.send(_Outgoing(make_pack(store, chunk, Path(tmp)), chunk))
            last = objects[starts[-1]:] if objects else []
            sender.send(_Outgoing(make_pack(store, last, Path(tmp), document), last, entries, document_id))
        knowledge.objects.update(objects)
        if document_id is not None:
            knowledge.objects.add(bytes.fromhex(document_id))
        knowledge.actions.update(actions)
        knowledge.segments = held.loaded
    return report


def _entry_digests(actions: dict[str, str]) -> dict[bytes, bytes]:
    return {bytes.fromhex(key[len(PREFIX):]): bytes.fromhex(record[len(PREFIX):]) for key, record in actions.items()}


def _selected_refs(store: Store, ref_names: Iterable[str] | None) -> dict[str, str]:
    if ref_names is None:
        return {name: value for prefix in SHARED_REFS for name, value in store.list_refs(prefix).items()}
    refs = {}
    for name in ref_names:
        value = store.get_ref(name)
        if value is None:
            raise UsageError(f"no ref {name} in this store (build or pin it first)")
        refs[name] = value
    return refs


def _tracking(remote: Remote, name: str) -> str:
    return f"{TRACKING}{remote.name}/{name}"


@dataclass
class _RefMove:
    name: str
    value: str
    current: RefValue | None  # the remote's value when read: the swap succeeds only if it still is

    @property
    def changes(self) -> bool:
        return self.current is None or self.current.value != self.value


def _ref_moves(store: Store, backend: Backend, remote: Remote, refs: dict[str, str]) -> list[_RefMove]:
    """Each ref's remote value, read at once (in parallel); RemoteRefConflict for a ref the remote moved
    since this store last saw it there (the tracking ref), whatever the order of the names."""
    names = sorted(refs)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        current = list(pool.map(lambda name: backend.read_ref(REFS + name), names))
    moves = [_RefMove(name, refs[name], value) for name, value in zip(names, current, strict=True)]
    for move in moves:
        if move.current is not None and move.current.value not in (move.value,
                                                                    store.get_ref(_tracking(remote, move.name))):
            raise RemoteRefConflict(REFS + move.name)
    return moves


def _move_refs(store: Store, backend: Backend, remote: Remote, moves: list[_RefMove], report: SyncReport) -> None:
    """Swap every ref that changes, in parallel, now that all it reaches is published and its statement
    too; then remember each value the remote holds. A swap another push won is reported once the
    others are remembered (they did move)."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        swaps = {m.name: pool.submit(backend.swap_ref, REFS + m.name, m.value, m.current) for m in moves if m.changes}
    lost = None
    for move in moves:
        swap = swaps.get(move.name)
        if swap is not None and swap.exception() is not None:
            lost = lost or swap.exception()
            continue
        if swap is not None:
            report.refs_moved.append(move.name)
        store.set_ref(_tracking(remote, move.name), move.value)
    if lost is not None:
        raise lost


# ------------------------------------------------------------------------------------------ pull

def _check_ref_signers(store: Store, backend: Backend, refs: dict[str, str], untrusted: bool) -> set[str]:
    """Who signed each remote ref's value; refused (before anything is fetched) when one is not trusted,
    unless `untrusted`: then returns those signers, and the refs are kept apart."""
    apart = set()
    for name, signer in refsign.signers(backend, refs, store.tmp_dir).items():
        if user_trusts(signer):
            continue
        if not untrusted:
            raise UsageError(f"remote ref {name}: {untrusted_why(signer, 'pull')}")
        apart.add(signer or UNSIGNED)
    return apart


class _Pull:
    """One pull's state: what this store has, the listings, and the entries verified so far."""

    def __init__(self, store: Store, remote: Remote, backend: Backend, untrusted: bool, report: SyncReport):
        self.store, self.remote, self.backend, self.untrusted, self.report = store, remote, backend, untrusted, report
        self.listings, self.files = _remote_content(store, remote, backend)
        self.fetched_file = _cache_dir(store, remote) / "fetched"
        self.done = _remembered(self.fetched_file)
        self.present = store.object_digests()
        self.digests = {pack: _digests("".join(doc["objects"])) for pack, doc in self.listings.items()}
        self.signers: dict[str, str | None] = {}
        self.kept = Kept()  # records decoded while packs were checked, for the entry checks
        self.received: set[str] = set()  # packs fetched by this pull
        self.entries: dict[str, str] = {}  # verified entries of trusted listings, to add
        self.apart: dict[str, dict[str, str]] = {}  # pack -> its verified entries, kept apart (untrusted)
        self.incomplete: set[str] = set()  # listings with entries whose record or input is not here
        self._trust: dict[str | None, bool] = {}

    def pending(self) -> list[str]:
        return [pack for pack in self.listings if pack not in self.done]

    def lacking(self, pack: str) -> bool:
        """Does this store lack something of the pack: an object, or (a listing of entries alone) its
        entries, which only a fetch checks and keeps apart when the signer is not trusted."""
        doc = self.listings[pack]
        return not self.present.issuperset(self.digests[pack]) or (not doc["objects"] and bool(doc["actions"]))

    def signer(self, pack: str) -> str | None:
        if pack not in self.signers:
            self.signers[pack] = listing.signer(self.listings[pack], pack)
        return self.signers[pack]

    def trusted(self, pack: str) -> bool:
        """Is the pack's listing signed by a key the user trusts?"""
        return self.trusts(self.signer(pack))

    def trusts(self, signer: str | None) -> bool:
        """Does the user trust this signer (the trust list read once per signer and pull)?"""
        if signer not in self._trust:
            self._trust[signer] = user_trusts(signer)
        return self._trust[signer]

    def fetch(self, todo: list[str]) -> None:
        """Fetch these packs all or nothing: every listing's signer is checked before any download;
        each pack is checked whole as its download ends; then the entries the round brings are verified;
        only then are the packs adopted."""
        legacy = [pack for pack in todo if listing.is_bundle(self.listings[pack])]
        packs = [pack for pack in todo if pack not in legacy]
        for pack in packs:
            if not self.untrusted and not self.trusted(pack):
                raise UsageError(f"remote pack {pack}: {untrusted_why(self.signer(pack), 'pull')}")
            size, signed = self.files.get(f"{PACKS}{pack}.pack"), self.listings[pack]["size"]
            if size != signed:  # nothing bigger than its signed listing says is downloaded
                raise UsageError(f"remote pack {pack}: the remote holds {'no such pack' if size is None else size}"
                                 f"{'' if size is None else ' bytes'}, its listing says {signed} bytes")
        if legacy:
            self._fetch_bundles(legacy)
        with tempfile.TemporaryDirectory(dir=self.store.tmp_dir, prefix="pull-") as tmp:
            records = {bytes.fromhex(record[len(PREFIX):]) for pack in self.pending()
                       for record in self.listings[pack]["actions"].values()}  # the entries' checks read them
            checked = self._download_checked(packs, Path(tmp), records)
            unkept: dict[str, ReceivedPack] = {}  # where the checks read the records not kept decoded
            for path, blobs in checked.values():
                spans = {}
                for blob in blobs:
                    if blob.id in records and blob.id.hex() not in self.kept.contents:
                        spans[blob.id.hex()] = blob
                unkept.update(dict.fromkeys(spans, ReceivedPack(path, spans)))
            self._check_entries(packs, unkept)
            with self.store.batch():  # the objects copied, named at once at its end
                for pack in packs:
                    path, blobs = checked[pack]
                    document = set(_digests("".join(_document(self.listings[pack]))))  # the entries' copy
                    blobs = [blob for blob in blobs if blob.id not in document] if document else blobs
                    if self.trusted(pack) and self.files[f"{PACKS}{pack}.pack"] >= ADOPT_BYTES:
                        new, size = adopt_pack(self.store, path, pack[:32], blobs, self.present)  # as it is
                    else:  # (kept apart, or small: a pack of its own would cost a file for little)
                        new, size = copy_objects(self.store, path, blobs, self.present)
                    self.present.update(self.digests[pack])
                    self.received.add(pack)
                    self.report.packs += 1
                    self.report.objects += new
                    self.report.bytes += size

    def _download_checked(self, packs: list[str], work: Path, keep: set[bytes]
                          ) -> dict[str, tuple[Path, list[Blob]]]:
        """Download in parallel; check each pack in this thread as soon as it has arrived (the content
        of the objects in `keep` kept decoded, as far as there is room)."""
        checked = {}
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = {pool.submit(self.backend.download, f"{PACKS}{pack}.pack", work / f"{pack}.pack",
                                   self.files[f"{PACKS}{pack}.pack"]): pack for pack in packs}
            try:
                for future in as_completed(futures):
                    future.result()
                    pack = futures[future]
                    path = work / f"{pack}.pack"
                    blobs = verify_pack(path, pack, f"remote pack {pack}", keep, self.kept)
                    listed = {*self.digests[pack], *_digests("".join(_document(self.listings[pack])))}
                    if {blob.id for blob in blobs} != listed:
                        raise PackCheckError(f"remote pack {pack}: holds other objects than its listing names")
                    checked[pack] = (path, blobs)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return checked

    def _check_entries(self, arriving: list[str], unkept: dict[str, ReceivedPack]) -> None:
        """Verify the entries this store can now take, whose record and input document are here or
        arriving: every entry of the packs arriving (those of untrusted signers are kept apart), and
        those of other trusted listings not settled before for keys without an entry here. One that
        does not verify refuses the pull. (Adding them keeps the store's own entries: add_entries.)
        `unkept`: the arriving records not kept decoded, by hex id, and the pack to read each from."""
        store = self.store
        store.runtime.index.refresh()
        contents = ArchiveContents(store, unkept, {h for pack in arriving for h in self.listings[pack]["objects"]},
                                   self.kept.contents)
        for pack in self.pending():
            doc = self.listings[pack]
            if listing.is_bundle(doc):  # (imported whole)
                continue
            trusted = self.trusted(pack)
            if not trusted and pack not in arriving:
                continue
            into = self.entries if trusted else self.apart.setdefault(pack, {})
            for key, record in sorted(doc["actions"].items()):
                if key in into and not takes_over(contents.read_record, into[key], record):
                    continue  # (another listing's record for the key: a reusable one is kept)
                if not (contents.has(record) and contents.has(key)):
                    self.incomplete.add(pack)  # not fetched yet (a narrowed pull): a later pull takes it
                    continue
                if pack not in arriving and self._kept_here(key, record, contents):
                    continue  # (those of an arriving pack are all checked: a pack is refused whole)
                why = contents.entry_problem(key, record)
                if why is not None:
                    raise UsageError(f"remote pack {pack}: action-cache entry {key[:23]}...: {why}")
                into[key] = record

    def _kept_here(self, key: str, record: str, contents: ArchiveContents) -> bool:
        """Does this store's own entry for `key` stay whatever the remote says (`record`): it has one, the
        same or a reusable one (one that is not, an infrastructure failure, gives way to a result:
        add_entries). Only records that differ are read."""
        own = get_action_record_id(self.store, key, look_again=False)
        return own is not None and not takes_over(contents.read_record, own, record)

    def _fetch_bundles(self, bundles: list[str]) -> None:
        """Bundles pushed by an older claw: each is downloaded and its signer checked before any is
        imported, then imported whole (store/archive.py)."""
        with tempfile.TemporaryDirectory(dir=self.store.tmp_dir, prefix="pull-") as tmp:
            with ThreadPoolExecutor(max_workers=WORKERS) as pool:
                targets = list(pool.map(lambda b: self._download_bundle(b, Path(tmp)), bundles))
            for bundle, target in zip(bundles, targets, strict=True):
                try:
                    imported = import_archive(self.store, target, untrusted=self.untrusted)
                finally:
                    target.unlink(missing_ok=True)
                if imported.summary.digest != PREFIX + bundle:
                    raise UsageError(f"remote bundle {bundle}: its bytes hash to {imported.summary.digest}, "
                                     "not its name")
                self.report.packs += 1
                self.report.objects += imported.new_objects
                self.report.bytes += imported.summary.size
                if imported.kept_apart is not None:
                    self.report.kept_apart.add(imported.signer or UNSIGNED)
                else:
                    self._remember(bundle)

    def _download_bundle(self, bundle: str, work: Path) -> Path:
        target = work / f"{bundle}.claw"
        name = f"{PACKS}{bundle}.claw"
        self.backend.download(name, target, self.files.get(name))  # (no more than listed: it may have grown)
        signer = archive_signer(target)
        if not self.untrusted and not self.trusts(signer):
            raise UsageError(f"remote bundle {bundle}: {untrusted_why(signer, 'pull')}")
        return target

    def _remember(self, pack: str) -> None:
        if pack in self.done:  # (pull_for_plan settles its received packs again at every round)
            return
        self.done.add(pack)
        with open(self.fetched_file, "a", encoding="ascii") as fh:
            fh.write(pack + "\n")

    def add_entries(self, settled: set[str]) -> None:
        """Add the verified entries (the store's own, set meanwhile, win), keep the untrusted ones apart,
        and remember the listings in `settled` (trusted ones only) as done."""
        store = self.store
        store.runtime.index.refresh()
        now = time.time_ns()
        fresh = {}
        for key, record in self.entries.items():  # (ids checked as the listings were read)
            digest, record_digest = bytes.fromhex(key[len(PREFIX):]), bytes.fromhex(record[len(PREFIX):])
            own = entry_record(store, digest, look_again=False)
            if own is None or takes_over(store.get_bytes, PREFIX + own.hex(), record):
                fresh[digest] = (record_digest, now)
        set_entries(store, fresh)
        for pack, actions in sorted(self.apart.items()):
            keep_apart(store, self.signers[pack], actions, {}, PREFIX + pack)
            self.report.kept_apart.add(self.signers[pack] or UNSIGNED)
        for pack in sorted(settled - self.incomplete):
            if not listing.is_bundle(self.listings[pack]) and self.trusted(pack):
                self._remember(pack)


def pull(store: Store, remote: Remote, ref_names: Iterable[str] | None = None, untrusted: bool = False
         ) -> SyncReport:
    """Fetch the packs this store lacks (verified, signed by a trusted key), then move the refs.

    `untrusted`: packs signed by a key the user does not trust are kept apart (trust/apart.py) and,
    if any was, so are the remote's refs; such packs are not remembered as fetched, so a later pull
    without --untrusted refuses them again instead of moving refs onto them."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pulled from", backend.description)
    with store.lease(f"pull {remote.name}"):
        wanted = None if ref_names is None else set(ref_names)
        remote_refs = _remote_refs(backend, wanted)
        report.kept_apart |= _check_ref_signers(store, backend, remote_refs, untrusted)
        state = _Pull(store, remote, backend, untrusted, report)
        if wanted is None:
            state.fetch([pack for pack in state.pending() if state.lacking(pack)])
            settled = set(state.pending())  # fetched, or holding nothing this store lacks
        else:
            _fetch_closure(state, remote_refs.values())
            settled = state.received
        state.add_entries(settled)
        if report.kept_apart:
            _keep_refs_apart(store, remote_refs, sorted(report.kept_apart))
            return report
        for name, value in sorted(remote_refs.items()):
            _pull_ref(store, remote, name, value, report)
    return report


def pull_for_plan(store: Store, remote: Remote, head_ref: str, unbuilt_keys: Callable[[], set[str]]) -> SyncReport:
    """What a build needs from the remote (`claw build --remote`): its campaign's head, if the remote has
    one this store does not, and every result the remote holds for an action key the build would
    execute (`unbuilt_keys()`, a whole planning of the campaign), wherever it was pushed from (another
    campaign with the same runs, say), what this store lost of one included. The head's closure comes
    first, so a campaign pulled whole is planned once; a head this store holds is not walked: the
    planning tells what of it is missing. `unbuilt_keys()` is asked again after each round that
    fetched something: a check's or a judgement's key is known only once the run it reads is here, a
    result's once its checks and judgements are (runs, then checks, then judgements, then results).
    Each round fetches only the packs holding what its keys reach, verified as any pull's."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pulled from", backend.description)
    with store.lease(f"pull {remote.name}"):
        remote_refs = _remote_refs(backend, {head_ref}, required=False)
        _check_ref_signers(store, backend, remote_refs, untrusted=False)
        state = _Pull(store, remote, backend, False, report)
        records: dict[str, set[str]] = {}  # key -> the records the remote's listings give it
        for doc in state.listings.values():
            for key, record in doc["actions"].items():
                records.setdefault(key, set()).add(record)
        head = remote_refs.get(head_ref)
        if head is not None and not (store.get_ref(head_ref) == head and store.has(head)):
            _fetch_closure(state, [head])
            state.add_entries(state.received)
        asked: set[str] = set()
        while True:
            store.runtime.index.refresh()
            wanted = {key for key in unbuilt_keys() - asked if key in records}
            if not wanted:
                break
            asked |= wanted
            received = len(state.received)
            _fetch_closure(state, [record for key in sorted(wanted) for record in records[key]])
            state.add_entries(state.received)  # (its entries reach this process's index as they are written)
            if len(state.received) == received:
                break  # nothing came: planning again would name the same keys
        for name, value in sorted(remote_refs.items()):
            _pull_ref(store, remote, name, value, report)
    return report


def _keep_refs_apart(store: Store, refs: dict[str, str], signers: list[str]) -> None:
    """The remote's refs, when some of what they name came from untrusted signers: kept apart with the
    entries, moved in by the first build after every one of those signers is trusted."""
    keep_apart(store, signers[0] if len(signers) == 1 else None, {},
               {name: value for name, value in refs.items() if store.has(value)}, None, signers)


def _fetch_closure(state: _Pull, roots: Iterable[str]) -> None:
    """A narrowed pull fetches only the packs holding what its roots (heads, records) reach: walk the
    closure in the store, fetch the packs listing what is missing, walk again (a head names its
    records, records their outputs, trees their files: a few rounds). Packs an earlier pull fetched
    are among them: what this store lost since (a bad disk, fsck --repair) comes again."""
    roots = list(roots)
    listed = {pack: set(doc["objects"]) for pack, doc in state.listings.items()}
    while listed:
        reach = Reach(state.store)
        reach.mark(roots)
        missing = set(reach.missing)  # hex ids
        todo = sorted(pack for pack, ids in listed.items() if ids & missing)
        if not todo:
            return  # what is still missing is in no pack (an interrupted push): _pull_ref says so
        state.fetch(todo)
        for pack in todo:
            del listed[pack]


def _remote_refs(backend: Backend, wanted: set[str] | None, required: bool = True) -> dict[str, str]:
    """The remote's shared refs (only those `wanted`, if given: each must be there when `required`)."""
    refs = {}
    for path in backend.list(REFS):
        name = path[len(REFS):]
        if not name.startswith(SHARED_REFS) or (wanted is not None and name not in wanted):
            continue
        current = backend.read_ref(path)
        if current is not None and is_oid(current.value):
            refs[name] = current.value
    if wanted and required:
        missing = sorted(wanted - set(refs))
        if missing:
            raise UsageError(f"the remote has no {', '.join(missing)}")
    return refs


def _pull_ref(store: Store, remote: Remote, name: str, value: str, report: SyncReport) -> None:
    if not store.has(value):
        report.refs_kept[name] = f"remote head {value} was not in any pack (an interrupted push?)"
        return
    local = store.get_ref(name)
    seen = store.get_ref(_tracking(remote, name))
    if local == value:
        pass
    elif local is None or local == seen:
        store.set_ref(name, value, expected=local)
        report.refs_moved.append(name)
    else:
        report.refs_kept[name] = ("both sides changed it: kept this store's head; the remote's results are "
                                  "here now, so `claw build` reuses them, then push")
    store.set_ref(_tracking(remote, name), value)
