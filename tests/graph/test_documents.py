"""The typed, versioned documents: records and campaign heads keep their JSON layout byte for byte."""

from __future__ import annotations

import pytest

from clawstore.errors import StoreError
from clawstore.graph.records import make_record
from clawstore.store.documents import RECORD_VERSION, RecordDoc
from clawstore.values.canonical import canonical_json

KEY = "blake3:" + "a" * 64
METRICS = {"input_tokens": 1, "output_tokens": 2, "reasoning_tokens": 0, "cached_tokens": 0, "cost_usd": 0.1,
           "latency_s": 0.5}


def test_a_record_is_the_documented_json_object() -> None:
    record = make_record(kind="run", key=KEY, address={"case_id": "c", "model_id": "m", "repetition": 0},
                         status="success", cacheable=True, outputs={"artifact": "blake3:" + "b" * 64},
                         metrics={**METRICS, "extra": 9}, summary={"final_text": "hi"}, error=None,
                         started_at="2026-11-25T14:00:00.000000Z", finished_at="2026-11-25T14:00:01.000000Z",
                         build_id="b1")
    assert canonical_json(record) == canonical_json({
        "record_version": RECORD_VERSION, "kind": "run", "key": KEY, "input": KEY,
        "address": {"case_id": "c", "model_id": "m", "repetition": 0}, "status": "success", "cacheable": True,
        "outputs": {"artifact": "blake3:" + "b" * 64}, "metrics": METRICS, "summary": {"final_text": "hi"},
        "error": None, "started_at": "2026-11-25T14:00:00.000000Z", "finished_at": "2026-11-25T14:00:01.000000Z",
        "build_id": "b1"})
    assert RecordDoc.from_json(record).to_json() == record


def test_version_1_records_are_read_and_others_refused() -> None:
    record = make_record(kind="judge", key=KEY, address={}, status="success", cacheable=True, outputs={},
                         metrics=METRICS, summary={}, error=None, started_at="s", finished_at="f", build_id="b")
    old = {k: v for k, v in record.items() if k not in ("record_version", "input")}
    assert RecordDoc.from_json(old).record_version == 1
    with pytest.raises(StoreError, match="record_version"):
        RecordDoc.from_json({**record, "record_version": 3})
    with pytest.raises(StoreError, match="status: expected a string"):
        RecordDoc.from_json({k: v for k, v in record.items() if k != "status"})
