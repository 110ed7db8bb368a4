"""The build log (one JSON file per `claw build`) and the campaign head ref it advances."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError
from clawstore.graph.plan import HeadNodes, Node, address_id
from clawstore.graph.records import utc_now
from clawstore.store import RefConflict
from clawstore.store.actions import reusable
from clawstore.store.buildlogs import (
    append_journal,
    build_log_path,
    encode_node,
    read_build_log,
    seal_build_log,
    write_build_log,
)
from clawstore.store.documents import BUILD_LOG_FORMAT, COUNTERS, JOURNALED_FORMAT, TOKEN_METRICS, BuildLogDoc
from clawstore.store.headdoc import read_head_doc, write_head
from clawstore.values.costs import PAID_KINDS, CostSum

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


def new_build_id() -> str:
    """<UTC timestamp to the second>-<8 random hex>: sorts by start time, unique across processes."""
    return utc_now().replace(":", "").replace("-", "").replace(".", "")[:15] + "-" + uuid.uuid4().hex[:8]


class BuildLog:
    """Accumulates the nodes of one build: while it runs each `write` appends the nodes recorded since
    the last one to its journal; `seal` writes the final log. It keeps of each node what the campaign
    head needs, not its full record (layout and why: docs/store.md, build log format 3)."""

    def __init__(self, store: Store, campaign: dict[str, Any], filter: dict[str, list[str]] | None = None):
        self.store = store
        self.build_id = new_build_id()
        self.doc = BuildLogDoc(build_id=self.build_id, started_at=utc_now(), campaign=campaign, filter=filter,
                               format=JOURNALED_FORMAT)
        self._lock = threading.Lock()
        # Every node, reused ones too, as [kind, key, record, action, address, line, its record's planning view]
        # (the view: what the campaign head carries of it; the node's own, so held once).
        self._all: list[list[Any]] = []
        self.path = build_log_path(store.root, self.build_id)
        self._awaiting: dict[int, Node] = {}  # id -> node recorded whose record is not durable yet
        self._pending: list[dict[str, Any] | int] = []  # journal lines not written yet (an int: a fix of that line)
        self._lines = 0  # node lines so far (journaled and pending): the next one's index
        self._journaled = 0  # node lines in the journal
        self._fixed: set[int] = set()  # node lines whose record was not stored after all
        self._sealed = False

    @property
    def counts(self) -> dict[str, int]:
        return self.doc.counts

    @property
    def metrics(self) -> dict[str, Any]:
        return self.doc.metrics

    def add(self, kind: str, key: str, record_id: str | None, action: str, address: dict[str, Any],
            record: dict[str, Any] | None) -> None:
        with self._lock:
            view = planning_view(record) if record_id and record else None
            line = None
            if action != "reuse":
                line = self._lines
                self._lines += 1
                self._pending.append({"kind": kind, "key": key, "record": record_id, "action": action,
                                      "address": address})
            self._all.append([kind, key, record_id, action, address, line, view])
            self.doc.counts[COUNTERS[action]] += 1
            if record and action in ("exec", "fail"):  # spent in this build
                metrics = self.doc.metrics
                for name in TOKEN_METRICS:
                    metrics[name] += int(record["metrics"].get(name) or 0)
                if kind in PAID_KINDS:
                    metrics.update((CostSum.of_build(metrics) + CostSum.of_metrics(record["metrics"])).build_metrics())

    def await_durable(self, node: Node) -> None:
        """Remember `node` until its record is durable (group commit: the end of its window)."""
        self._awaiting[id(node)] = node
        self.store.when_durable(lambda: self._awaiting.pop(id(node), None))

    def not_durable(self) -> list[Node]:
        """Nodes recorded whose commit window has not been committed (yet, or ever)."""
        return list(self._awaiting.values())

    def unstore(self, node: Node) -> None:
        """A recorded node whose record could not be made durable after all: it failed, not executed."""
        with self._lock:
            for entry in self._all:
                kind, key, record_id, action, address, line, _ = entry
                if key == node.key and record_id == node.record_id and address == node.address:
                    if action == "exec":
                        self.doc.counts["executed"] -= 1
                        self.doc.counts["failed"] += 1
                    entry[2], entry[3] = None, "fail"
                    if line is None:
                        continue
                    if line >= self._journaled:  # not written yet: written as it is now
                        pending = self._pending[self._pending_at(line)]
                        assert isinstance(pending, dict)
                        pending["action"], pending["record"] = "fail", None
                    else:
                        self._fixed.add(line)
                        self._pending.append(line)

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
            self._flush_pending()
            write_build_log(self.store.root, self.doc)

    def _flush_pending(self) -> None:
        pending = self._pending
        append_journal(self.store.root, self.build_id,
                       [encode_node(p if isinstance(p, dict) else {"fix": p}) for p in pending])
        self._journaled += sum(1 for p in pending if isinstance(p, dict))
        self._pending = []

    def seal(self) -> None:
        """The build's last write: its log with every node inline (format 2), the journal removed."""
        if self._sealed:
            self._reseal()
            return
        self.store.flush()
        with self._lock:
            self._flush_pending()
            seal_build_log(self.store.root, self.doc, self._fixed)
            self._sealed = True

    def _reseal(self) -> None:
        """A write after the seal (an interrupt while sealing): the sealed nodes with this document's fields."""
        with self._lock:
            nodes = read_build_log(self.path).nodes
            write_build_log(self.store.root, dataclasses.replace(self.doc, nodes=nodes, format=BUILD_LOG_FORMAT))

    def end(self, state: str) -> None:
        """Mark the build ended (written by the next `write`, after the head is advanced)."""
        self.doc.state = state
        self.doc.finished_at = utc_now()

    def finish(self, state: str) -> None:
        self.end(state)
        self.write()

    def advance_head(self, planned: set[str] | None, known: tuple[str | None, HeadNodes] | None = None) -> str:
        """Point `campaigns/<id>` at the merged latest state: this build's nodes over the previous head's, keeping only
        addresses the campaign still plans (all, for a filtered build); compare-and-set, retried on a race. `known`: the
        head as read at the start. An unchanged state is not rewritten."""
        ref = head_ref(self.doc.campaign["id"])
        for _ in range(20):
            previous_id = self.store.get_ref(ref)
            if known is not None and known[0] == previous_id:
                previous = {address: node.as_doc() for address, node in known[1].items()}
            else:
                previous = {address_id(n["kind"], n["address"]): n
                            for n in (read_head_doc(self.store, previous_id).get("nodes", []) if previous_id else [])}
            if previous_id and self._leaves_unchanged(previous, planned):
                self.doc.head, self.doc.head_written = previous_id, False
                return previous_id
            merged = previous  # (a copy of its own: merged into in place)
            for kind, key, record_id, action, address, _, view in self._recorded(previous):
                # The head carries each record too, so the next build plans without reading
                # thousands of record objects one by one.
                merged[address_id(kind, address)] = {"kind": kind, "key": key, "record": record_id, "action": action,
                                                     "address": address, "record_doc": view}
            # In any order: write_head puts the nodes in their place order.
            nodes = [node for a, node in merged.items() if planned is None or a in planned]
            del merged, previous
            head_id = write_head(self.store, self._head_fields(), nodes)
            del nodes
            try:
                self.store.set_ref(ref, head_id, expected=previous_id)
                self.doc.head, self.doc.head_written = head_id, True
                return head_id
            except RefConflict:  # another build advanced the head meanwhile: merge again
                continue
        raise StoreError(f"could not update ref {ref}: too many concurrent updates")

    def _leaves_unchanged(self, previous: dict[str, Any], planned: set[str] | None) -> bool:
        """Would merging this build's nodes into `previous` (by address) give the same nodes: each
        recorded node already there with its key and record, and every address there still planned?"""
        for kind, key, record_id, _, address, _, _ in self._recorded(previous):
            old = previous.get(address_id(kind, address))
            if old is None or old["key"] != key or old["record"] != record_id:
                return False
        return planned is None or all(address in planned for address in previous)

    def _recorded(self, previous: dict[str, Any]) -> list[list[Any]]:
        """This build's nodes that change the head: those with a record, except a failure where the head
        holds a reusable record for the same key (a failed re-execution never demotes a result; the
        build log keeps the failure)."""
        found = []
        for entry in self._all:
            kind, key, record_id, action, address, _, _ = entry
            if record_id is None:
                continue
            old = previous.get(address_id(kind, address))
            if action == "fail" and old is not None and old["key"] == key and reusable(old.get("record_doc")):
                continue
            found.append(entry)
        return found

    def _head_fields(self) -> dict[str, Any]:
        """A campaign head's fields besides its nodes: this build's log, without the pointer to itself.
        The layout (nodes in parts) is clawstore/store/headdoc.py's; the next build plans from the nodes
        without opening records, gc keeps what they name."""
        log = self.doc.to_json()
        for name in ("head", "head_written", "format", "nodes"):
            log.pop(name)
        return log
