"""`claw pull` and the pulls of `claw build --remote`: fetch the packs this store lacks, verified, then the entries,
then the refs; nothing moves before its signer is checked. The order and its reasons: docs/remote.md (Details by
module)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager, nullcontext
from itertools import islice
from pathlib import Path
from typing import Any

from clawstore.errors import StoreError, UsageError
from clawstore.host.scratch import writer_scratch_dir
from clawstore.remote import listing, refsign
from clawstore.remote.backends import ONE_GET_MAX, Backend, open_backend
from clawstore.remote.config import Remote
from clawstore.remote.downloads import Downloads
from clawstore.remote.progress import TransferProgress, TransferStopped
from clawstore.remote.sync import (
    PACKS,
    REFS,
    SHARED_REFS,
    UNSIGNED,
    WORKERS,
    PackIds,
    SyncReport,
    cache_dir,
    hex_digests,
    listing_name,
    read_listing,
    read_listings,
    remote_files,
    remote_packs,
    seen_there,
    size_differs,
    swapping,
    tracking_ref,
    unlisted_packs,
)
from clawstore.store import PackCheckError, RefConflict, Transfer
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.face import (
    ArrivingContents,
    archive_signer,
    arriving_contents,
    import_archive,
    record_checker,
    untrusted_why,
    user_trusts,
)

SERIAL_BYTES = ONE_GET_MAX  # packs bigger than this download one at a time (S3: each in parallel parts)
# Packs downloading, or arrived and waiting, beyond the one being checked: so the check of one overlaps the transfer
# of the next, and a pull holds at most AHEAD + 1 packs it has not checked (on disk; in memory only a checked pack's
# kept records, as before).
AHEAD = 6
# Of those, downloading at once: two fill the link (one GET alone moves ~3/4 of it), and more would share it further,
# each arriving later (the checks wait for whole packs). A download starts as soon as one ends, not when the pulling
# thread next looks: the link keeps busy while a long check runs. Until a round's first pack has arrived, one at a
# time: there is nothing to check before it, and a second download would only delay it.
STREAMS = 2
# Packs this big download alone, one after another (the largest first), each in STREAMS ranges at once (which fill
# the link as STREAMS packs would): each arrives sooner and is checked while the next downloads, and the last bytes to
# arrive are a small pack's, whose check is short (sharing the link, the second largest arrived last, and its check,
# ~90 ms, followed the last byte).
ALONE_BYTES = 1 << 20


def _remembered(path: Path) -> set[str]:
    """The names a pull's cache file of remotes/<name>/ lists (listings it is done with)."""
    return set(path.read_text(encoding="ascii").split()) if path.exists() else set()


def _check_ref_signers(store: Transfer, backend: Backend, refs: dict[str, str], untrusted: bool) -> set[str]:
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


