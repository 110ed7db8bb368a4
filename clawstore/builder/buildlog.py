"""The build log (one JSON file per `claw build`) and the campaign head ref it advances."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import threading
import uuid
from collections.abc import Container, Iterable, Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import msgspec

from clawstore.errors import StoreError
from clawstore.graph.keys import run_outputs_ref
from clawstore.graph.plan import Node, address_id
from clawstore.store import RefConflict
from clawstore.store.actions import reusable
from clawstore.store.buildlogs import (
    append_journal,
    build_log_path,
    encode_node,
    journal_path,
    read_build_log,
    seal_build_log,
    write_build_log,
)
from clawstore.store.documents import BUILD_LOG_FORMAT, COUNTERS, JOURNALED_FORMAT, TOKEN_METRICS, BuildLogDoc
from clawstore.store.headdoc import Place, iter_nodes, place, write_placed_head
from clawstore.store.sortedruns import FAN_IN, RUN_BYTES, SortedRuns
from clawstore.values.clock import utc_now
from clawstore.values.costs import PAID_KINDS, CostSum
from clawstore.values.tokens import TOKENS_UNKNOWN, tokens_known

if TYPE_CHECKING:
    from clawstore.store.store import Store


def head_ref(campaign: str) -> str:
    return f"campaigns/{campaign}"


# What the next build needs of a record to plan and print without reading it: everything but the
# bulky summary (per-check lists, judge dimensions), which stays in the record object itself.
_PLANNING_FIELDS = ("status", "cacheable", "outputs", "metrics", "error")
_PLANNING_SUMMARY = ("final_score", "passed")


_VIEW_KEYS = {*_PLANNING_FIELDS, "summary"}


def planning_view(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Also what a built node keeps of its record for the rest of the build (the full one is in the store), as a
    node planned from the head has: one view per node, shared with the build log (a view is its own view)."""
    if record is None:
        return None
    summary = record.get("summary") or {}
    if record.keys() == _VIEW_KEYS and summary.keys() <= set(_PLANNING_SUMMARY):
        return record
    view = {name: record.get(name) for name in _PLANNING_FIELDS}
    summary = record.get("summary") or {}
    view["summary"] = {name: summary[name] for name in _PLANNING_SUMMARY if name in summary}
    return view


# The build's nodes are spilled in sorted runs of about this many bytes, FAN_IN runs merged into one
# (store/sortedruns.py; names of their own here so that a test can make the runs small).
SPILL_RUN_BYTES = RUN_BYTES
SPILL_FAN_IN = FAN_IN

Placed = tuple[Place, dict[str, Any]]  # a head node and where it goes (headdoc.place)
_ENTRY = msgspec.json.Decoder(tuple[Any, dict[str, Any]])  # a spilled node: [its journal line or null, the node]


class HeadUnknown:
    """The head a build planned from, not given (a BuildLog made outside a build)."""


UNKNOWN_HEAD = HeadUnknown()


def _count_unknown_tokens(metrics: dict[str, Any]) -> None:
    """One more paid node whose tokens are unknown: the build's token totals are what is known (`≥`), never 0s."""
    metrics[TOKENS_UNKNOWN] = int(metrics.get(TOKENS_UNKNOWN) or 0) + 1


def new_build_id() -> str:
    """<UTC timestamp to the second>-<8 random hex>: sorts by start time, unique across processes."""
    return utc_now().replace(":", "").replace("-", "").replace(".", "")[:15] + "-" + uuid.uuid4().hex[:8]


