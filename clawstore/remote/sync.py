"""What `claw push` and `claw pull` share: the remote's layout, its listings as one side reads them, the names, the
report. The layout: docs/remote.md (Details by module)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import UsageError
from clawstore.host.durable import temp_name
from clawstore.remote import listing
from clawstore.remote.backends import Backend
from clawstore.remote.config import Remote
from clawstore.store import face
from clawstore.store.core.ids import is_hex64

if TYPE_CHECKING:
    from clawstore.store import Transfer

PACKS = "packs/"
REFS = "refs/"
SHARED_REFS = ("campaigns/", "pins/", "batches/")  # batches/: provider batches in flight (builder/batch_doc.py)
WORKERS = 8
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
    refs_skipped: dict[str, str] = field(default_factory=dict)  # name -> why the remote's file there is no ref
    kept_apart: set[str] = field(default_factory=set)  # signers of packs kept apart (pull --untrusted)
    resumed: int = 0  # packs a pull took as another (interrupted, or beside it) had downloaded them
    again: int = 0  # packs a pull fetched a second time, a gc meanwhile having deleted what it took as here (pull.py)
    again_bytes: int = 0  # their size: what crossed the link a second time
    kept_by: str | None = None  # the ref `imports/pull-<id>` keeping what a pusher's killed builds finished (pull.py)

    def summary(self) -> str:
        lines = [f"{self.verb} {self.remote}: {self.packs} pack(s), {self.objects} object(s), "
                 f"{self.bytes} bytes; {len(self.refs_moved)} ref(s) moved"
                 + (f"; {self.resumed} pack(s) already downloaded by another pull, not again" if self.resumed else "")
                 + (f"; {self.again} pack(s) fetched again ({self.again_bytes} bytes more): a gc here meanwhile "
                    "deleted objects the pull had found here" if self.again else "")]
        lines += [f"  {name}: {why}" for name, why in sorted(self.refs_kept.items())]
        if self.kept_by is not None:
            lines.append(f"  kept from gc by ref {self.kept_by} (what a killed build there finished, no head names "
                         f"yet; once built, `claw refs --delete {self.kept_by}` lets gc reclaim what no head names)")
        if self.kept_apart:
            keys = sorted(self.kept_apart - {UNSIGNED})
            whose = ([f"signed by {', '.join(keys)}, not trusted"] if keys else []) + (
                ["not signed"] if UNSIGNED in self.kept_apart else [])
            lines.append(f"  kept apart ({'; '.join(whose)}): no build reuses it until you claw trust add "
                         "its signer (what nobody signed, never); refs not moved")
        return "\n".join(lines)

    def skipped_lines(self) -> list[str]:
        """One stderr line a remote ref skipped (its file holds no object id, or is a directory): the pull went on."""
        return [f"claw: remote ref {name} skipped: {why}" for name, why in sorted(self.refs_skipped.items())]


def listing_name(pack: str) -> str:
    return f"{PACKS}{pack}.ids"


def remote_packs(files: dict[str, int]) -> list[str]:
    """Packs whose listing exists among the remote's `files` (a pack without a listing is an
    interrupted push: ignored)."""
    return sorted(name[len(PACKS):-len(".ids")] for name in files
                  if name.endswith(".ids") and is_hex64(name[len(PACKS):-len(".ids")]))


def unlisted_packs(files: dict[str, int]) -> bool:
    """Does the remote hold a pack without a listing (an interrupted push's, or one whose listing was lost)?"""
    listed = set(remote_packs(files))
    return any(name.startswith(PACKS) and name.endswith(".pack") and name[len(PACKS):-len(".pack")] not in listed
               for name in files)


def cache_dir(store: Transfer, remote: Remote) -> Path:
    path = store.layout.remotes / remote.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def where(remote: Remote) -> str:
    """The first line of a remote's cache files that hold what it was when written: its URL and endpoint."""
    return f"url {remote.url} {remote.endpoint_url or '-'}"


SWAPPING = "swapping"  # in the remote's cache folder: the value this store last set out to put on each remote ref


def swapping(store: Transfer, remote: Remote) -> dict[str, str]:
    """{ref name: the value this store's last swap of it set out to put} on this very remote (push._move_refs notes
    it before it swaps): a push killed after the server applied its swap wrote no tracking ref, and that value on the
    remote is still this store's own."""
    try:
        lines = (cache_dir(store, remote) / SWAPPING).read_text(encoding="ascii").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    if not lines or lines[0] != where(remote):
        return {}
    return {name: value for name, _, value in (line.rpartition(" ") for line in lines[1:]) if name}


def _fetch_listings(store: Transfer, remote: Remote, backend: Backend, packs: list[str], files: dict[str, int]
                    ) -> None:
    """Download the listings not in the local cache yet, WORKERS at a time: a remote that interim
    pushes filled with hundreds of packs costs a new colleague one round trip per listing."""
    cache = cache_dir(store, remote)
    unseen = [pack for pack in packs if not (cache / f"{pack}.ids").exists()]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(lambda pack: _download_listing(backend, pack, cache / f"{pack}.ids",
                                                     files[listing_name(pack)]), unseen))


