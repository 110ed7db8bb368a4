"""The judge scores a campaign state holds, per model, case, run repetition and judge repetition.

A side of a comparison is a campaign state: a campaign head (`campaigns/<id>` or just `<id>`), a pin
(`pins/<name>` or just `<name>`), any other ref, or a head object id (`blake3:…`). A campaign imported
or pulled with --untrusted and kept apart (docs/trust.md) is found by its id too, and marked.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawstore.errors import UsageError
from clawstore.store.documents import HeadNode, read_head, read_record
from clawstore.store.headdoc import read_head_doc

if TYPE_CHECKING:
    from clawstore.store.face import ObjectReader, StoreReader

_REF_PREFIXES = ("", "pins/", "campaigns/")


@dataclass
class SideScores:
    """`scores[model_id][case_id][repetition]` = the overall scores of its successful judgements."""

    label: str
    head_id: str
    campaign_id: str
    scores: dict[str, dict[str, dict[int, list[float]]]] = field(default_factory=dict)
    signer: str | None = None  # set when the side is a campaign kept apart as untrusted
    # `verdicts[model_id][case_id][repetition]` = the result's pass verdict (with a pass threshold)
    verdicts: dict[str, dict[str, dict[int, bool]]] = field(default_factory=dict)
    # the overall scores of each run's judge repetitions, per (model_id, judge_run_id)
    judge_runs: dict[tuple[str, str], dict[tuple[str, int], list[float]]] = field(default_factory=dict)
    threshold: float | None = None  # the pass threshold on the 0-10 scale


def resolve_side(store: StoreReader, name: str) -> tuple[str, str, str | None]:
    """(label, head object id, signer if kept apart) of a side given as a ref, pin, campaign id or object id."""
    if name.startswith("blake3:"):
        if not store.has(name):
            raise UsageError(f"compare: no object {name} in store {store.root}")
        return name, name, None
    for prefix in _REF_PREFIXES:
        try:
            target = store.get_ref(prefix + name)
        except UsageError:  # not a valid ref name with this prefix
            continue
        if target:
            return prefix + name, str(target), None
    from clawstore.store.untrusted import kept_apart_head

    campaign = name.removeprefix("campaigns/")
    apart = kept_apart_head(store, campaign)
    if apart is not None:
        return f"campaigns/{campaign} (UNTRUSTED: kept apart, signed by {apart[1]})", apart[0], apart[1]
    raise UsageError(f"compare: {name!r} names no campaign, pin or ref in store {store.root} "
                     "(see claw refs)")


def read_side(store: StoreReader, name: str) -> SideScores:
    label, head_id, signer = resolve_side(store, name)
    # A side named by a ref is read under a lease naming its head: a build beside moving the ref on, then a gc,
    # deleted the head mid-read before session 74 (tests/gc/test_head_readers.py).
    by_ref = signer is None and label != head_id
    with store.reading_ref(label) if by_ref else contextlib.nullcontext(head_id) as leased:
        return _read_side(store, label, leased or head_id, signer)


def _read_side(store: StoreReader, label: str, head_id: str, signer: str | None) -> SideScores:
    doc = read_head_doc(store, head_id)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise UsageError(f"compare: {label} -> {head_id} is not a campaign state")
    head = read_head(doc, f"campaign head {head_id}")  # (a damaged node: StoreError naming its field)
    side = SideScores(label, head_id, head.campaign_id or "?", signer=signer)
    for node in head.nodes:
        if node.kind == "result" and node.record:
            _read_verdict(store, side, node)
        if node.kind != "judge" or not node.record:
            continue
        if (node.record_doc or {}).get("status") not in (None, "success"):
            continue
        record = read_record(store.get_json(node.record), f"record {node.record}")
        score = record.summary.get("overall_score")
        if record.status != "success" or score is None:
            continue
        a = node.address
        reps = side.scores.setdefault(a["model_id"], {}).setdefault(a["case_id"], {})
        reps.setdefault(int(a["repetition"]), []).append(float(score))
        runs = side.judge_runs.setdefault((a["model_id"], str(a.get("judge_run_id"))), {})
        runs.setdefault((a["case_id"], int(a["repetition"])), []).append(float(score))
    return side


def _read_verdict(store: ObjectReader, side: SideScores, node: HeadNode) -> None:
    """A result's pass verdict, and the threshold on the 0-10 scale (pass_threshold is a fraction of it)."""
    summary = read_record(store.get_json(str(node.record)), f"record {node.record}").summary
    if summary.get("passed") is None:
        return
    a = node.address
    side.verdicts.setdefault(a["model_id"], {}).setdefault(a["case_id"], {})[int(a["repetition"])] = bool(
        summary["passed"])
    if summary.get("pass_threshold") is not None:
        side.threshold = round(10.0 * float(summary["pass_threshold"]), 9)