class _Turns:
    """Downloads let through `width` at a time in the order they were asked for (a ticket each, taken when submitted:
    a semaphore's waiters, threads of two pools, are let through in no set order); a ticket taken `alone`, with no
    other beside it."""

    def __init__(self, width: int):
        self.width, self._asked, self._next, self._running, self._closed = width, 0, 0, 0, False
        self._alone: set[int] = set()  # tickets that go alone: none other runs beside them
        self._alone_now = 0  # of those, running (0 or 1)
        self._changed = threading.Condition()

    def set_width(self, width: int) -> None:
        with self._changed:
            self.width = width
            self._changed.notify_all()

    def ticket(self, alone: bool = False) -> int:
        """The next ticket; `alone`: its download runs with no other beside it."""
        with self._changed:
            self._asked += 1
            if alone:
                self._alone.add(self._asked - 1)
            return self._asked - 1

    def _free(self, ticket: int) -> bool:
        if self._closed:
            return True
        if self._next != ticket:
            return False
        return self._running == 0 if ticket in self._alone else self._running < self.width and not self._alone_now

    @contextmanager
    def turn(self, ticket: int) -> Iterator[None]:
        """Wait for this ticket's turn (or `close`); the next ticket's may come once it has started."""
        with self._changed:
            self._changed.wait_for(lambda: self._free(ticket))
            alone = ticket in self._alone
            self._alone.discard(ticket)
            self._next, self._running = max(self._next, ticket + 1), self._running + 1
            self._alone_now += alone
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._alone_now -= alone
                self._changed.notify_all()

    def close(self) -> None:
        """Let every ticket waiting through at once (the pull stopped: each ends before it downloads)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class _Pull:
    """One pull's state: what this store has, the listings, and the entries verified so far."""

    def __init__(self, store: Transfer, remote: Remote, backend: Backend, untrusted: bool, report: SyncReport,
                 progress: TransferProgress | None = None, work: Path | None = None):
        """`work`: the scratch directory of a full pull's packs, whose biggest one starts downloading as soon as its
        own listing is read and checked, while the others are read (`_start_biggest`)."""
        self.store, self.remote, self.backend, self.untrusted, self.report = store, remote, backend, untrusted, report
        self.progress = progress or TransferProgress()
        self.fetched_file = cache_dir(store, remote) / "fetched"
        self.downloads = Downloads(store.layout.incoming(remote.name))
        self.done = _remembered(self.fetched_file)
        self.signers: dict[str, str | None] = {}
        self._trust: dict[str | None, bool] = {}
        self.serial: ThreadPoolExecutor | None = None  # (the big packs' downloads, one at a time, if started early)
        self.turns = _Turns(1)  # (downloads at once, in the order asked: STREAMS once a round's first pack arrived)
        self.early: dict[str, Future[bool]] = {}  # pack -> its download, started before the listings were all read
        self.files = remote_files(remote, backend)
        try:
            read = self._start_biggest(work) if work is not None else {}
            self.listings = read_listings(store, remote, backend, self.files, read)
        except BaseException:
            self.close()
            raise
        self.segments = store.index_segments()  # (before `present`: one gone since, a gc may have deleted some of it)
        self.present = store.object_digests()
        self.ids = PackIds(store, remote, self.listings)  # (format 4: known once its pack or table is here)
        self.incoming = store.receive()  # the packs fetched, checked, until they are taken in
        self.received: set[str] = set()  # packs fetched by this pull
        self.entries: dict[str, str] = {}  # verified entries of trusted listings, to add
        self.added: dict[str, str] = {}  # those of them set with the packs that brought their records (`fetch`)
        self.arriving: set[str] = set()  # ids the packs of this round's fetch name (whole), as each is checked
        self.apart: dict[str, dict[str, str]] = {}  # pack -> its verified entries, kept apart (untrusted)
        self.incomplete: set[str] = set()  # listings with entries whose record or input is not here
        self.naming: dict[str, list[tuple[str, str]]] = {}  # hex record -> the (key, record) entries naming it
        self.vetted: dict[tuple[str, str], str | None] = {}  # (key, record) -> face.record_checker, as it arrived
        self.sound: set[tuple[str, str]] = set()  # those of them whose record said nothing against the entry
        self.outputs: list[Any] = []  # the outputs the records vetted name (`_vet`), one list for a check in C
        self.misnamed = False  # a record vetted named its outputs wrongly
        self.records: set[bytes] = set()  # the records the pending listings' entries name (digests)

    def _start_biggest(self, work: Path) -> dict[str, listing.Listing]:
        """Start the download of the remote's biggest pack into `work` while the other listings are read (the link
        idle otherwise): only one a full pull fetches anyway, whose listing is read first and checked as `fetch`
        checks it (signed by a trusted key, the size it says): a pack of format 4 this store has never seen, not
        remembered as fetched. Its check waits for every listing, as any pack's (`_download_checked`). Returns the
        listing it read ({pack: listing}; none if none), which is not read again with the others."""
        size = {pack: self.files.get(f"{PACKS}{pack}.pack") for pack in remote_packs(self.files)
                if pack not in self.done}
        sized = [pack for pack, nbytes in size.items() if nbytes is not None]
        if not sized:
            return {}
        pack = max(sized, key=lambda each: (size[each], each))
        doc = read_listing(self.store, self.remote, self.backend, pack, self.files[listing_name(pack)])
        read = {pack: doc}
        try:
            trusted = self.trusted_doc(pack, doc)
        except UsageError:  # (a listing whose signature does not verify: refused where every listing is checked)
            return read
        if not trusted or doc.is_bundle or doc.size != size[pack] or PackIds(
                self.store, self.remote, {pack: doc}).get(pack) is not None:
            return read  # (fetched or not, as the listings decide)
        self.serial = ThreadPoolExecutor(max_workers=1)
        alone = size[pack] >= ALONE_BYTES
        self.early[pack] = self.serial.submit(self._obtain_in_turn, self.turns.ticket(alone), pack,
                                              work / f"{pack}.pack", size[pack], alone)
        return read

    def trusted_doc(self, pack: str, doc: listing.Listing) -> bool:
        """Is `doc`, the pack's listing, signed by a key the user trusts (its signer remembered)?"""
        if pack not in self.signers:
            self.signers[pack] = listing.signer(doc, pack)
        return self.trusts(self.signers[pack])

    def close(self) -> None:
        """Stop and wait for a download started early that no fetch took over (the pull failed before)."""
        if self.serial is None:
            return
        self.progress.stop()  # (the download ends at its next chunk)
        self.turns.close()
        self.serial.shutdown(wait=True, cancel_futures=True)
        self.serial, self.early = None, {}

    def pending(self) -> list[str]:
        return [pack for pack in self.listings if pack not in self.done]

    def lacking(self, pack: str) -> bool:
        """Does this store lack something of the pack: an object, or (a listing of entries alone) its
        entries, which only a fetch checks and keeps apart when the signer is not trusted. A pack of format 4 this
        store has not seen (its table not known here) is fetched: a full pull of a pack downloads it anyway. A listing
        of entries this store holds each of already (one's own push's) lacks nothing: a pull right after a push fetched
        its entries' pack again."""
        doc, ids = self.listings[pack], self.ids.get(pack)
        if ids is None or not self.present.issuperset(ids):
            return True
        return not doc.count and bool(doc.actions) and not self._entries_here(doc.actions)

    def _entries_here(self, actions: dict[str, str]) -> bool:
        """Does this store hold each of these entries, to the same record?"""
        own = self.store.get_action_record_id
        return all(own(key, look_again=False) == record for key, record in actions.items())

    def signer(self, pack: str) -> str | None:
        self.trusted(pack)  # (reads and remembers it)
        return self.signers[pack]

    def trusted(self, pack: str) -> bool:
        """Is the pack's listing signed by a key the user trusts?"""
        return self.trusted_doc(pack, self.listings[pack])

    def trusts(self, signer: str | None) -> bool:
        """Does the user trust this signer (the trust list read once per signer and pull)?"""
        if signer not in self._trust:
            self._trust[signer] = user_trusts(signer)
        return self._trust[signer]

    def fetch(self, todo: list[str], work: Path | None = None) -> None:
        """Fetch these packs all or nothing: every listing's signer is checked before any download (the one started
        early, `_start_biggest`, had its own checked first); each pack is checked whole as its download ends; then
        the entries the round brings are verified; only then are the packs adopted. `work`: the scratch directory
        the pull made (a new one if None)."""
        legacy = [pack for pack in todo if self.listings[pack].is_bundle]
        packs = [pack for pack in todo if pack not in legacy]
        for pack in packs:
            if not self.untrusted and not self.trusted(pack):
                raise UsageError(f"remote pack {pack}: {untrusted_why(self.signer(pack), 'pull')}")
            size, signed = self.files.get(f"{PACKS}{pack}.pack"), self.listings[pack].size
            if size != signed:  # nothing bigger than its signed listing says is downloaded
                raise size_differs(pack, size, signed)
        self.progress.plan(len(todo), sum(self.files.get(f"{PACKS}{pack}.pack", 0) for pack in packs)
                           + sum(self.files.get(f"{PACKS}{bundle}.claw", 0) for bundle in legacy))
        if legacy:
            self._fetch_bundles(legacy)
        self.arriving = set()
        with nullcontext(work) if work is not None else writer_scratch_dir(self.store.tmp_dir, "pull") as tmp:
            try:
                self._download_checked(packs, tmp)
                self.progress.then("checking the entries")
                contents = self._check_entries(packs, self.records)
                self.progress.then("adding them to the store")
                for pack in packs:
                    new, size = self.incoming.take(pack, self.present, self._document(pack),
                                                   apart=not self.trusted(pack))
                    self.present.update(self.ids.known[pack])
                    self.report.objects += new
                    self.report.bytes += size
                # A pack this pull fetched already came again (`_keep_arrived_heads`: a gc meanwhile deleted objects it
                # had left out as here): one pack, said to have crossed twice. Before session 78 it counted as two.
                again = [pack for pack in packs if pack in self.received]
                self.report.again += len(again)
                self.report.again_bytes += sum(self.files.get(f"{PACKS}{pack}.pack", 0) for pack in again)
                # (one rename each, one index segment naming them all and setting the entries verified so far)
                new = self._not_added()
                self.incoming.adopt(new, contents.takes_over)
                self.added.update(new)
                self.downloads.forget(packs)
                self.received.update(packs)
                self.report.packs += len(packs) - len(again)
            finally:
                self.incoming.close()

    def _document(self, pack: str) -> set[bytes]:
        """The pack's copy of the document naming its listing's entries (never taken in)."""
        return set(hex_digests("".join(self.listings[pack].document_ids)))

    def _download_checked(self, packs: list[str], work: Path) -> None:
        """Download (big packs one at a time, the others in parallel; at most STREAMS at once, the largest first, those
        of ALONE_BYTES or more alone, each in STREAMS ranges), at most AHEAD packs beyond the one being checked: each is
        checked in this thread as soon as it has arrived (the first started of those arrived), while the next ones
        download (the content of the records the listings' entries name kept decoded, as far as there is room):
        `self.incoming` holds them. A small pack's objects are copied right after its check into a pack of the pull's
        own in `work` (Incoming.copy_in). What the checks need of the listings is made while the first packs
        download."""
        size = {pack: self.files[f"{PACKS}{pack}.pack"] for pack in packs}
        # (one started early is the largest: it goes on first. A pack an interrupted pull downloaded whole is not
        # queued behind the big downloads.)
        queue = deque(sorted(packs, key=lambda pack: (pack not in self.early, -size[pack])))
        running: dict[Future[bool], str] = {}  # (in the order started)
        serial, early = self.serial or ThreadPoolExecutor(max_workers=1), self.early
        self.serial, self.early = None, {}
        with ThreadPoolExecutor(max_workers=WORKERS) as pool, serial:
            def start_more() -> None:
                while queue and len(running) < AHEAD:
                    pack = queue.popleft()
                    if pack in early:
                        running[early.pop(pack)] = pack
                        continue
                    big = size[pack] > SERIAL_BYTES and not self.downloads.has(pack, size[pack])
                    executor = serial if big else pool
                    alone = size[pack] >= ALONE_BYTES and not self.downloads.has(pack, size[pack])
                    running[executor.submit(self._obtain_in_turn, self.turns.ticket(alone), pack, work / f"{pack}.pack",
                                            size[pack], alone)] = pack
            try:
                start_more()
                self.records = keep = self._records()  # (the entries' checks read them)
                while running:
                    arrived = wait(running, return_when=FIRST_COMPLETED).done
                    self.turns.set_width(STREAMS)
                    future = next(each for each in running if each in arrived)
                    pack = running.pop(future)
                    self.report.resumed += future.result()
                    start_more()  # (the next ones download while this one is checked and copied)
                    seen = len(self.incoming.decoded)
                    self._check(pack, work / f"{pack}.pack", keep)
                    self._vet(seen)
                    if self.incoming.copy_in(pack, self.present, self._document(pack), apart=not self.trusted(pack)):
                        self.present.update(self.ids.known[pack])  # (a later pack's copy of them is not copied)
                    self.progress.pack_done()
            except BaseException:
                self.progress.stop()
                self.turns.close()  # (one waiting for its turn ends before it starts)
                for future in [*running, *early.values()]:
                    future.cancel()
                raise
            finally:
                self.turns.set_width(1)  # (the next round's first pack alone again: a narrowed pull's)

    def _check(self, pack: str, path: Path, keep: set[bytes]) -> None:
        """Check a pack that has arrived whole: every object hashes to its name, and it holds what its listing names."""
        try:
            table = self.incoming.check(path, pack, f"remote pack {pack}", keep)
            listed = self.listings[pack].objects is not None
            try:  # (format 4: the pack's table names its objects; the listing, that table: by its BLAKE3)
                ids = self.ids.get(pack) if listed else self.ids.learn(pack, table, self.incoming.object_ids(pack))
            except listing.ListingError:
                ids = None
            # (format 4: `ids` are read from the very table the objects were checked against, the document left out
            # once learn found it there: only ids listed apart from the pack are compared with it)
            if ids is None or listed and self.incoming.held(pack) != {
                    *ids, *hex_digests("".join(self.listings[pack].document_ids))}:
                raise PackCheckError(f"remote pack {pack}: holds other objects than its listing names")
            # (for the entry checks, whole as the listings name them: made while the next packs download)
            self.arriving.update([PREFIX + hexdigest for hexdigest in map(bytes.hex, ids)])
        except PackCheckError:
            self.downloads.forget([pack])  # (the remote's bytes: downloading them again changes nothing)
            raise

    def _records(self) -> set[bytes]:
        """The digests of the records the pending listings' entries name (`naming` says which entries, by hex)."""
        self.naming, self.vetted, self.sound, self.outputs, self.misnamed = {}, {}, set(), [], False
        for pack in self.pending():
            for key, record in self.listings[pack].actions.items():
                self.naming.setdefault(record[len(PREFIX):], []).append((key, record))
        return set(map(bytes.fromhex, self.naming))

    def _vet(self, seen: int) -> None:
        """Ask what the records the pack just checked kept decoded (those after the first `seen`) say of the entries
        naming them, while the next packs download: the entry checks after the last pack then read and parse only
        the last pack's records (the input document's presence is still checked there, with every pack at hand)."""
        decoded, problem, vetted, sound = self.incoming.decoded, record_checker(), self.vetted, self.sound
        for hexdigest in islice(decoded, seen, None):
            for entry in self.naming.get(hexdigest, ()):
                why, outputs = problem(entry[0], decoded[hexdigest])
                vetted[entry] = why
                if why is None:
                    sound.add(entry)
                if outputs is None:
                    self.misnamed = True
                else:
                    self.outputs += outputs

    def _obtain_in_turn(self, ticket: int, pack: str, path: Path, size: int, alone: bool = False) -> bool:
        """`_obtain` in its turn (`ticket`: _Turns); nothing is fetched once the pull is stopped (TransferStopped)."""
        with self.turns.turn(ticket):
            if self.progress.stopped:
                raise TransferStopped
            return self._obtain(pack, path, size, alone)

    def _obtain(self, pack: str, path: Path, size: int, alone: bool = False) -> bool:
        """The pack's bytes at `path`: those an interrupted pull downloaded whole, if it left them (True),
        else downloaded (`alone`: in STREAMS ranges at once), and kept until adopted for a pull run again after a
        kill (downloads.py)."""
        if self.downloads.take(pack, size, path):
            self.progress.advance(size)
            return True
        self.backend.download(f"{PACKS}{pack}.pack", path, size, self.progress.advance, parts=STREAMS if alone else 1)
        self.downloads.keep(pack, path)
        return False

    def _check_entries(self, arriving: list[str], records: set[bytes]) -> ArrivingContents:
        """Verify the entries this store can now take (record and input document here or arriving): those of the
        arriving packs (untrusted signers' kept apart) and unsettled ones of other trusted listings. One that does not
        verify refuses the pull. `records`: the digests of the records the listings name. Returns what they read."""
        store = self.store
        store.refresh()
        contents = arriving_contents(store, self.incoming.unkept(records), self.arriving, self.incoming.decoded,
                                     self.vetted)
        # (every output a record vetted names arriving: normally so, known in C; else the walk asks each entry's)
        try:
            outputs_arriving = not self.misnamed and self.arriving.issuperset(self.outputs)
        except TypeError:  # (a list of outputs holding something unhashable: no record's)
            outputs_arriving = False
        for pack in self.pending():
            doc = self.listings[pack]
            if doc.is_bundle:  # (imported whole)
                continue
            trusted = self.trusted(pack)
            if not trusted and pack not in arriving:
                continue
            into = self.entries if trusted else self.apart.setdefault(pack, {})
            if pack in arriving and self._all_sound(doc.actions, into) and outputs_arriving:
                into.update(sorted(doc.actions.items()))  # (as the walk below would set them, in key order)
                continue
            for key, record in sorted(doc.actions.items()):
                if key in into and not contents.takes_over(into[key], record):
                    continue  # (another listing's record for the key: a reusable one is kept)
                if not (contents.has(record) and contents.has(key)):
                    self.incomplete.add(pack)  # not fetched yet (a narrowed pull): a later pull takes it
                    continue
                if pack not in arriving and self._kept_here(key, record, contents):
                    continue  # (those of an arriving pack are all checked: a pack is refused whole)
                why = contents.entry_problem(key, record)
                if why is not None:
                    raise UsageError(f"remote pack {pack}: action-cache entry {key[:23]}...: {why}")
                if not contents.outputs_at_hand(record):
                    self.incomplete.add(pack)  # (a pack of them not listed, or not fetched yet): as above
                    continue
                into[key] = record
        return contents

    def _all_sound(self, actions: dict[str, str], into: dict[str, str]) -> bool:
        """Does every entry of an arriving pack's listing verify, known without a look-up each (set operations, in C):
        its record vetted sound as it arrived this round (`_vet`: decoded from a pack checked, so arriving), its input
        document arriving, and no other listing's record for its key. False: they are walked one by one (which names
        the one that fails)."""
        return (into.keys().isdisjoint(actions) and self.arriving.issuperset(actions)
                and self.sound.issuperset(actions.items()))

    def _kept_here(self, key: str, record: str, contents: ArrivingContents) -> bool:
        """Does this store's own entry for `key` stay whatever the remote says (`record`): it has one, the
        same or a reusable one (one that is not, an infrastructure failure, gives way to a result:
        add_entries). Only records that differ are read."""
        own = self.store.get_action_record_id(key, look_again=False)
        return own is not None and not contents.takes_over(own, record)

    def _fetch_bundles(self, bundles: list[str]) -> None:
        """Bundles pushed by an older claw: each is downloaded and its signer checked before any is
        imported, then imported whole (store/services/archive_import.py)."""
        with writer_scratch_dir(self.store.tmp_dir, "pull") as tmp:
            with ThreadPoolExecutor(max_workers=WORKERS) as pool:
                targets = list(pool.map(lambda b: self._download_bundle(b, tmp), bundles))
            for bundle, target in zip(bundles, targets, strict=True):
                try:
                    imported = import_archive(self.store, target, untrusted=self.untrusted)
                finally:
                    target.unlink(missing_ok=True)
                if imported.summary.digest != PREFIX + bundle:
                    raise UsageError(f"remote bundle {bundle}: its bytes hash to {imported.summary.digest}, "
                                     "not its name")
                self.report.packs += 1
                self.progress.pack_done()
                self.report.objects += imported.new_objects
                self.report.bytes += imported.summary.size
                if imported.kept_apart is not None:
                    self.report.kept_apart.add(imported.signer or UNSIGNED)
                else:
                    self._remember(bundle)

    def _download_bundle(self, bundle: str, work: Path) -> Path:
        target = work / f"{bundle}.claw"
        name = f"{PACKS}{bundle}.claw"
        self.backend.download(name, target, self.files.get(name), self.progress.advance)  # (no more than listed)
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

    def _not_added(self) -> dict[str, str]:
        """The verified entries not set with the packs that brought their records (`added`): when that is all of them
        or none (a full pull's commit, then its `add_entries`), found by a copy or a comparison in C, not a look-up
        each (`added` holds only entries of `entries`, which never loses one)."""
        entries, added = self.entries, self.added
        if not added:
            return dict(entries)
        if added == entries:
            return {}
        return {key: record for key, record in entries.items() if added.get(key) != record}

    def add_entries(self, settled: set[str]) -> None:
        """Add the verified entries (the store's own, set meanwhile, win), keep the untrusted ones apart,
        and remember the listings in `settled` (trusted ones only) as done."""
        store = self.store
        # (ids checked as the listings were read; those set with their packs' objects are not set again)
        store.add_entries(self._not_added())
        for pack, actions in sorted(self.apart.items()):
            store.keep_apart(self.signers[pack], actions, {}, PREFIX + pack)
            self.report.kept_apart.add(self.signers[pack] or UNSIGNED)
        for pack in sorted(settled - self.incomplete):
            if not self.listings[pack].is_bundle and self.trusted(pack):
                self._remember(pack)


