"""What indexing a build keeps of the nodes whose rows it copies (query/copied.py), held in arrays rather than as a
Python object a node: the copy source's facts (`FactTable`: a 10,000 x 5 head's 200,000 nodes held 105 MB of Python as a
dict of named tuples, 26.8 MB so) and the nodes taken (`TakenNodes`). Figures: docs/query.md (Details by module,
copied.py; Scale)."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from clawstore.store.core.ids import PREFIX
from clawstore.store.services.archive_listing import SortedDigests

_HEX_AT = len(PREFIX)
_OID_LENGTH = _HEX_AT + 64


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


_new_facts = tuple.__new__  # (a Facts made without its Python-level __new__: a third of facts_at's time)


class FactTable(Mapping[tuple[str, int], Facts]):
    """{(record id, node_sig): Facts}, packed: the records' distinct digests sorted (SortedDigests), each with the range
    of its nodes in parallel arrays (signature, kind, status, latency, cost, and the one key a kind's facts read: a
    run's own, an evaluation's run_key): 134 bytes a node with its keys' strs, where a dict of `Facts` took 525. Filled
    by `extend` in the order of (digest, signature), then `seal`ed; a record id out of that order or not an object id
    is held in a list beside (`_others`), so any order gives the same mapping. A node is named by its entry (`lookup`):
    its place in the arrays, or ~its place among the others."""

    def __init__(self) -> None:
        self._digests = bytearray()
        self._starts = array("I")  # the first node of each digest, and (sealed) the end of the last
        self._sigs = array("q")
        self._kinds, self._texts, self._statuses = Interned(), Interned(), Interned()
        self._latency, self._cost = Optionals(), Optionals()
        self._others: list[tuple[str, int, Facts]] = []
        self._other_at: dict[tuple[str, int], int] = {}
        self._sorted = SortedDigests(b"")

    def extend(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Add rows of (digest: the id's 32 bytes if an object id, else None; record id; signature; kind; the key its
        kind reads: a run's key, an evaluation's run_key, else None; status; latency_s; cost_usd: a float or None)."""
        digests, starts, sigs = self._digests, self._starts, self._sigs
        kinds, texts, statuses = self._kinds, self._texts, self._statuses
        latency, cost = self._latency, self._cost
        last = bytes(digests[-32:])
        for digest, record_id, sig, kind, text, status, latency_s, cost_usd in rows:
            if digest is None or digest < last:
                run = kind == "run"
                self._other_at[(record_id, sig)] = len(self._others)
                self._others.append((record_id, sig, Facts(kind, text if run else None, status, latency_s, cost_usd,
                                                           None if run else text)))
                continue
            if digest != last:
                digests += digest
                starts.append(len(sigs))
                last = digest
            sigs.append(sig)
            kinds.append(kind)
            texts.append(text)
            statuses.append(status)
            latency.append(latency_s)
            cost.append(cost_usd)

    def seal(self) -> FactTable:
        self._starts.append(len(self._sigs))
        self._sorted = SortedDigests(bytes(self._digests))
        self._digests = bytearray()
        return self

    def lookup(self, record_id: str, sig: int) -> int | None:
        """The entry of the node with this record and signature, or None. (Asked of every node of a build: its steps
        inline; only an id's one spelling, `blake3:` and 64 lowercase hex digits, is looked up by its digest: fromhex
        reads uppercase digits and skips spaces.)"""
        if len(record_id) == _OID_LENGTH and record_id.startswith(PREFIX) and record_id.islower():
            try:
                digest = bytes.fromhex(record_id[_HEX_AT:])
            except ValueError:
                digest = b""
            at = self._sorted.index(digest) if len(digest) == 32 else -1
            if at >= 0:
                sigs, starts = self._sigs, self._starts
                for entry in range(starts[at], starts[at + 1]):
                    if sigs[entry] == sig:
                        return entry
        if self._others:
            other = self._other_at.get((record_id, sig))
            return None if other is None else ~other
        return None

    def facts_at(self, entry: int) -> Facts:
        if entry < 0:
            return self._others[~entry][2]
        kinds, texts, statuses, latency, cost = self._kinds, self._texts, self._statuses, self._latency, self._cost
        kind, text = kinds.values[kinds.codes[entry]], texts.values[texts.codes[entry]]
        run = kind == "run"
        return _new_facts(Facts, (kind, text if run else None, statuses.values[statuses.codes[entry]],
                                  None if latency.none[entry] else latency.values[entry],
                                  None if cost.none[entry] else cost.values[entry], None if run else text))

    def key_at(self, entry: int) -> tuple[str, int]:
        """(record id, signature) of an entry."""
        digest, sig, record_id = self.digest_at(entry)
        return (PREFIX + digest.hex() if record_id is None else record_id), sig

    def digest_at(self, entry: int) -> tuple[bytes, int, str | None]:
        """(record digest, signature, None) of an entry; (32 zero bytes, signature, record id) of one held beside."""
        if entry < 0:
            record_id, sig, _ = self._others[~entry]
            return bytes(32), sig, record_id
        return self._sorted.digest_at(bisect_right(self._starts, entry) - 1), self._sigs[entry], None

    def find(self, record_id: str, sig: int) -> Facts | None:
        entry = self.lookup(record_id, sig)
        return None if entry is None else self.facts_at(entry)

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
        for record_id, sig, _ in self._others:
            yield record_id, sig

    def __len__(self) -> int:
        return len(self._sigs) + len(self._others)


