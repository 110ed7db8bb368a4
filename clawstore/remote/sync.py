"""What `claw push` and `claw pull` share: the remote's layout, its listings as one side reads them, the names, the
report. The layout: docs/remote.md (Details by module)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawstore.errors import UsageError
from clawstore.host.durable import temp_name
from clawstore.remote import listing
from clawstore.remote.backends import Backend
from clawstore.remote.config import Remote
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
    kept_apart: set[str] = field(default_factory=set)  # signers of packs kept apart (pull --untrusted)
    resumed: int = 0  # packs a pull took as another (interrupted, or beside it) had downloaded them

    def summary(self) -> str:
        lines = [f"{self.verb} {self.remote}: {self.packs} pack(s), {self.objects} object(s), "
                 f"{self.bytes} bytes; {len(self.refs_moved)} ref(s) moved"
                 + (f"; {self.resumed} pack(s) already downloaded by another pull, not again" if self.resumed else "")]
        lines += [f"  {name}: {why}" for name, why in sorted(self.refs_kept.items())]
        if self.kept_apart:
            keys = sorted(self.kept_apart - {UNSIGNED})
            whose = ([f"signed by {', '.join(keys)}, not trusted"] if keys else []) + (
                ["not signed"] if UNSIGNED in self.kept_apart else [])
            lines.append(f"  kept apart ({'; '.join(whose)}): no build reuses it until you claw trust add "
                         "its signer (what nobody signed, never); refs not moved")
        return "\n".join(lines)


def listing_name(pack: str) -> str:
    return f"{PACKS}{pack}.ids"


def remote_packs(files: dict[str, int]) -> list[str]:
    """Packs whose listing exists among the remote's `files` (a pack without a listing is an
    interrupted push: ignored)."""
    return sorted(name[len(PACKS):-len(".ids")] for name in files
                  if name.endswith(".ids") and is_hex64(name[len(PACKS):-len(".ids")]))


def cache_dir(store: Transfer, remote: Remote) -> Path:
    path = store.layout.remotes / remote.name
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def _read_listing(store: Transfer, remote: Remote, backend: Backend, pack: str, size: int) -> listing.Listing:
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
    files = backend.list(PACKS)
    packs = remote_packs(files)
    for pack in packs:
        if files[listing_name(pack)] > LISTING_MAX:
            raise UsageError(f"remote {remote.url}: listing of pack {pack} is {files[listing_name(pack)]} bytes, "
                             f"more than any listing (at most {LISTING_MAX})")
    listings = {}
    for start in range(0, len(packs), LISTING_BATCH):  # a remote full of junk fails within one batch
        batch = packs[start:start + LISTING_BATCH]
        _fetch_listings(store, remote, backend, batch, files)
        listings.update((pack, _read_listing(store, remote, backend, pack, files[listing_name(pack)]))
                        for pack in batch)
    return listings, files


def hex_digests(hexes: str) -> list[bytes]:
    """The digests of ids written one after another as one hex string (a listing's "objects")."""
    raw = bytes.fromhex(hexes)
    return [raw[i:i + 32] for i in range(0, len(raw), 32)]


def tracking_ref(remote: Remote, name: str) -> str:
    return f"{TRACKING}{remote.name}/{name}"