def pull(store: Transfer, remote: Remote, ref_names: Iterable[str] | None = None, untrusted: bool = False,
         progress: TransferProgress | None = None, keep: KeepPulled | None = None) -> SyncReport:
    """Fetch the packs this store lacks (verified, signed by a trusted key), then move the refs.

    `untrusted`: keep packs of untrusted signers, and then the refs, apart (not remembered as fetched, so a later pull
    refuses them again). `progress`: told of packs planned and bytes arriving. `keep`: given what listings marked as a
    pusher's killed builds' results (`_keep_unadopted`), keeps them from gc; the ref it set is `report.kept_by`."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pulled from", backend.description)
    with store.lease(f"pull {remote.name}"), ExitStack() as kept:
        wanted = None if ref_names is None else set(ref_names)
        remote_refs = _remote_refs(backend, wanted, skipped=report.refs_skipped)
        report.kept_apart |= _check_ref_signers(store, backend, remote_refs, untrusted)
        present = _keep_present_heads(store, remote_refs.values(), kept)
        if wanted is None:
            with writer_scratch_dir(store.tmp_dir, "pull") as work:
                state = _Pull(store, remote, backend, untrusted, report, progress, work)
                try:
                    if not (remote_refs or report.refs_skipped or state.files):
                        # An S3 prefix nobody pushed to (a typo) pulled nothing and said "0 pack(s)", as if the team
                        # had pushed nothing: a directory not there is refused the same way (backends.check_location).
                        raise UsageError(f"remote {backend.description}: nothing was ever pushed there (no ref, no "
                                         "pack); check the URL")
                    state.fetch([pack for pack in state.pending() if state.lacking(pack)], work)
                finally:
                    state.close()
            state.downloads.clear()  # (a pack an earlier pull kept that this one did not need: not wanted)
            settled = set(state.pending())  # fetched, or holding nothing this store lacks
        else:
            state = _Pull(store, remote, backend, untrusted, report, progress)
            _fetch_closure(state, remote_refs.values())
            settled = state.received | _fetch_unadopted(state, _campaigns_of(store, remote_refs))
        state.add_entries(settled)
        walk = _keep_arrived_heads(state, remote_refs.values(), present, kept) or unlisted_packs(state.files)
        if report.kept_apart:
            _keep_refs_apart(store, remote_refs, sorted(report.kept_apart))
            return report
        for name, value in sorted(remote_refs.items()):
            _pull_ref(store, remote, name, value, report, walk)
        if keep is not None:
            report.kept_by = _keep_unadopted(store, state, settled, keep)
    return report


KeepPulled = Callable[[Transfer, dict[str, str]], "str | None"]  # (store, marked entries held here) -> the ref set


def _keep_unadopted(store: Transfer, state: _Pull, settled: set[str], keep: KeepPulled) -> str | None:
    """Keep from gc what the settled listings a push marked `unadopted` (its store's killed builds' results: push.py
    `_unadopted_packs`) name, by `keep` (store/pulled.py: what no head here names, by a ref `imports/pull-<id>`), under
    the pull's lease; the ref, None when nothing is kept. Only the entries this store holds as marked (verified as they
    came, by this pull or an earlier one): a listing of a signer not trusted, or an entry this store's own record won,
    keeps nothing. Before session 77 nothing kept them here: a `claw gc` past its grace period before the build deleted
    them, and the build paid for them again (tests/gc/test_pull_beyond_head.py)."""
    marked: dict[str, str] = {}
    for pack in sorted(settled):
        doc = state.listings[pack]
        if doc.unadopted and state.trusted(pack):
            marked.update(doc.actions)
    if not marked:
        return None
    store.refresh()
    held = store.get_action_record_id
    here = {key: record for key, record in marked.items() if held(key, look_again=False) == record}
    return keep(store, here) if here else None


def pull_for_plan(store: Transfer, remote: Remote, head_ref: str, unbuilt_keys: Callable[[], set[str]]) -> SyncReport:
    """What a build needs from the remote (`claw build --remote`): its campaign's head, if newer, and every result the
    remote holds for an action key the build would execute, fetched in rounds (runs, checks, judgements, results) while
    `unbuilt_keys()` finds more. Details: docs/remote.md (Details by module)."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pulled from", backend.description)
    with store.lease(f"pull {remote.name}"), ExitStack() as kept:
        remote_refs = _remote_refs(backend, {head_ref}, required=False, skipped=report.refs_skipped)
        _check_ref_signers(store, backend, remote_refs, untrusted=False)
        present = _keep_present_heads(store, remote_refs.values(), kept)
        state = _Pull(store, remote, backend, False, report)
        records: dict[str, set[str]] = {}  # key -> the records the remote's listings give it
        for doc in state.listings.values():
            for key, record in doc.actions.items():
                records.setdefault(key, set()).add(record)
        head = remote_refs.get(head_ref)
        if head is not None and not (store.get_ref(head_ref) == head and store.has(head)):
            _fetch_closure(state, [head])
            state.add_entries(state.received)
        asked: set[str] = set()
        while True:
            store.refresh()
            wanted = {key for key in unbuilt_keys() - asked if key in records}
            if not wanted:
                break
            asked |= wanted
            received = len(state.received)
            _fetch_closure(state, [record for key in sorted(wanted) for record in records[key]])
            state.add_entries(state.received)  # (its entries reach this process's index as they are written)
            if len(state.received) == received:
                break  # nothing came: planning again would name the same keys
        walk = _keep_arrived_heads(state, remote_refs.values(), present, kept) or unlisted_packs(state.files)
        for name, value in sorted(remote_refs.items()):
            _pull_ref(store, remote, name, value, report, walk)
    return report