SCORED = ("run_status", "latency_s", "run_cost_usd", "eval_cost_usd", "total_cost_usd")  # rows.scored_run's columns


class Taken(NamedTuple):
    """A node whose rows the writer copies from `Flattened.source`, with this build's columns."""

    position: int  # in the build's node order (rows keep it)
    record_id: str
    sig: int
    action: str | None
    scored: dict[str, Any] | None  # a result's `scored_run` columns in this build; None for other kinds


class TakenNodes:
    """The nodes a build takes from its source (`facts`), in position order (`add`: each by its entry there), a
    result's scored columns set later (`score`): in arrays, about 60 bytes a node (a list of `Taken` ~250: each tuple,
    its record id's str, its ints). A
    sequence of `Taken` when iterated, once `detach`ed from `facts`: each node's record digest and signature copied out
    of it, so that the facts are let go before the writer's DuckDB takes its memory."""

    def __init__(self, facts: FactTable | None = None) -> None:
        self._facts = facts
        self._positions = array("q")
        self._entries = array("q")
        self._actions = Interned()
        self._scored_at = array("q")  # the places of the results scored, ascending
        self._status = Interned()
        self._numbers = {name: Optionals() for name in SCORED[1:]}
        self._digests = bytearray()
        self._sigs = array("q")
        self._others: dict[int, str] = {}  # (a record id that is not an object id, by its place)

    def add(self, position: int, entry: int, action: str | None) -> None:
        if self._positions and position <= self._positions[-1]:
            raise ValueError(f"node {position} taken after node {self._positions[-1]}")
        self._positions.append(position)
        self._entries.append(entry)
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

    def detach(self) -> TakenNodes:
        """Copy each node's record digest and signature out of `facts`, and let it go."""
        facts, self._facts = self._facts, None
        if facts is None:
            return self
        digests, sigs, others = self._digests, self._sigs, self._others
        for at, entry in enumerate(self._entries):
            digest, sig, record_id = facts.digest_at(entry)
            digests += digest
            sigs.append(sig)
            if record_id is not None:
                others[at] = record_id
        self._entries = array("q")
        return self

    def __len__(self) -> int:
        return len(self._positions)

    def __iter__(self) -> Iterator[Taken]:
        if self._facts is not None:
            raise ValueError("taken nodes iterated before they were detached from their facts")
        scored_at, next_scored = self._scored_at, 0
        digests, others = self._digests, self._others
        for at in range(len(self._positions)):
            scored = None
            if next_scored < len(scored_at) and scored_at[next_scored] == at:
                scored = {"run_status": self._status[next_scored],
                          **{name: column[next_scored] for name, column in self._numbers.items()}}
                next_scored += 1
            record_id = others.get(at) if others else None
            if record_id is None:
                record_id = PREFIX + digests[at * 32:at * 32 + 32].hex()
            yield Taken(self._positions[at], record_id, self._sigs[at], self._actions[at], scored)
