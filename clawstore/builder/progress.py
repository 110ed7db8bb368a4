"""Build progress on stderr: what the engine reports (`BuildProgress`) and three ways to show it (live, plain, json).

What each shows: docs/building.md (Details by module)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from clawstore.builder.lanes import Wait
from clawstore.graph.plan import Node, address_id
from clawstore.values.costs import PAID_KINDS, CostSum, source_of
from clawstore.values.tokens import tokens_known

MODES = ("auto", "live", "plain", "json", "none")
_REASON_WIDTH = 160
PLAIN_FLUSH_S = 0.1  # plain lines wait at most this long for their write while the build thread is busy
PLAIN_FLUSH_LINES = 256


def one_line(text: Any, width: int = _REASON_WIDTH) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def failure_reason(node: Node) -> str:
    """Why a node failed, in one line: the record's error (code: message), else the exception text;
    and whether the earlier result it had is kept (a failed re-execution never demotes one)."""
    record = node.record or {}
    error = record.get("error") or {}
    if error:
        parts = [str(p) for p in (error.get("code"), error.get("message")) if p]
        why = ": ".join(parts) or record.get("status") or "failed"
    else:
        why = node.error or record.get("status") or "failed"
    if node.kept_result:
        kept = "; the earlier result is kept"
        return one_line(why, _REASON_WIDTH - len(kept)) + kept
    return one_line(why)


@dataclass
class Failure:
    node: str  # kind/model/case/rep[/judge run/judge rep]
    reason: str


@dataclass
class _Model:
    total: int = 0
    done: int = 0
    running: int = 0
    failed: int = 0
    reused: int = 0


@dataclass
class _State:
    started_at: float = field(default_factory=time.monotonic)
    total: int = 0
    done: int = 0
    pending: int = 0  # of `done`: left in a provider batch, not recorded (the next build or `claw batch` collects them)
    requests: int = 0
    models: dict[str, _Model] = field(default_factory=dict)
    phases: Counter[str] = field(default_factory=Counter)  # nodes to execute, by kind's label (runs, judges, ...)
    begun: Counter[str] = field(default_factory=Counter)  # nodes of the layers begun, executed or reused, by kind
    evaluated: Counter[str] = field(default_factory=Counter)  # runs whose checks, judges, results layer has begun
    input_tokens: int = 0  # of the paid nodes whose tokens are known
    output_tokens: int = 0
    tokens_unknown: int = 0  # paid nodes whose tokens are unknown: the sums above are what is known (`≥`)
    cost: CostSum = CostSum()  # of the paid nodes finished so far (reported, priced, unknown)
    failures: list[Failure] = field(default_factory=list)
    warnings: list[Failure] = field(default_factory=list)  # a node's record's `prompt_warning` (values/prompt_cut.py)
    stopping: str | None = None
    layer: str = ""  # the layer executing now (runs, checks, judges, results)
    waits: dict[str, Wait] = field(default_factory=dict)  # rate-limited models, by label (past ones too)
    batches: list[str] = field(default_factory=list)  # each provider batch's progress (builder/batching.py)


class BuildProgress:
    """The counts every display shows; subclasses draw them. Safe to call from worker threads."""

    def __init__(self, planned_cost_usd: float | None = None,
                 planned_layers: Mapping[str, Mapping[str, int]] | None = None):
        self.planned_cost_usd = planned_cost_usd
        self.planned_minimum = False  # the planned cost is a floor (open_progress says)
        # The plan's nodes by layer (kind -> execute, reuse: SpendPlan.layers), made before the build began: a layer's
        # stale nodes are known only as it begins (a judgement's staleness depends on its run's record), and a total
        # of the layers begun alone read `6/9 nodes`, ETA near zero, with the judges and results still to come.
        self.planned_layers = {kind: (int(c.get("execute", 0)), int(c.get("execute", 0)) + int(c.get("reuse", 0)))
                               for kind, c in (planned_layers or {}).items()}
        self.state = _State()
        self._lock = threading.Lock()
        # Nodes started on worker threads, counted as running by the next reader: a deque's append needs no lock, so
        # a worker starting a node never waits for (nor wakes) the build thread holding `_lock`.
        self._starts: deque[Node] = deque()

    # ---- what the engine reports
    def phase(self, label: str, stale: Sequence[Node], reused: Sequence[Node]) -> None:
        with self._lock:
            s = self.state
            s.total += len(stale)
            s.layer = label
            for node in stale:
                self._model(node).total += 1
                s.phases[_LAYER_LABEL.get(node.kind, node.kind)] += 1  # (by kind: a batch's phase is one of its own)
            for node in reused:
                self._model(node).reused += 1
            if stale or reused:  # (a phase's nodes are of one layer: no count per node)
                s.begun[(stale or reused)[0].kind] += len(stale) + len(reused)
        self.on_phase(label, len(stale), len(reused))

    def started(self, node: Node) -> None:
        self._starts.append(node)
        self.on_started(node)

    def _count_starts(self) -> None:
        """The nodes started since the last reader into their models' `running` (under `_lock`)."""
        starts = self._starts
        while starts:
            self._model(starts.popleft()).running += 1

    def finished(self, node: Node, status: str | None, ok: bool, spent: CostSum | None = None,
                 adopted: bool = False) -> None:
        """`spent`: what a node failed without a record of its own spent (builder/unstored.py unrecorded_cost).
        `adopted`: its record is another build's (builder/claimed.py Adopted): nothing was spent on it here (before
        session 73 its cost and tokens were counted in the progress lines, not in the build's summary)."""
        reason = None if ok else failure_reason(node)
        record = node.record if spent is None and not adopted else None
        metrics = (record.get("metrics") if record else None) or {}
        paid = node.kind in PAID_KINDS and not adopted
        with self._lock:
            self._count_starts()  # (its own start first: a node's start is appended before it can finish)
            s = self.state
            model = self._model(node)
            model.running = max(0, model.running - 1)
            model.done += 1
            s.done += 1
            if paid and (spent is not None or (record and not tokens_known(metrics))):
                s.tokens_unknown += 1
                s.input_tokens += int(metrics.get("input_tokens_known") or 0)  # (what it spent at least: `≥`)
                s.output_tokens += int(metrics.get("output_tokens_known") or 0)
            elif metrics:  # checks and results have none: no tokens, no cost
                s.input_tokens += int(metrics.get("input_tokens") or 0)
                s.output_tokens += int(metrics.get("output_tokens") or 0)
            if paid:
                s.requests += 1
                if spent is not None:
                    s.cost += spent
                elif record:
                    s.cost += CostSum.of_metrics(metrics)
            if reason is not None:
                model.failed += 1
                s.failures.append(Failure(address_id(node.kind, node.address), reason))
        self.on_finished(node, status or "error", ok, reason)

    def warned(self, node: Node, record: Mapping[str, Any]) -> None:
        """The warning of a record this build made (`summary.prompt_warning`: values/prompt_cut.py), for its summary:
        read from the full record (the node keeps a view without it: buildlog.py planning_view)."""
        warning = (record.get("summary") or {}).get("prompt_warning")
        if warning:
            with self._lock:
                self.state.warnings.append(Failure(address_id(node.kind, node.address), str(warning)))

    def pending(self, node: Node, batch: str) -> None:
        """A node a provider batch stands for when the build is done with it (builder/batch_layer.py, or claimed.py
        InBatch: another build's batch): done for this build, which neither asks it nor records it (whoever collects
        the batch does), and counted as pending; nothing spent here."""
        with self._lock:
            self._model(node).done += 1
            self.state.done += 1
            self.state.pending += 1
        self.on_pending(node, batch)

    def rate_limited(self, wait: Wait) -> None:
        with self._lock:
            self.state.waits[wait.label] = wait
        self.on_rate_limited(wait)

    def in_flight(self, limit: int, ceiling: int) -> None:
        """The build's in-flight limit moved (builder/inflight.py): `limit` of `ceiling` (max_concurrency)."""
        self.on_in_flight(limit, ceiling)

    def batches(self, lines: list[str]) -> None:
        """Where each provider batch of the build stands (one line each), after every poll."""
        with self._lock:
            self.state.batches = list(lines)
        self.on_batches(lines)

    def interrupt(self, running: int) -> None:
        with self._lock:
            self.state.stopping = (f"Ctrl-C: no new node starts; waiting for {running} running "
                                   "(Ctrl-C again cancels them)")
        self.on_interrupt(running)

    def evaluated(self, label: str, runs: int) -> None:
        """The layer `label` (checks, judges, results) of `runs` runs has begun: whatever nodes it had (a failed run has
        none), no more of them are to come."""
        with self._lock:
            self.state.evaluated[label] += runs

    def expected(self) -> dict[str, int]:
        """The nodes the plan expects to execute in the layers not wholly begun (under `_lock`), by label, in the
        build's order: a layer's planned executions less those begun, until every run's part of it has begun (then
        none, whatever the count turned out to be: new checks may equal stored ones, a failed run has no judgement)."""
        s = self.state
        runs = self.planned_layers.get("run", (0, 0))[1]
        left: dict[str, int] = {}
        for kind, label in _LAYER_LABEL.items():  # (workplan.LAYERS' order; importing it would make a circle)
            planned = self.planned_layers.get(kind)
            if planned is None or planned[0] <= s.phases[label]:
                continue
            if (s.begun[kind] < planned[1]) if kind == "run" else (s.evaluated[label] < runs):
                left[label] = planned[0] - s.phases[label]
        return left

    def running(self) -> int:
        """Nodes started and not finished (a second Ctrl-C cancels them, whatever they had spent)."""
        with self._lock:
            self._count_starts()
            return sum(model.running for model in self.state.models.values())

    def idle(self) -> None:
        """The build's thread has no outcome to record now and is about to wait for one."""

    def close(self) -> None:
        """End of the build (or of an interrupted one)."""

    @property
    def failures(self) -> list[Failure]:
        return list(self.state.failures)

    @property
    def warnings(self) -> list[Failure]:
        return list(self.state.warnings)

    def _model(self, node: Node) -> _Model:
        name = str(node.address.get("model_id", "?"))
        models = self.state.models
        model = models.get(name)  # (not setdefault: it would make a throwaway _Model per node)
        if model is None:
            model = models[name] = _Model()
        return model

    # ---- drawing hooks
    def on_phase(self, label: str, stale: int, reused: int) -> None: ...

    def on_started(self, node: Node) -> None: ...

    def on_finished(self, node: Node, status: str, ok: bool, reason: str | None) -> None: ...

    def on_pending(self, node: Node, batch: str) -> None:
        self.on_finished(node, "pending", True, pending_text(batch))

    def on_rate_limited(self, wait: Wait) -> None: ...

    def on_interrupt(self, running: int) -> None: ...

    def on_in_flight(self, limit: int, ceiling: int) -> None: ...

    def on_batches(self, lines: list[str]) -> None: ...