def _keep_present_heads(store: Transfer, heads: Iterable[str], kept: ExitStack) -> set[str]:
    """The remote heads this store holds already kept from a gc until the pull ends (a lease naming each, taken before
    the pull decides what it lacks): it fetches none of their objects, and the pull's own lease keeps only the action
    cache and young packs. Before session 77 a campaign retired here (`claw refs --delete`) and pulled back lost its
    head and parts to a gc meanwhile: "remote head … was not in any pack" (tests/gc/test_writers_beside_gc.py). Returns
    those heads."""
    present = {head for head in set(heads) if store.has(head)}
    for head in sorted(present):
        kept.enter_context(store.keeping(head))
    return present


def _keep_arrived_heads(state: _Pull, heads: Iterable[str], present: set[str], kept: ExitStack) -> bool:
    """The remote heads this pull brought kept from a gc until it ends (a lease naming each), and what a gc meanwhile
    deleted of what they reach fetched again. The pull fetches none of the objects this store held when it decided
    what it lacks, and a head not here may reach some (a campaign retired here that a colleague built on, the head's
    parts they share) in packs older than any lease window: before session 77 a gc before the ref moved deleted them,
    and the pull moved it to a head `claw fsck` found incomplete (tests/gc/test_writers_beside_gc.py). The lease waits
    out a gc sweeping when it is taken, and any later gc keeps what the heads reach. An object the pull took as here
    that the index no longer names says a gc deleted it meanwhile (looked for only when a segment of before the
    decision has been superseded since: by a merge, or a gc): then each head's closure is walked and what it lacks is
    fetched again from the packs listing it. True when that happened: `_pull_ref` walks each head again (what no pack
    lists keeps the ref away)."""
    store = state.store
    arrived = [head for head in sorted(set(heads) - present) if store.has(head)]
    for head in arrived:
        kept.enter_context(store.keeping(head))
    if not arrived or state.segments <= store.index_segments():
        return False
    now = store.object_digests()  # (read afresh)
    if state.present <= now:
        return False  # (a merge: nothing deleted)
    state.present = now  # (what the gc deleted is fetched again, not taken as here)
    _fetch_closure(state, arrived)
    return True