class BuildLog:
    """Accumulates the nodes of one build: while it runs each `write` appends the nodes recorded since
    the last one to its journal; `seal` writes the final log. What the campaign head needs of each node
    (not its full record) goes to sorted runs on disk as it is added, merged with the previous head part
    by part when the head advances: the log holds a bounded buffer, not the build (layout and why:
    docs/store.md, store/buildlogs.py; docs/building.md, Memory)."""

    def __init__(self, store: Store, campaign: dict[str, Any], filter: dict[str, list[str]] | None = None,
                 planned_from: str | None | HeadUnknown = UNKNOWN_HEAD, expected: dict[str, Any] | None = None):
        """`planned_from`: the head this build planned from (None: the campaign had none). Advancing, an address the
        build does not plan is dropped only if that head held it: one another build put into the head meanwhile is
        kept (a case added to the configs and built while this build, planned before, still ran). Not given: every
        address not planned is dropped. `expected`: what the whole campaign expects (BuildLogDoc.expected)."""
        self.store = store
        self._planned_from = planned_from
        self._dropped: frozenset[str] | None = None  # what planned_from holds and the build does not plan
        self.build_id = new_build_id()
        self.doc = BuildLogDoc(build_id=self.build_id, started_at=utc_now(), campaign=campaign, filter=filter,
                               format=JOURNALED_FORMAT, expected=expected)
        self._lock = threading.Lock()
        # Every node, reused ones too, as the campaign head would carry it (its record's planning view too)
        # with its journal line, in place order: sorted runs in the store's tmp/ (docs/building.md, Memory).
        self._nodes = SortedRuns(store.tmp_dir, SPILL_RUN_BYTES, SPILL_FAN_IN)
        self._added = 0  # nodes added so far (the next one's number: the order of nodes at one place)
        self._unstoring: list[tuple[Any, int]] = []  # (node, nodes added then) unstored, not applied yet
        self._failed: set[int] = set()  # numbers of the nodes unstored: failed, without their record
        self.path = build_log_path(store.root, self.build_id)
        self._awaiting: dict[int, Node] = {}  # id -> node recorded whose record is not durable yet
        self._pending: list[dict[str, Any] | int] = []  # journal lines not written yet (an int: a fix of that line)
        self._lines = 0  # node lines so far (journaled and pending): the next one's index
        self._journaled = 0  # node lines in the journal
        self._fixed: set[int] = set()  # node lines whose record was not stored after all
        self._sealed = False

    @property
    def counts(self) -> dict[str, int]:
        if self._unstoring:
            with self._lock:
                self._apply_unstored()
        return self.doc.counts

    @property
    def metrics(self) -> dict[str, Any]:
        return self.doc.metrics

    def add(self, kind: str, key: str, record_id: str | None, action: str, address: dict[str, Any],
            record: dict[str, Any] | None, spent: CostSum | None = None) -> None:
        """`spent`: what a node failed without a record of its own spent (builder/unstored.py unrecorded_cost),
        counted in place of `record`'s metrics."""
        # The head's node (the head carries each record's planning view too, so that the next build plans
        # without reading thousands of record objects one by one).
        node = {"kind": kind, "key": key, "record": record_id, "action": action, "address": address,
                "record_doc": planning_view(record) if record_id and record else None}
        where = place(node)
        with self._lock:
            line = None
            if action != "reuse":
                line = self._lines
                self._lines += 1
                self._pending.append({"kind": kind, "key": key, "record": record_id, "action": action,
                                      "address": address})
            self._nodes.add((*where, self._added), msgspec.json.encode((line, node)))
            self._added += 1
            self.doc.counts[COUNTERS[action]] += 1
            if spent is not None:
                spent.add_to_build(self.doc.metrics)
                _count_unknown_tokens(self.doc.metrics)
            elif record and action in ("exec", "fail"):  # spent in this build
                metrics = self.doc.metrics
                for name in TOKEN_METRICS:
                    metrics[name] += int(record["metrics"].get(name) or 0)
                if kind in PAID_KINDS:
                    CostSum.of_metrics(record["metrics"]).add_to_build(metrics)
                    if not tokens_known(record["metrics"]):
                        _count_unknown_tokens(metrics)
                        for name in ("input_tokens", "output_tokens"):  # (what it spent at least: `≥`)
                            metrics[name] += int(record["metrics"].get(f"{name}_known") or 0)

    def await_durable(self, node: Node) -> None:
        """Remember `node` until its record is durable (group commit: the end of its window)."""
        key = id(node)
        self._awaiting[key] = node
        # The callback names the node by its id alone: held by the group's callbacks, the node outlived its durability
        # as long as the committing thread kept the group (a loaded machine: a window's nodes more; session 75).
        self.store.when_durable(lambda: self._awaiting.pop(key, None))

    def not_durable(self) -> list[Node]:
        """Nodes recorded whose commit window has not been committed (yet, or ever)."""
        return list(self._awaiting.values())

    def unstore(self, node: Node) -> None:
        """A recorded node whose record could not be made durable after all: it failed, not executed. (Applied
        to the nodes added before, all unstored nodes at once, when the log is next read: one pass over it.)"""
        with self._lock:
            self._unstoring.append((node, self._added))

    def _apply_unstored(self) -> None:
        """Fail every node an `unstore` named (same key, record and address, added before it), in the counts,
        the journal and the head. Called holding the lock."""
        if not self._unstoring:
            return
        wanted: dict[tuple[str, str | None], list[tuple[dict[str, Any], int]]] = {}
        for node, added in self._unstoring:
            wanted.setdefault((node.key, node.record_id), []).append((node.address, added))
        self._unstoring = []
        for _, number, line, entry in self._entries():
            for address, added in wanted.get((entry["key"], entry["record"]), ()):
                if number < added and address == entry["address"]:
                    self._fail(number, line, entry)
                    break

    def _fail(self, number: int, line: int | None, entry: dict[str, Any]) -> None:
        if entry["action"] == "exec":
            self.doc.counts["executed"] -= 1
            self.doc.counts["failed"] += 1
        self._failed.add(number)
        if line is None:
            return
        if line >= self._journaled:  # not written yet: written as it is now
            pending = self._pending[self._pending_at(line)]
            assert isinstance(pending, dict)
            pending["action"], pending["record"] = "fail", None
        else:
            self._fixed.add(line)
            self._pending.append(line)

    def _entries(self) -> Iterator[tuple[Place, int, int | None, dict[str, Any]]]:
        """(place, number, journal line, head node) of every node added, in place order (unstored ones failed)."""
        for (case, rest, number), payload in self._nodes.sorted():
            line, node = _ENTRY.decode(payload)
            if number in self._failed:
                node["record"], node["action"] = None, "fail"
            yield (case, rest), number, line, node

    def _pending_at(self, line: int) -> int:
        """The index in `_pending` of node line `line` (not journaled yet)."""
        seen = self._journaled
        for index, pending in enumerate(self._pending):
            if isinstance(pending, dict):
                if seen == line:
                    return index
                seen += 1
        raise ValueError(line)

    def write(self) -> None:
        """Append what was recorded since the last write to the journal, then rewrite the document (a killed
        build leaves both, readable as one log)."""
        if self._sealed:
            self._reseal()
            return
        self.store.flush()  # the log names records: they are durable first (group commit)
        with self._lock:
            self._apply_unstored()
            # (its journal made by the first write, before the build's first request, even with no node yet: a build
            # killed before its first node finished, its requests in flight, is named by `claw status`)
            self._flush_pending(create=True)
            write_build_log(self.store.root, self.doc)

    def _flush_pending(self, create: bool = False) -> None:
        pending = self._pending
        append_journal(self.store.root, self.build_id,
                       [encode_node(p if isinstance(p, dict) else {"fix": p}) for p in pending], create=create)
        self._journaled += sum(1 for p in pending if isinstance(p, dict))
        self._pending = []

    def seal(self) -> None:
        """The build's last write: its log with every node inline (format 2), the journal removed."""
        if self._sealed:
            self._reseal()
            return
        self.store.flush()
        with self._lock:
            self._apply_unstored()
            self._flush_pending()
            seal_build_log(self.store.root, self.doc, self._fixed)
            self._sealed = True
            if self.doc.head is not None:  # its nodes are in the head: the spill is not read again
                self._nodes.close()

    def _reseal(self) -> None:
        """A write after the seal (an interrupt while sealing): the sealed nodes with this document's fields."""
        with self._lock:
            nodes = read_build_log(self.path).nodes
            write_build_log(self.store.root, dataclasses.replace(self.doc, nodes=nodes, format=BUILD_LOG_FORMAT))

    def discard(self) -> bool:
        """Remove the log of a build that recorded no node (refused planning its first window: it sent nothing), so
        that no reader takes it for a killed build whose spending is unknown; False, nothing removed, when it recorded
        one."""
        with self._lock:
            if self._added or self._sealed:
                return False
            # (the log first: a journal left alone is a first write cut short, which the next build removes)
            self.path.unlink(missing_ok=True)
            journal_path(self.path).unlink(missing_ok=True)
            self._nodes.close()
            return True

    def end(self, state: str) -> None:
        """Mark the build ended (written by the next `write`, after the head is advanced)."""
        self.doc.state = state
        self.doc.finished_at = utc_now()

    def finish(self, state: str) -> None:
        self.end(state)
        self.write()

    def advance_head(self, planned: Container[str] | None) -> str:
        """Point `campaigns/<id>` at the merged latest state: this build's nodes over the previous head's, keeping only
        addresses the campaign still plans (`planned`: address ids, anything `in` answers; None, all: a filtered
        build); compare-and-set, retried on a race. An unchanged state is not rewritten. Streamed: the previous head's
        nodes (read from the store, a part at a time) and this build's, both in place order, merged a place at a time
        and written a part at a time (docs/building.md, Memory)."""
        ref = head_ref(self.doc.campaign["id"])
        with self._lock:
            self._apply_unstored()
        if self._sealed and self.doc.head is not None:  # (advanced and sealed: its nodes are in that head)
            return self.doc.head
        for _ in range(20):
            previous_id = self.store.get_ref(ref)
            kept = self._kept(planned, previous_id)
            try:
                head_id = self._advance(previous_id, kept, in_memory=False)
            except _OutOfOrder:  # a head not in place order (not written by write_head): its nodes sorted here
                head_id = self._advance(previous_id, kept, in_memory=True)
            if head_id == previous_id:
                self.doc.head, self.doc.head_written = previous_id, False
                return previous_id
            try:
                self.store.set_ref(ref, head_id, expected=previous_id)
                self.doc.head, self.doc.head_written = head_id, True
                return head_id
            except RefConflict:  # another build advanced the head meanwhile: merge again
                continue
        raise StoreError(f"could not update ref {ref}: too many concurrent updates")

    def _kept(self, planned: Container[str] | None, previous_id: str | None) -> Container[str] | None:
        """The addresses the merged head keeps: `planned`, and, when another build moved the head since this one
        planned, also every address the head it planned from did not hold (this build never saw it: its config may
        have gained it since, session 74's race fuzzer)."""
        if planned is None or isinstance(self._planned_from, HeadUnknown) or previous_id == self._planned_from:
            return planned
        if self._dropped is None:
            start = self._planned_from
            nodes = iter_nodes(self.store.get_json(start), self.store.get_json) if start is not None else ()
            self._dropped = frozenset(at for at in (address_id(n["kind"], n["address"]) for n in nodes)
                                      if at not in planned)
        return _NotIn(self._dropped)

    def _advance(self, previous_id: str | None, planned: Container[str] | None, in_memory: bool) -> str:
        """The head merging this build's nodes into head `previous_id`: `previous_id` itself when that changes
        nothing, else a new head written (the ref not moved)."""
        if previous_id and self._leaves_unchanged(self._previous(previous_id, in_memory), planned):
            return previous_id
        return write_placed_head(self.store, self._head_fields(),
                                 self._merged(self._previous(previous_id, in_memory), planned))

    def _previous(self, head_id: str | None, in_memory: bool) -> Iterable[Placed]:
        """The nodes of head `head_id` with their places, in place order (as write_head stores them; _OutOfOrder
        when they are not, and then, `in_memory`, sorted here)."""
        if head_id is None:
            return ()
        nodes = iter_nodes(self.store.get_json(head_id), self.store.get_json)
        placed = ((place(node), node) for node in nodes)
        return sorted(placed, key=itemgetter(0)) if in_memory else _in_place_order(placed)

    def _places(self, previous: Iterable[Placed]) -> Iterator[tuple[Place, dict[str, Any], dict[str, Any], bool]]:
        """Place by place, in order: the place, the previous head's nodes there by address id, the merged nodes
        (this build's over those), and whether this build changes one (another key or record at an address, or a
        new one). A case at a time, so that the evaluation of a run this build replaced by another key goes with it
        (`_without_evaluations_of_replaced_runs`)."""
        for _, case in itertools.groupby(self._places_merged(previous), key=lambda merged: merged[0][0]):
            yield from _without_evaluations_of_replaced_runs(list(case))

    def _places_merged(self, previous: Iterable[Placed]
                       ) -> Iterator[tuple[Place, dict[str, Any], dict[str, Any], bool]]:
        mine = ((where, 1, node) for where, _, _, node in self._entries())
        theirs = ((where, 0, node) for where, node in previous)
        for where, group in itertools.groupby(heapq.merge(theirs, mine, key=itemgetter(0)), key=itemgetter(0)):
            before: dict[str, Any] = {}
            merged: dict[str, Any] = {}
            changed = False
            for _, new, node in group:  # (the previous head's first, then this build's in the order added)
                at = address_id(node["kind"], node["address"])
                if not new:
                    before[at] = merged[at] = node
                    continue
                if node["record"] is None:
                    continue
                old = before.get(at)
                if old is not None and node["action"] == "fail" and old["key"] == node["key"] and \
                        reusable(old.get("record_doc")):
                    continue  # a failed re-execution never demotes a result (the build log keeps the failure)
                changed = changed or old is None or old["key"] != node["key"] or old["record"] != node["record"]
                merged[at] = node
            yield where, before, merged, changed

    def _leaves_unchanged(self, previous: Iterable[Placed], planned: Container[str] | None) -> bool:
        """Would merging this build's nodes into `previous` (by address) give the same nodes: each
        recorded node already there with its key and record, and every address there still planned?"""
        return not any(changed or (planned is not None and any(at not in planned for at in before))
                       for _, before, _, changed in self._places(previous))

    def _merged(self, previous: Iterable[Placed], planned: Container[str] | None) -> Iterator[Placed]:
        """The merged nodes the campaign still plans, with their places, in place order."""
        for where, _, merged, _ in self._places(previous):
            for at, node in merged.items():
                if planned is None or at in planned:
                    yield where, node

    def _head_fields(self) -> dict[str, Any]:
        """A campaign head's fields besides its nodes: this build's log, without the pointer to itself.
        The layout (nodes in parts) is clawstore/store/headdoc.py's; the next build plans from the nodes
        without opening records, gc keeps what they name."""
        log = self.doc.to_json()
        for name in ("head", "head_written", "format", "nodes"):
            log.pop(name)
        return log