def pending_text(batch: str) -> str:
    return f"waits on batch {batch} at the provider: `claw batch status` or the next build collects it"


def wait_text(wait: Wait) -> str:
    """`<model> rate-limited, retrying at 21:03:07 (Retry-After 4 s; concurrency 2 of 4)`: local time."""
    at = datetime.fromtimestamp(wait.until).strftime("%H:%M:%S")
    why = f"Retry-After {wait.retry_after_s:g} s" if wait.retry_after_s is not None else "HTTP 429, backing off"
    return f"{wait.label} rate-limited, retrying at {at} ({why}; concurrency {wait.limit} of {wait.slots})"


class PlainProgress(BuildProgress):
    """One line per finished node (a failure with its reason), for logs and pipes. Each line is made when its node is
    recorded (durable) and written in order, in batches: whenever the build's thread waits for the next outcome
    (`idle`), and at least every PLAIN_FLUSH_S while it is busy recording one outcome after another (a write and a
    flush per node cost a system call each, with the interpreter lock handed to a worker and back)."""

    def __init__(self, stream: TextIO, planned_cost_usd: float | None = None):
        super().__init__(planned_cost_usd)
        self.stream = stream
        self._labels: Counter[str] = Counter()
        self._pending: list[str] = []  # lines made and not yet written (under _lock)
        self._written_at = time.monotonic()

    def on_finished(self, node: Node, status: str, ok: bool, reason: str | None) -> None:
        label = _LAYER_LABEL.get(node.kind, node.kind)
        with self._lock:
            self._labels[label] += 1
            line = f"[{label} {self._labels[label]}/{self.state.phases[label]}] " \
                   f"{address_id(node.kind, node.address)}: {status}"
            if reason and reason != status:
                line += f" ({reason})"
            if node.kind in PAID_KINDS:
                line += f" · spent {self.state.cost.usd_text()}"
            pending = self._pending
            pending.append(line + "\n")
            if len(pending) >= PLAIN_FLUSH_LINES or time.monotonic() - self._written_at >= PLAIN_FLUSH_S:
                self._write_pending()

    def _write_pending(self, more: str = "") -> None:
        """The lines waiting, then `more`, in one write (under _lock)."""
        if self._pending:
            more = "".join(self._pending) + more
            self._pending.clear()
        if more:
            self.stream.write(more)
            self.stream.flush()
        self._written_at = time.monotonic()

    def idle(self) -> None:
        if self._pending:
            with self._lock:
                self._write_pending()

    def on_phase(self, label: str, stale: int, reused: int) -> None:
        self.idle()  # (a layer's planning between two batches of lines)

    def on_rate_limited(self, wait: Wait) -> None:
        with self._lock:
            self._write_pending(f"WAIT {wait_text(wait)}\n")

    def on_interrupt(self, running: int) -> None:
        with self._lock:
            self._write_pending(f"interrupt: no new node starts; waiting for {running} running "
                                "(Ctrl-C again cancels them)\n")

    def on_batches(self, lines: list[str]) -> None:
        with self._lock:
            self._write_pending("".join(f"BATCH {line}\n" for line in lines))

    def close(self) -> None:
        with self._lock:
            self._write_pending()