def _keep_refs_apart(store: Transfer, refs: dict[str, str], signers: list[str]) -> None:
    """The remote's refs, when some of what they name came from untrusted signers: kept apart with the
    entries, moved in by the first build after every one of those signers is trusted."""
    store.keep_apart(signers[0] if len(signers) == 1 else None, {},
                     {name: value for name, value in refs.items() if store.has(value)}, None, signers)


def _fetch_closure(state: _Pull, roots: Iterable[str]) -> None:
    """A narrowed pull fetches only the packs holding what its roots reach: walk the closure in the store, fetch the
    packs listing what is missing, walk again. Packs fetched before come again if this store lost some of them."""
    roots = list(roots)
    state.ids.fetch(state.backend, list(state.listings), state.files)  # (format 4: the tables not seen yet)
    listed = {pack: {oid.hex() for oid in state.ids.known[pack]} for pack in state.listings}
    while listed:
        missing = state.store.lacking_in_closure(roots)  # hex ids
        todo = sorted(pack for pack, ids in listed.items() if ids & missing)
        if not todo:
            return  # what is still missing is in no pack (an interrupted push): _pull_ref says so
        state.fetch(todo)
        for pack in todo:
            del listed[pack]


CAMPAIGNS = "campaigns/"  # (a campaign head's ref: its name after it is the campaign's)


