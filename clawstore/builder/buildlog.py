"""The build log (one JSON file per `claw build`) and the campaign head ref it advances."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

from clawstore.errors import StoreError
from clawstore.graph.plan import address_id
from clawstore.graph.records import utc_now
from clawstore.store import RefConflict
from clawstore.store.durable import write_file_atomic


def head_ref(campaign: str) -> str:
    return f"campaigns/{campaign}"




# What the next build needs of a record to plan and print without reading it: everything but the
# bulky summary (per-check lists, judge dimensions), which stays in the record object itself.
_PLANNING_FIELDS = ("status", "cacheable", "outputs", "metrics", "error")
_PLANNING_SUMMARY = ("final_score", "passed")


def planning_view(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    view = {name: record.get(name) for name in _PLANNING_FIELDS}
    summary = record.get("summary") or {}
    view["summary"] = {name: summary[name] for name in _PLANNING_SUMMARY if name in summary}
    return view


class BuildLog:
    """Accumulates the nodes of one build and rewrites `<store>/builds/<id>.json` atomically."""

    def __init__(self, store: Any, campaign: dict[str, Any]):
        self.store = store
        self.build_id = utc_now().replace(":", "").replace("-", "").replace(".", "")[:15] + "-" + uuid.uuid4().hex[:8]
        self.data: dict[str, Any] = {
            "build_id": self.build_id,
            "started_at": utc_now(),
            "finished_at": None,
            "state": "running",
            "campaign": campaign,
            "nodes": [],
            "counts": {"executed": 0, "reused": 0, "failed": 0, "skipped": 0},
            "metrics": {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "cached_tokens": 0,
                        "cost_usd": 0.0},
        }
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}  # record id -> record, for the campaign head
        self.path = Path(store.root) / "builds" / f"{self.build_id}.json"

    def add(self, kind: str, key: str, record_id: str | None, action: str, address: dict[str, Any],
            record: dict[str, Any] | None) -> None:
        with self._lock:
            if record_id and record:
                self._records[record_id] = record
            self.data["nodes"].append({"kind": kind, "key": key, "record": record_id, "action": action,
                                       "address": address})
            counter = {"exec": "executed", "reuse": "reused", "fail": "failed", "skip": "skipped"}[action]
            self.data["counts"][counter] += 1
            if record and action in ("exec", "fail"):  # spent in this build
                metrics = self.data["metrics"]
                for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
                    metrics[name] += int(record["metrics"].get(name) or 0)
                metrics["cost_usd"] += float(record["metrics"].get("cost_usd") or 0.0)

    def write(self) -> None:
        with self._lock:
            payload = json.dumps(self.data, sort_keys=True, separators=(",", ":")).encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # The temp file goes to the store's tmp/, named for this process: a killed build's
            # leftover is found and removed by the next build, gc or fsck --repair.
            write_file_atomic(self.path, payload, Path(self.store.root) / "tmp")
        except OSError as exc:
            raise StoreError(f"cannot write build log {self.path}: {exc}") from exc

    def finish(self, state: str) -> None:
        self.data["state"] = state
        self.data["finished_at"] = utc_now()
        self.write()

    def advance_head(self, planned: set[str] | None, known: tuple[str | None, dict[str, Any]] | None = None) -> str:
        """Point `campaigns/<id>` at the merged latest state: this build's nodes over the previous head's,
        keeping only addresses the campaign still plans (all, for a filtered build).
        Compare-and-set, retried on a race. `known`: (head id, its nodes by address) as the caller read
        them at the start of the build, used while the ref still points there. An unchanged state is
        not rewritten (a no-op build leaves the head as it was)."""
        ref = head_ref(self.data["campaign"]["id"])
        for _ in range(20):
            previous_id = self.store.get_ref(ref)
            if known is not None and known[0] == previous_id:
                previous = dict(known[1])
            else:
                previous = {address_id(n["kind"], n["address"]): n
                            for n in (self.store.get_json(previous_id).get("nodes", []) if previous_id else [])}
            merged = dict(previous)
            for node in self.data["nodes"]:
                if node["record"] is not None:
                    # The head carries each record too, so the next build plans without reading
                    # thousands of record objects one by one.
                    merged[address_id(node["kind"], node["address"])] = {
                        **node, "record_doc": planning_view(self._records.get(node["record"]))}
            nodes = [merged[a] for a in sorted(merged) if planned is None or a in planned]
            if previous_id and [(n["key"], n["record"]) for n in nodes] == [
                    (n["key"], n["record"]) for n in (previous[a] for a in sorted(previous))]:
                return previous_id
            head = {**self.data, "nodes": nodes}
            head_id = self.store.put_json(head)
            try:
                self.store.set_ref(ref, head_id, expected=previous_id)
                return head_id
            except RefConflict:  # another build advanced the head meanwhile: merge again
                continue
        raise StoreError(f"could not update ref {ref}: too many concurrent updates")