class _NotIn:
    """Every address but those in `dropped` (`in` is all advancing the head asks)."""

    def __init__(self, dropped: frozenset[str]):
        self.dropped = dropped

    def __contains__(self, address: object) -> bool:
        return address not in self.dropped


def _without_evaluations_of_replaced_runs(places: list[tuple[Place, dict[str, Any], dict[str, Any], bool]]
                                         ) -> Iterator[tuple[Place, dict[str, Any], dict[str, Any], bool]]:
    """One case's places, without the previous head's checks, judgements and results of a run this build replaced (by
    one of another key, or executed again) and did not evaluate (it failed, or the build stopped first): they scored
    the run replaced, and beside the new one they showed its score as the campaign's (a failed run after an edit:
    `RUN fail  SCORE 8.00`; a `--force` build interrupted before its judgements).
    A run of another key with the same outputs (found under its legacy key, recorded under its key now) keeps them:
    an evaluation's key covers the run's outputs, not its key (dropped, gc deleted the paid judgement)."""
    replaced = {_run_of(node) for _, before, merged, _ in places for at, node in merged.items()
                if node["kind"] == "run" and at in before and _replaces(node, before[at])}
    for where, before, merged, changed in places:
        if replaced:
            stale = [at for at, node in merged.items()
                     if node["kind"] != "run" and node is before.get(at) and _run_of(node) in replaced]
            for at in stale:
                del merged[at]
            changed = changed or bool(stale)
        yield where, before, merged, changed


def _replaces(run: dict[str, Any], before: dict[str, Any]) -> bool:
    """Does this build's `run` replace the previous head's run `before` at its address: another record (another key,
    or executed again: `--force`), and not a result with the same outputs?"""
    if run["record"] == before["record"]:
        return False
    now, then = run.get("record_doc"), before.get("record_doc")
    return not (reusable(now) and reusable(then) and run_outputs_ref(now) == run_outputs_ref(then))


def _run_of(node: dict[str, Any]) -> tuple[Any, Any]:
    """The run a node of a case is of, or evaluates: its model and repetition."""
    return node["address"].get("model_id"), node["address"].get("repetition")


class _OutOfOrder(Exception):
    """A head's nodes are not in place order."""


def _in_place_order(placed: Iterable[Placed]) -> Iterator[Placed]:
    last: Place | None = None
    for where, node in placed:
        if last is not None and where < last:
            raise _OutOfOrder
        last = where
        yield where, node