def _campaigns_of(store: Transfer, refs: dict[str, str]) -> set[str]:
    """The campaigns a narrowed pull's refs are of: a campaign head's name, a pin's head's log (here once its closure
    came; one not here, or unreadable, names none)."""
    campaigns = set()
    for name, head in refs.items():
        if name.startswith(CAMPAIGNS):
            campaigns.add(name[len(CAMPAIGNS):])
            continue
        try:
            doc = store.get_json(head) if store.has(head) else None
        except (StoreError, ValueError):
            continue
        campaign = doc.get("campaign") if isinstance(doc, dict) else None
        value = campaign.get("id") if isinstance(campaign, dict) else None
        if isinstance(value, str):
            campaigns.add(value)
    return campaigns


def _fetch_unadopted(state: _Pull, campaigns: set[str]) -> set[str]:
    """A narrowed pull also fetches the listings a push marked as what killed builds of its `campaigns` finished
    (`"campaigns"`: push.py `_unadopted_packs`), trusted ones (or all, `untrusted`: kept apart), with the records and
    input documents of their entries and what those reach, which no head names; those listings, to settle (their
    entries added, then kept from gc by `_keep_unadopted`). Before session 77 it fetched the heads' closures alone, and
    the colleague's build paid again for what the campaign's killed build finished (tests/gc/test_pull_beyond_head.py).
    A marked listing naming no campaign (pushed before the field) is for whole pulls only."""
    marked = sorted(pack for pack, doc in state.listings.items()
                    if doc.campaigns & campaigns and (state.untrusted or state.trusted(pack)))
    if not marked:
        return set()
    reached = {oid for pack in marked for entry in state.listings[pack].actions.items() for oid in entry}
    _fetch_closure(state, sorted(reached))
    state.fetch([pack for pack in marked if state.lacking(pack)])
    return set(marked)


