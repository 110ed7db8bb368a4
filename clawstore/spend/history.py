"""What the store has already spent, per model and per (model, case): the history `claw plan` estimates from.

Read from the manifest (every run and judgement any build in this store executed, across campaigns),
one row per record. A run's prompt size comes from its stored input document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.store.core.layout import StoreLayout

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader

# Prompt sizes are read for at most this many recent runs per model (one object read each).
PROMPT_SAMPLE_PER_MODEL = 200

# Only the providers' own costs are history: a priced one is the declared price, read afresh each plan.
_REPORTED = "any_value(cost_usd) filter (where cost_source = 'reported')"
# A node whose tokens are unknown (a reply's usage not believed: NULL, never 0) says nothing of what a call spends.
_KNOWN = "input_tokens is not null and output_tokens is not null"
# Both ordered whole (ties too): the means are float sums, so two plans of the same history add them in one order
# and print the same estimates (a group by alone returns its rows in whatever order its threads finish).
_RUNS_SQL = f"""
select record_id, any_value(requested_model), any_value(case_id), any_value(input_document_id),
       any_value(input_tokens), any_value(output_tokens), {_REPORTED}, any_value(latency_s),
       max(finished_at) as finished
from run_history where record_id is not null and status in ('success', 'invalid', 'incomplete') and {_KNOWN}
group by record_id order by finished desc, record_id
"""
_JUDGES_SQL = f"""
select record_id, any_value(judge_model), any_value(case_id), any_value(input_tokens),
       any_value(output_tokens), {_REPORTED}, any_value(latency_s)
from judgement_history where record_id is not null and status = 'success' and {_KNOWN}
group by record_id order by record_id
"""


@dataclass
class Usage:
    """Sums over the history rows of one model (or one model × case)."""

    count: int = 0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    latency_s: float = 0.0
    priced: int = 0  # rows whose provider reported a cost (the fit below is over them)
    cost_usd: float = 0.0
    prompt_chars: float = 0.0  # over the rows whose prompt size is known
    prompt_tokens: float = 0.0  # input tokens of those same rows
    samples: list[tuple[float, float, float]] = field(default_factory=list)  # (in, out, cost) priced rows

    def add(self, input_tokens: float, output_tokens: float, cost: float | None, latency: float,
            prompt_chars: int | None = None) -> None:
        self.count += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.latency_s += latency
        if cost is not None:
            self.priced += 1
            self.cost_usd += cost
            self.samples.append((input_tokens, output_tokens, cost))
        if prompt_chars:
            self.prompt_chars += prompt_chars
            self.prompt_tokens += input_tokens

    def mean(self, name: str) -> float:
        return float(getattr(self, name)) / self.count if self.count else 0.0

    @property
    def tokens_per_char(self) -> float | None:
        return self.prompt_tokens / self.prompt_chars if self.prompt_chars else None

    @property
    def mean_cost(self) -> float | None:
        return self.cost_usd / self.priced if self.priced else None

    def token_prices(self) -> tuple[float, float] | None:
        """USD per input and per output token that best explain the reported costs (least squares);
        one blended rate when the rows cannot tell input from output apart."""
        if not self.samples:
            return None
        a = sum(i * i for i, _, _ in self.samples)
        b = sum(i * o for i, o, _ in self.samples)
        d = sum(o * o for _, o, _ in self.samples)
        e = sum(i * c for i, _, c in self.samples)
        f = sum(o * c for _, o, c in self.samples)
        det = a * d - b * b
        if det > 1e-9 * max(a * d, 1.0):
            p_in, p_out = (e * d - b * f) / det, (a * f - b * e) / det
            if p_in >= 0 and p_out >= 0:
                return p_in, p_out
        tokens = sum(i + o for i, o, _ in self.samples)
        rate = sum(c for _, _, c in self.samples) / tokens if tokens else 0.0
        return rate, rate


@dataclass
class History:
    runs: dict[tuple[str, str], Usage] = field(default_factory=dict)  # (requested_model, case_id)
    run_models: dict[str, Usage] = field(default_factory=dict)
    judges: dict[tuple[str, str], Usage] = field(default_factory=dict)  # (judge_model, case_id)
    judge_models: dict[str, Usage] = field(default_factory=dict)


def prompt_chars(document: dict[str, Any]) -> int:
    """The size of what a run sends: its messages and turns, and its attachments' bytes."""
    inputs = document.get("input") or {}
    total = 0
    for message in [*(inputs.get("messages") or []), *(inputs.get("turns") or [])]:
        content = message.get("content") if isinstance(message, dict) else None
        total += len(content) if isinstance(content, str) else len(json.dumps(content))
    for attachment in (document.get("attachments") or {}).values():
        total += int((attachment or {}).get("size") or 0)
    return total


def _num(value: Any) -> float:
    return float(value) if value is not None else 0.0


def _never_built(layout: StoreLayout) -> bool:
    """No build log to index and no history indexed before (the manifest's packs and segments: query/segments.py)."""
    indexed = (layout.manifest / "packs", layout.manifest / "segments")
    return not any(layout.builds.glob("*.json")) and not any(d.is_dir() and any(d.iterdir()) for d in indexed)


def load_history(store: StoreReader) -> History:
    """Index pending builds into the manifest, then read every executed run and judgement."""
    if _never_built(StoreLayout(store.root)):
        return History()  # (nothing to read: DuckDB's import, its views and two queries were ~0.15 s of a plan)
    from clawstore.query.engine import run_query
    from clawstore.query.manifest import index_pending

    index_pending(store)
    history = History()
    sampled: dict[str, int] = {}
    for _, model, case, doc_id, tin, tout, cost, latency, _ in run_query(Path(store.root), _RUNS_SQL).rows:
        chars = None
        if doc_id and sampled.get(model, 0) < PROMPT_SAMPLE_PER_MODEL and store.has(doc_id):
            chars = prompt_chars(store.get_json(doc_id))
            sampled[model] = sampled.get(model, 0) + 1
        args = (_num(tin), _num(tout), None if cost is None else float(cost), _num(latency), chars)
        history.runs.setdefault((model, case), Usage()).add(*args)
        history.run_models.setdefault(model, Usage()).add(*args)
    for _, model, case, tin, tout, cost, latency in run_query(Path(store.root), _JUDGES_SQL).rows:
        args = (_num(tin), _num(tout), None if cost is None else float(cost), _num(latency), None)
        history.judges.setdefault((model, case), Usage()).add(*args)
        history.judge_models.setdefault(model, Usage()).add(*args)
    return history