def _download_listing(backend: Backend, pack: str, cached: Path, size: int) -> None:
    tmp = cached.with_name(temp_name())
    try:
        backend.download(listing_name(pack), tmp, size)
        os.replace(tmp, cached)
    finally:
        tmp.unlink(missing_ok=True)


def read_listing(store: Transfer, remote: Remote, backend: Backend, pack: str, size: int) -> listing.Listing:
    """A pack's listing (decoded: listing.decode), from the local cache when it was seen before
    (listings never change), else downloaded again (another pull dropped the cached copy) no bigger
    than the remote listed (`size`)."""
    cached = cache_dir(store, remote) / f"{pack}.ids"
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


def remote_content(store: Transfer, remote: Remote, backend: Backend
                   ) -> tuple[dict[str, listing.Listing], dict[str, int]]:
    """{pack: listing} of every pack on the remote, and {name: size} of its files under packs/."""
    files = remote_files(remote, backend)
    return read_listings(store, remote, backend, files), files


def remote_files(remote: Remote, backend: Backend) -> dict[str, int]:
    """{name: size} of the remote's files under packs/; UsageError if a listing is too big to be one."""
    files = backend.list(PACKS)
    for pack in remote_packs(files):
        if files[listing_name(pack)] > LISTING_MAX:
            raise UsageError(f"remote {remote.url}: listing of pack {pack} is {files[listing_name(pack)]} bytes, "
                             f"more than any listing (at most {LISTING_MAX})")
    return files


def read_listings(store: Transfer, remote: Remote, backend: Backend, files: dict[str, int],
                  read: Mapping[str, listing.Listing] | None = None) -> dict[str, listing.Listing]:
    """{pack: listing} of every pack whose listing is among `files` (cached ones read from the cache; those in `read`,
    decoded already, as they are)."""
    packs = remote_packs(files)
    listings = {}
    for start in range(0, len(packs), LISTING_BATCH):  # a remote full of junk fails within one batch
        batch = packs[start:start + LISTING_BATCH]
        _fetch_listings(store, remote, backend, batch, files)
        for pack in batch:
            known = read.get(pack) if read else None
            listings[pack] = known if known is not None else read_listing(store, remote, backend, pack,
                                                                          files[listing_name(pack)])
    return listings