def _remote_refs(backend: Backend, wanted: set[str] | None, required: bool = True,
                 skipped: dict[str, str] | None = None) -> dict[str, str]:
    """The remote's shared refs (only those `wanted`, if given: each must be there when `required`). One whose file
    holds no object id, or is a directory (an S3 key ending in '/'), is put in `skipped` with why (it was skipped
    without a word), or refuses the pull if asked for by name."""
    refs = {}
    for path in backend.list(REFS):
        name = path[len(REFS):].rstrip("/")
        if not name.startswith(SHARED_REFS) or (wanted is not None and name not in wanted):
            continue
        if path.endswith("/"):
            why = "is a directory, not a ref"
        else:
            current = backend.read_ref(path)
            if current is None:
                continue  # (removed since it was listed)
            if is_oid(current.value):
                refs[name] = current.value
                continue
            why = "holds no object id"
        if wanted is not None and required:
            raise UsageError(f"remote ref {name} {why}")
        if skipped is not None:
            skipped[name] = why
    if wanted and required:
        missing = sorted(wanted - set(refs))
        if missing:
            raise UsageError(f"the remote has no {', '.join(missing)}")
    return refs


def _pull_ref(store: Transfer, remote: Remote, name: str, value: str, report: SyncReport, walk: bool) -> None:
    """Move `name` to the remote's `value` (and its tracking ref) unless what it reaches is not all here. `walk`: the
    remote holds a pack without a listing, so the head's closure may reach objects no listing names: walked before
    the ref moves (a full walk doubled a pull's CPU: only then). Else every pack listed was fetched and the head
    alone is checked."""
    if not store.has(value):
        report.refs_kept[name] = f"remote head {value} was not in any pack (an interrupted push?)"
        return
    local = store.get_ref(name)
    if local != value and walk:
        # (the head alone was checked: a remote whose listing of a pack was lost moved the ref to a head most of
        # whose records never came)
        lacking = store.lacking_in_closure([value])
        if lacking:
            report.refs_kept[name] = (f"remote head {value} reaches {len(lacking)} object(s) in no pack the remote "
                                      "lists (a listing lost or removed, or an interrupted push?): kept this store's "
                                      "head")
            return
    seen = seen_there(store, remote, name)
    if local == value:
        pass
    elif local is None and value in seen and name.startswith("batches/"):
        # This store let that batch go (collected, or released) since it last saw it there: a push never deletes a
        # remote's ref, so bringing it back made every later pull say it moved a ref (session 77). A campaign head
        # deleted here still comes back (docs/gc-and-archives.md: deleting is local).
        pass
    elif local is None or local in seen:
        try:
            store.set_ref(name, value, expected=local)
            report.refs_moved.append(name)
        except RefConflict as exc:  # moved here meanwhile: another pull of the same value (no conflict), or a build
            if exc.actual != value:
                report.refs_kept[name] = ("changed here during this pull (a build?): kept this store's head; the "
                                          "remote's results are here now, so `claw build` reuses them, then push")
    elif value in seen or value == swapping(store, remote).get(name):
        # Nobody else moved it: the remote holds what this store last saw there, or what its own last push set out to
        # put (a push killed, or failed, after the server applied its swap: no tracking ref written). This store's
        # head is the newer one (before session 76: "both sides changed it").
        report.refs_kept[name] = ("kept this store's newer head (the remote holds what this store last pushed or "
                                  "pulled there); the next push sends it")
    else:
        report.refs_kept[name] = ("both sides changed it: kept this store's head; the remote's results are "
                                  "here now, so `claw build` reuses them, then push")
    store.set_ref(tracking_ref(remote, name), value)
