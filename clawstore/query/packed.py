"""What indexing a build keeps of the nodes whose rows it copies (query/copied.py), held in arrays rather than as a
Python object a node: the copy source's facts (`FactTable`: a 10,000 x 5 head's 200,000 nodes held 144 MB as a dict of
named tuples, about 20 MB so) and the nodes taken (`TakenNodes`). Figures: docs/query.md (Details by module, copied.py).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from clawstore.store.core.ids import PREFIX
from clawstore.store.services.archive_listing import SortedDigests

_OID_LENGTH = len(PREFIX) + 64


def oid_digest(record_id: str) -> bytes | None:
    """The 32 bytes of an object id (`blake3:` and 64 lowercase hex digits), else None: an id of another form is held
    as it is (a store's records never have one; a test's or a hostile head's may)."""
    if len(record_id) != _OID_LENGTH or not record_id.startswith(PREFIX):
        return None
    try:
        digest = bytes.fromhex(record_id[len(PREFIX):])
    except ValueError:
        return None
    # (fromhex reads uppercase digits and skips spaces: only the id's one spelling is the id)
    return digest if len(digest) == 32 and digest.hex() == record_id[len(PREFIX):] else None


class Interned:
    """A column of strings (or None) as an array of codes, each distinct value held once."""

    def __init__(self) -> None:
        self.codes = array("I")
        self.values: list[Any] = [None]
        self._code: dict[Any, int] = {None: 0}

    def append(self, value: Any) -> None:
        code = self._code.get(value)
        if code is None:
            code = self._code[value] = len(self.values)
            self.values.append(value)
        self.codes.append(code)

    def __getitem__(self, at: int) -> Any:
        return self.values[self.codes[at]]


class Optionals:
    """A column of floats or None: the numbers in an array of doubles, which are None in a byte each beside."""

    def __init__(self) -> None:
        self.values = array("d")
        self.none = bytearray()

    def append(self, value: float | None) -> None:
        if value is None:
            self.values.append(0.0)
            self.none.append(1)
        else:
            self.values.append(value)
            self.none.append(0)

    def __getitem__(self, at: int) -> float | None:
        return None if self.none[at] else self.values[at]


class NotPackable(ValueError):
    """A value a column of the source does not hold when claw wrote it (the facts are then not used: nothing copied)."""


class Facts(NamedTuple):
    """What the rows of other nodes read of a node whose rows are copied: its `nodes` row's columns
    (a result's run, the build's total cost) and its record's run_key (an evaluation's cost); each
    None where its kind is not read for it (copied.reusable)."""

    kind: str | None
    key: str | None
    status: str | None
    latency_s: float | None
    cost_usd: float | None
    run_key: str | None


def _number(value: Any) -> float | None:
    if value is None or type(value) is float:
        return value
    raise NotPackable(f"{value!r} in a DOUBLE column")


class FactTable(Mapping[tuple[str, int], Facts]):
    """{(record id, node_sig): Facts}, packed: the records' distinct digests sorted (SortedDigests), each with the range
    of its nodes in parallel arrays (signature, kind, status, latency, cost, and the one key a kind's facts read: a
    run's own, an evaluation's run_key). About 80 bytes a node, where a dict of `Facts` took 720. Filled by `add` in the
    order of (record id, signature), then `seal`ed; a record id out of that order or not an object id is held in a
    dict beside (`_others`), so any order gives the same mapping."""

    def __init__(self) -> None:
        self._digests = bytearray()
        self._starts = array("I")  # the first node of each digest, and (sealed) the end of the last
        self._sigs = array("q")
        self._kinds, self._texts, self._statuses = Interned(), Interned(), Interned()
        self._latency, self._cost = Optionals(), Optionals()
        self._others: dict[tuple[str, int], Facts] = {}
        self._sorted = SortedDigests(b"")

    def add(self, record_id: str, sig: int, kind: str | None, key: str | None, status: str | None,
            latency_s: float | None, cost_usd: float | None, run_key: str | None) -> None:
        latency_s, cost_usd = _number(latency_s), _number(cost_usd)
        if (kind == "run" and run_key is not None) or (kind != "run" and key is not None):
            raise NotPackable("a node with both a key and a run_key read")  # (copied.reusable reads one a kind)
        digest = oid_digest(record_id)
        last = self._digests[-32:]
        if digest is None or digest < last or type(sig) is not int:
            self._others[(record_id, sig)] = Facts(kind, key, status, latency_s, cost_usd, run_key)
            return
        if digest != last:
            self._digests += digest
            self._starts.append(len(self._sigs))
        self._sigs.append(sig)
        self._kinds.append(kind)
        self._texts.append(key if kind == "run" else run_key)
        self._statuses.append(status)
        self._latency.append(latency_s)
        self._cost.append(cost_usd)

    def seal(self) -> FactTable:
        self._starts.append(len(self._sigs))
        self._sorted = SortedDigests(bytes(self._digests))
        self._digests = bytearray()
        return self

    def find(self, record_id: str, sig: int) -> Facts | None:
        """The facts of the node with this record and signature, or None."""
        digest = oid_digest(record_id)
        if digest is not None:
            at = self._sorted.index(digest)
            if at >= 0:
                sigs = self._sigs
                for entry in range(self._starts[at], self._starts[at + 1]):
                    if sigs[entry] == sig:
                        return self._facts_at(entry)
        return self._others.get((record_id, sig)) if self._others else None

    def _facts_at(self, entry: int) -> Facts:
        kind, text = self._kinds[entry], self._texts[entry]
        run = kind == "run"
        return Facts(kind, text if run else None, self._statuses[entry], self._latency[entry], self._cost[entry],
                     None if run else text)

    def __getitem__(self, key: tuple[str, int]) -> Facts:
        found = self.find(*key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for at in range(len(self._sorted)):
            record_id = PREFIX + self._sorted.hex_at(at)
            for entry in range(self._starts[at], self._starts[at + 1]):
                yield record_id, self._sigs[entry]
        yield from self._others

    def __len__(self) -> int:
        return len(self._sigs) + len(self._others)


_SCORED = ("run_status", "latency_s", "run_cost_usd", "eval_cost_usd", "total_cost_usd")  # rows.scored_run's columns


class Taken(NamedTuple):
    """A node whose rows the writer copies from `Flattened.source`, with this build's columns."""

    position: int  # in the build's node order (rows keep it)
    record_id: str
    sig: int
    action: str | None
    scored: dict[str, Any] | None  # a result's `scored_run` columns in this build; None for other kinds


class TakenNodes:
    """The nodes a build takes from its source, in position order (`add`), a result's scored columns set later
    (`score`): in arrays, about 60 bytes a node (a list of `Taken` held 300). A sequence of `Taken` when iterated."""

    def __init__(self) -> None:
        self._positions = array("q")
        self._sigs = array("q")
        self._digests = bytearray()
        self._others: dict[int, str] = {}  # (a record id that is not an object id, by its place)
        self._actions = Interned()
        self._scored_at = array("q")  # the places of the results scored, ascending
        self._status = Interned()
        self._numbers = {name: Optionals() for name in _SCORED[1:]}

    def add(self, position: int, record_id: str, sig: int, action: str | None) -> None:
        if self._positions and position <= self._positions[-1]:
            raise ValueError(f"node {position} taken after node {self._positions[-1]}")
        digest = oid_digest(record_id)
        if digest is None:
            self._others[len(self._positions)] = record_id
            digest = bytes(32)
        self._positions.append(position)
        self._sigs.append(sig)
        self._digests += digest
        self._actions.append(action)

    def score(self, position: int, scored: Mapping[str, Any]) -> None:
        """Set the scored columns (rows.scored_run) of the taken result at `position`; results in position order."""
        at = bisect_left(self._positions, position)
        if at == len(self._positions) or self._positions[at] != position:
            raise KeyError(position)
        if self._scored_at and at <= self._scored_at[-1]:
            raise ValueError(f"node {position} scored out of order")
        self._scored_at.append(at)
        self._status.append(scored["run_status"])
        for name, column in self._numbers.items():
            column.append(scored[name])

    def __len__(self) -> int:
        return len(self._positions)

    def __iter__(self) -> Iterator[Taken]:
        scored_at, next_scored = self._scored_at, 0
        for at in range(len(self._positions)):
            scored = None
            if next_scored < len(scored_at) and scored_at[next_scored] == at:
                scored = {"run_status": self._status[next_scored],
                          **{name: column[next_scored] for name, column in self._numbers.items()}}
                next_scored += 1
            record_id = self._others.get(at) if self._others else None
            if record_id is None:
                record_id = PREFIX + self._digests[at * 32:at * 32 + 32].hex()
            yield Taken(self._positions[at], record_id, self._sigs[at], self._actions[at], scored)