class PackIds:
    """The object ids (digests) of the remote's packs: in their listings (formats 2 and 3), or (format 4) in each
    pack's own table, known once this store has seen it (pushed or pulled the pack, or read its table before: cached
    in `remotes/<name>/<pack>.table`, checked against the listing at each read) or fetched by one ranged GET of the
    pack's end (`fetch`). Details: docs/remote.md (A listing)."""

    def __init__(self, store: Transfer, remote: Remote, listings: dict[str, listing.Listing]):
        self.cache, self.listings = cache_dir(store, remote), listings
        self.known: dict[str, list[bytes]] = {}
        for pack, doc in listings.items():
            ids = self._known(pack, doc)
            if ids is not None:
                self.known[pack] = ids

    def _known(self, pack: str, doc: listing.Listing) -> list[bytes] | None:
        if doc.objects is not None:
            return hex_digests("".join(doc.objects))
        cached = self.cache / f"{pack}.table"
        try:
            return listing.object_ids(doc, cached.read_bytes())
        except FileNotFoundError:
            return None
        except listing.ListingError:
            cached.unlink(missing_ok=True)
            return None

    def get(self, pack: str) -> list[bytes] | None:
        """The pack's object ids, if known here without fetching anything."""
        return self.known.get(pack)

    def learn(self, pack: str, table: bytes, read: list[bytes] | None = None) -> list[bytes]:
        """The ids of a pack of format 4 from its `table` (ListingError if not the one its listing names), cached.
        `read`: the table's object ids, read already (listing.object_ids)."""
        ids = self.known[pack] = listing.object_ids(self.listings[pack], table, read)
        remember_table(self.cache, pack, table)
        return ids

    def fetch(self, backend: Backend, packs: list[str], files: dict[str, int]) -> None:
        """Learn the ids of these packs not known yet from the tables at their ends (WORKERS ranged GETs at a
        time); UsageError naming a pack whose end is not the table its signed listing names."""
        unknown = [pack for pack in packs if pack not in self.known]
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            list(pool.map(lambda pack: self._fetch(backend, pack, files), unknown))

    def _fetch(self, backend: Backend, pack: str, files: dict[str, int]) -> None:
        doc = self.listings[pack]
        name = f"{PACKS}{pack}.pack"
        if files.get(name) != doc.size:
            raise size_differs(pack, files.get(name), doc.size)
        table = face.table_in_tail(backend.read_tail(name, face.table_tail_size(doc.rows)), doc.rows)
        try:
            if table is None:
                raise listing.ListingError("its end is not a table of the rows its listing names")
            self.learn(pack, table)
        except listing.ListingError as exc:
            raise UsageError(f"remote pack {pack}: {exc}") from None


def remember_table(cache: Path, pack: str, table: bytes) -> None:
    """Keep the table of a pack of format 4 in the listing cache (derived: checked against the listing when read)."""
    cached = cache / f"{pack}.table"
    if cached.exists():
        return
    tmp = cached.with_name(temp_name())
    try:
        tmp.write_bytes(table)
        os.replace(tmp, cached)
    finally:
        tmp.unlink(missing_ok=True)


def size_differs(pack: str, size: int | None, signed: int | None) -> UsageError:
    """A pack whose size on the remote is not the one its signed listing says: refused before it is read."""
    return UsageError(f"remote pack {pack}: the remote holds {'no such pack' if size is None else size}"
                      f"{'' if size is None else ' bytes'}, its listing says {signed} bytes")


def hex_digests(hexes: str) -> list[bytes]:
    """The digests of ids written one after another as one hex string (a listing's "objects")."""
    raw = bytes.fromhex(hexes)
    return [raw[i:i + 32] for i in range(0, len(raw), 32)]


def tracking_ref(remote: Remote, name: str) -> str:
    return f"{TRACKING}{remote.name}/{name}"


def seen_there(store: Transfer, remote: Remote, name: str) -> set[str]:
    """The values of ref `name` this store saw on the remote's place: its tracking ref, and those claw before
    session 77 kept for the same place under another name (Remote.also: a second saved name, a URL spelled out)."""
    values = (store.get_ref(f"{TRACKING}{other}/{name}") for other in (remote.name, *remote.also))
    return {value for value in values if value is not None}
