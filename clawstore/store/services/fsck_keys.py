"""fsck's look-ups of the index, past ROWS_HELD bytes of its object rows by its tables' sort keys: 8 bytes an object
held (reach_arrays.HeldArrays, gc's walk's keys; each key matched read in place), where fsck held the tables' object
rows, 52 bytes an object, up to fsck_reach.HELD (64 MiB).

fsck asks most of its ~900,000 look-ups (10,000 x 5) in bulk here: the records its grouping places (a batch of
entries at a time) and the ids a verified edges file names (all of a file's ids when fsck first asks one of them).
What the keys cannot answer exactly (a small segment's object, two ids sharing their first 8 bytes, a table out of
order) and the few look-ups asked one by one go to the index's own look-up in place (its tables' fan-outs and tags,
kept on the tables). docs/store.md (fsck).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawstore.store.core.index import HeldObjects, object_rows_size

if TYPE_CHECKING:
    from clawstore.store.core.index import Entries, Loc

# The index's object rows fsck holds for its look-ups while they are at most this many bytes (~160,000 objects): below
# it holding them (52 bytes an object) costs less than numpy's import for the keys (~9 MB of RSS); past it, the keys
ROWS_HELD = 8 << 20
ASKED = -2  # a pack number `locate` leaves to `find` (what the keys cannot answer exactly)
LOCATE = 16384  # ids the keys search at once (an edges file names up to ~150,000: searched whole, +10 MB at its peak)


def by_keys(entries: Entries) -> bool:
    """Are the index's objects looked up by its tables' keys (numpy's), not by its rows held?"""
    return object_rows_size(entries) > ROWS_HELD


class IndexKeys:
    """The index as a snapshot's `entries` hold it: its object rows held up to ROWS_HELD bytes, else looked up by its
    tables' keys (held) and rows (read in place). `by_keys`: the latter (`locate` then answers in bulk)."""

    def __init__(self, entries: Entries):
        self.by_keys = by_keys(entries)
        # (by keys: no rows held, those the keys leave to `find` looked up in place)
        self._one = HeldObjects(entries, 0 if self.by_keys else ROWS_HELD, fanned=not self.by_keys)
        self.packs: list[str] = []
        self._keys: Any = None
        if self.by_keys:
            from clawstore.store.reach_arrays import HeldArrays  # (numpy: only for an index this big)

            self._keys = HeldArrays(self._one)
            self.packs = self._keys.packs

    def find(self, digest: bytes) -> Loc | None:
        """Where an object is (Entries.find_object), looked up alone."""
        return self._one.find(digest)

    def locate(self, digests: Any) -> tuple[Any, Any, Any]:
        """Of each id (an `S32` array; `by_keys` only): its pack's number in `packs` (NOT_FOUND: the index lacks it;
        ASKED: ask `find`), its offset and length there. LOCATE ids at a time: what the search makes of each id
        (its key, order, matched rows: ~60 bytes) is held for those alone; an edges file's ids are asked at once."""
        from clawstore.store.core.lean_numpy import np

        if len(digests) <= LOCATE:
            return self._locate(digests)
        packs, offsets, lengths = np.empty(len(digests), np.int64), np.empty(len(digests), np.uint64), \
            np.empty(len(digests), np.uint64)
        for at in range(0, len(digests), LOCATE):
            part = slice(at, at + LOCATE)
            packs[part], offsets[part], lengths[part] = self._locate(digests[part])
        return packs, offsets, lengths

    def _locate(self, digests: Any) -> tuple[Any, Any, Any]:
        from clawstore.store.core.lean_numpy import np
        from clawstore.store.reach_arrays import NOT_FOUND

        if not self._keys.in_order:  # (a damaged table: searched by keys it could miss what it holds)
            zeros = np.zeros(len(digests), np.uint64)
            return np.full(len(digests), ASKED, np.int64), zeros, zeros
        rows, packs, offsets, lengths = self._keys.locate(digests)
        packs[rows < 0] = np.where(rows[rows < 0] == NOT_FOUND, NOT_FOUND, ASKED)
        return packs, offsets, lengths

    def find_many(self, digests: list[bytes]) -> list[Loc | None]:
        """Where each object is, as `find` answers each."""
        if not self.by_keys:
            return list(map(self._one.find, digests))
        from clawstore.store.core.lean_numpy import np

        packs, offsets, lengths = self.locate(np.array(digests, dtype="S32"))
        names = self.packs
        return [self.find(digest) if pack == ASKED else None if pack < 0 else (names[pack], offset, length)
                for digest, pack, offset, length in zip(digests, packs.tolist(), offsets.tolist(), lengths.tolist(),
                                                        strict=True)]
