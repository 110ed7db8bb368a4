"""What fsck checks of the records that action-cache entries and campaign heads name: each record, its
outputs and the files of its output trees, checked once however many entries and heads name them.

Records and output trees are read in bulk (ObjectStore.get_many_bytes, CHUNK records a call): fsck
verified every blob when it read the packs, so what is asked here is only whether each is there, not
damaged, and well formed. An output tree whose pack's edges file says everything it names is present is not read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.host import heap
from clawstore.store import edges
from clawstore.store.actions import output_ids
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.index import HeldObjects
from clawstore.store.edges import record_facts
from clawstore.store.reach import HELD
from clawstore.store.services.fsck_rows import RowCheck
from clawstore.store.trees import NotATreeError, parse_tree, read_tree
from clawstore.values import jsontext

if TYPE_CHECKING:
    from clawstore.store.core.index import Entries, Loc
    from clawstore.store.edges import PackEdges
    from clawstore.store.services.fsck_keys import IndexKeys
    from clawstore.store.store import Store

CHUNK = 4096  # records read at once: their bytes and their small outputs' are held together
ANSWERS = 1 << 15  # answers kept (by record, output and object id) before they are dropped between chunks
FILES = 3  # edges files held at once (the pack whose records are checked, and those of their outputs)
TRIMMED = 4096  # rows let go (a pack's blobs, a group's records, edges files') between heap trims: each pack at scale
#   (~75,000 blobs, ~12,000 records), not each of many small ones (a trim walks the heaps: heap.Paced)


class PackFiles:
    """The edges files of the packs this fsck verified or found verified, read when a look-up needs one (the pack is
    not hashed again: its digest is known), the last FILES of them held."""

    def __init__(self, store: Store, digests: Mapping[str, bytes], find: Callable[[bytes], Loc | None]):
        self._store, self._digests, self._find = store, digests, find  # (`find`: Reach's look-up of the index)
        self._held: OrderedDict[str, PackEdges | None] = OrderedDict()
        self._loads: dict[str, int] = {}  # pack -> times its file was read
        self._paced = heap.Paced(TRIMMED)  # (files let go given back: the next one's arrays are made beside)

    def file(self, pack: str) -> PackEdges | None:
        if pack in self._held:
            self._held.move_to_end(pack)
        elif pack in self._digests:
            runtime = self._store.runtime
            if len(self._held) >= FILES:  # (let go before the next is read: FILES held at most, not one more)
                # the least used first: of those read fewest times, the one looked at longest ago (the input
                # documents' pack, which most groups ask, was read again 9 times by LRU alone at 10,000 x 5)
                fewest = min(self._loads[held] for held in self._held)
                let_go = self._held.pop(next(held for held in self._held if self._loads[held] == fewest))
                rows = len(let_go.offsets) if let_go is not None else 0
                del let_go
                self._paced.let_go(rows)
            self._held[pack] = edges.load(self._store.root, runtime.packs_dir, pack, self._digests[pack])
            self._loads[pack] = self._loads.get(pack, 0) + 1
        else:
            return None
        return self._held[pack]

    def children(self, digest: bytes, loc: Loc | None = None) -> list[bytes] | None:
        """What the object (at `loc`, else looked up) names, None when no file that verifies covers it (it is then
        read)."""
        loc = loc or self._find(digest)  # (what it lacks is read)
        found = self.file(loc[0]) if loc is not None else None
        return found.children(digest, loc[1]) if found is not None and loc is not None else None

    def facts(self, digest: bytes, loc: tuple[str, int] | None = None) -> tuple[bytes, list[bytes]] | None:
        """A record's key and outputs (at `loc`, else looked up) from a file fsck verified; None when none covers it
        (it is then read)."""
        loc = loc or self._find(digest)
        found = self.file(loc[0]) if loc is not None else None
        return found.facts(digest, loc[1]) if found is not None and loc is not None else None


def index_finder(store: Store, entries: Entries | None = None) -> Callable[[bytes], Loc | None]:
    """The index as loaded now (or `entries`, a snapshot's), looked up without a look for changes each time (what it
    lacks is asked the long way), its object rows held up to HELD bytes (fsck looks up most of them)."""
    return HeldObjects(entries or store.runtime.index.snapshot().entries, HELD).find


class Reach:
    """Problems found so far, by record id, output id and object id (None: fine)."""

    def __init__(self, store: Store, corrupt: Mapping[str, str], known: PackFiles | None = None,
                 find: Callable[[bytes], Loc | None] | None = None, keys: IndexKeys | None = None):
        """`keys`: the index looked up in bulk by its keys (fsck's), for the ids of verified edges files."""
        self._store, self._corrupt, self._known = store, corrupt, known
        self.find = find or index_finder(store)
        self.records: dict[str, str | None] = {}
        self._trees: dict[str, str | None] = {}
        self._objects: dict[str, str | None] = {}
        self._found: dict[str, Loc] = {}  # where objects asked about are (their outputs' files are read from there)
        self._present: dict[bytes, bool] = {}  # what output trees name, by digest
        self._damaged: set[bytes] | None = None  # digests of `corrupt`
        # (`corrupt` is complete once the packs are checked, before a Reach is made)
        damaged = {bytes.fromhex(bad[len(PREFIX):]) for bad in corrupt}
        self.rows = RowCheck(known.file if known is not None else lambda _: None, self.find, damaged, keys)

    def object_problem(self, oid: str) -> str | None:
        if oid in self._objects:  # (an input document, an attachment: named by many records)
            return self._objects[oid]
        problem = "is corrupt" if oid in self._corrupt else None if self._has(oid) else "is missing"
        self._objects[oid] = problem
        return problem

    def _has(self, oid: str) -> bool:
        """store.has, looked up in the loaded index first (what it lacks is asked again the long way)."""
        loc = self.find(bytes.fromhex(oid[len(PREFIX):])) if is_oid(oid) else None
        if loc is not None:
            self._found[oid] = loc
            return True
        return self._store.has(oid)

    def check(self, record_ids: Iterable[str], located: Mapping[str, tuple[str, int]] | None = None
              ) -> dict[str, dict[str, Any]]:
        """Check the records not checked yet (`records[id]`: why one cannot be relied on, or None), and
        return those of them that are whole, parsed (the entry checks read them). Callers pass at most
        CHUNK ids: the records returned, and the bytes of their small outputs, are held together. The answers of
        earlier calls may be dropped: read `records` for these ids before the next call. `located`: where the
        index puts some of them (pack, offset), so that they are not looked up again."""
        memos = (self.records, self._trees, self._objects, self._found, self._present)
        if max(map(len, memos)) >= ANSWERS:  # (dropped between calls only: a call's own answers are read after it)
            for answers in memos:
                answers.clear()
        todo = [rid for rid in dict.fromkeys(record_ids) if rid not in self.records]
        whole: dict[str, dict[str, Any]] = {}
        outputs: dict[str, list[str]] = {}
        where = located or {}
        known = {rid: found for rid in todo if (found := self._facts(rid, where.get(rid))) is not None}
        contents = self._store.get_many_bytes([rid for rid in todo if rid not in known
                                               and self.object_problem(rid) is None])
        for rid in todo:
            problem, record, named = known.get(rid) or self._record(rid, contents.get(rid))
            self.records[rid] = problem
            if record is not None:
                whole[rid], outputs[rid] = record, named
        self._check_trees([oid for named in outputs.values() for oid in named])
        for rid, named in outputs.items():
            self.records[rid] = self._outputs_problem(named)
        return whole

    def _facts(self, rid: str, loc: tuple[str, int] | None) -> tuple[None, dict[str, Any], list[str]] | None:
        """A record's check from the facts its pack's verified edges file holds (its key, and that it names the input
        document of that key; its outputs), when the record is there, intact, and such a file covers it."""
        if self._known is None or (rid in self._corrupt if loc is not None else self.object_problem(rid) is not None):
            return None
        found = self._known.facts(bytes.fromhex(rid[len(PREFIX):]), loc)
        if found is None:
            return None
        key = PREFIX + found[0].hex()
        return None, {"key": key, "input": key}, [PREFIX + digest.hex() for digest in found[1]]

    def _record(self, rid: str, content: bytes | None) -> tuple[str | None, dict[str, Any] | None, list[str]]:
        problem = self.object_problem(rid)
        if problem is not None:
            return f"record {rid} {problem}", None, []
        try:
            record = record_facts(content) if content is not None else None
            if record is None:
                record = jsontext.loads(content) if content is not None else self._store.get_json(rid)
        except (ValueError, StoreError):
            return f"record {rid} is not JSON", None, []
        if not isinstance(record, dict) or "outputs" not in record:
            return f"record {rid} has no outputs", None, []
        try:
            named = output_ids(record["outputs"], f"record {rid}")
        except ValueError as exc:
            return str(exc), None, []
        return None, record, named

    def _check_trees(self, oids: list[str]) -> None:
        todo = [oid for oid in dict.fromkeys(oids) if oid not in self._trees and self.object_problem(oid) is None]
        if self._known is not None:  # an output all of whose named objects are there (most name none: answers,
            # logs) has no file lost: a tree's files are among them (the edges cache, gc's rule); else it is read
            quiet = {oid for oid in todo if self._names_nothing_lost(oid)}
            self._trees.update(dict.fromkeys(quiet))
            todo = [oid for oid in todo if oid not in quiet]
        contents = self._store.get_many_bytes(todo)
        for oid in todo:
            self._trees[oid] = self._tree_problem(oid, contents.get(oid))

    def _names_nothing_lost(self, oid: str) -> bool:
        assert self._known is not None
        children = self._known.children(bytes.fromhex(oid[len(PREFIX):]), self._found.get(oid))
        if children is None:
            return False
        if self._damaged is None:  # (report.corrupt is complete once the packs are checked)
            self._damaged = {bytes.fromhex(bad[len(PREFIX):]) for bad in self._corrupt}
        # by digest, not by id: a tree names thousands of files (what this misses is read, and answered exactly)
        return all(self._intact(child) for child in children)

    def _intact(self, digest: bytes) -> bool:
        present = self._present.get(digest)
        if present is None:
            assert self._damaged is not None
            present = self._present[digest] = digest not in self._damaged and \
                self.find(digest) is not None
        return present

    def _tree_problem(self, oid: str, content: bytes | None) -> str | None:
        """If `oid` is a tree, the first of its files that is missing or corrupt."""
        try:
            entries = parse_tree(oid, content) if content is not None else read_tree(self._store, oid)
        except (NotATreeError, StoreError):
            return None
        for entry in entries:
            if entry.object is not None:
                problem = self.object_problem(entry.object)
                if problem is not None:
                    return f"file {entry.path} ({entry.object}) {problem}"
        return None

    def _outputs_problem(self, outputs: list[str]) -> str | None:
        for oid in outputs:
            problem = self.object_problem(oid)
            if problem is not None:
                return f"output {oid} {problem}"
            tree = self._trees.get(oid)
            if tree is not None:
                return f"output tree {oid}: {tree}"
        return None