_LAYER_LABEL = {"run": "runs", "checks": "checks", "judge": "judges", "result": "results"}


class JsonProgress(BuildProgress):
    """One JSON object per line: events a dashboard or a CI annotation can follow."""

    def __init__(self, stream: TextIO, planned_cost_usd: float | None = None):
        super().__init__(planned_cost_usd)
        self.stream = stream
        self._write_lock = threading.Lock()

    def _emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "t": round(time.monotonic() - self.state.started_at, 3), **fields},
                          sort_keys=True, default=str)
        with self._write_lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def on_phase(self, label: str, stale: int, reused: int) -> None:
        self._emit("phase", phase=label, execute=stale, reuse=reused)

    def on_started(self, node: Node) -> None:
        self._emit("started", node=address_id(node.kind, node.address), kind=node.kind, **node.address)

    def on_finished(self, node: Node, status: str, ok: bool, reason: str | None) -> None:
        metrics = (node.record or {}).get("metrics") or {}
        self._emit("finished" if ok else "failed", node=address_id(node.kind, node.address), kind=node.kind,
                   status=status, reason=reason, cost_usd=metrics.get("cost_usd"),
                   cost_source=source_of(metrics) if node.kind in PAID_KINDS and node.record else None,
                   latency_s=metrics.get("latency_s"), **node.address)

    def on_pending(self, node: Node, batch: str) -> None:
        self._emit("pending", node=address_id(node.kind, node.address), kind=node.kind, status="pending",
                   reason=pending_text(batch), batch=batch, **node.address)

    def on_rate_limited(self, wait: Wait) -> None:
        self._emit("rate_limited", model=wait.label, until=datetime.fromtimestamp(wait.until).astimezone().isoformat(),
                   retry_after_s=wait.retry_after_s, concurrency=wait.limit, max_concurrency=wait.slots)

    def on_interrupt(self, running: int) -> None:
        self._emit("interrupt", running=running)

    def on_in_flight(self, limit: int, ceiling: int) -> None:
        self._emit("in_flight", limit=limit, max_concurrency=ceiling)

    def on_batches(self, lines: list[str]) -> None:
        self._emit("batches", batches=lines)

    def close(self) -> None:
        s = self.state
        tokens = {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens}
        if s.tokens_unknown:  # (null when a part is unknown, the known part beside it: as the build's JSON)
            tokens = {**{f"{name}_known": n for name, n in tokens.items()}, **dict.fromkeys(tokens),
                      "tokens_unknown": s.tokens_unknown}
        self._emit("totals", done=s.done, total=s.total, pending=s.pending, failed=len(s.failures), **tokens,
                   cost_usd=s.cost.shown, cost_known_usd=s.cost.shown_known, cost_sources=s.cost.sources(),
                   planned_cost_usd=self.planned_cost_usd, planned_cost_minimum=self.planned_minimum)


class QuietProgress(BuildProgress):
    """Counts only (the final table still names each failure)."""
