"""A running build's log: its nodes appended to a journal (format 3), read as the format-2 log it is sealed as."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder.buildlog import BuildLog
from clawstore.errors import StoreError
from clawstore.store.buildlogs import journal_path, read_build_log
from clawstore.store.documents import BuildLogDoc
from clawstore.store.headdoc import read_head_doc
from clawstore.store.store import Store

CAMPAIGN = {"id": "s__rp__none", "suite_id": "s", "run_profile_id": "rp", "evaluation_profile_id": None}


def _record(store: Store, case: str, cacheable: bool = True) -> tuple[str, dict[str, Any]]:
    record = {"status": "success" if cacheable else "runner_error", "cacheable": cacheable, "outputs": {},
              "metrics": {"input_tokens": 3, "output_tokens": 2, "cost_usd": 0.5}, "error": None,
              "summary": {"checks": [1, 2, 3]}, "case": case}
    return store.put_json(record), record


def _add(log: BuildLog, store: Store, case: str, action: str = "exec") -> dict[str, Any]:
    record_id, record = _record(store, case) if action != "skip" else (None, None)
    address = {"model_id": "m", "case_id": case, "repetition": 0}
    log.add("run", f"blake3:{case}", record_id, action, address, record)
    return {"kind": "run", "key": f"blake3:{case}", "record": record_id, "action": action, "address": address}


def test_a_killed_build_leaves_a_summary_and_a_journal_read_as_one_log(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    log = BuildLog(store, CAMPAIGN)
    first = [_add(log, store, f"c{i}") for i in range(3)]
    log.write()
    summary = json.loads(log.path.read_bytes())
    assert summary["format"] == 3 and summary["nodes"] == [] and summary["counts"]["executed"] == 3
    later = [_add(log, store, "c3"), _add(log, store, "c4", "skip")]
    log.write()
    _add(log, store, "c5")  # recorded after the last write: a killed build's log does not have it
    with open(journal_path(log.path), "ab") as fh:
        fh.write(b'{"action":"exec","kind":"run"')  # torn by the kill: no newline after it

    doc = read_build_log(log.path)
    assert doc.format == 2 and doc.state == "running" and doc.nodes == first + later
    assert doc.counts == {"executed": 4, "reused": 0, "failed": 0, "skipped": 1}


def test_the_sealed_log_is_the_format_2_log_encoded_whole_and_the_journal_is_gone(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    log = BuildLog(store, CAMPAIGN, filter={"cases": ["c0"], "models": []})
    nodes = [_add(log, store, f"c{i}") for i in range(2)]
    log.write()
    nodes += [_add(log, store, "c2", "fail"), _add(log, store, "c3", "skip")]
    log.add("run", "blake3:r", "blake3:r", "reuse", {"model_id": "m", "case_id": "r", "repetition": 0}, None)
    log.end("complete")
    log.advance_head(None)
    log.seal()

    assert not journal_path(log.path).exists()
    whole = BuildLogDoc(**{**log.doc.to_json(), "nodes": nodes, "format": 2})
    assert log.path.read_bytes() == whole.encode()  # byte for byte what a log written whole was
    doc = read_build_log(log.path)
    assert doc.nodes == nodes and doc.head is not None and doc.counts["reused"] == 1


def test_a_node_unstored_after_its_line_was_journaled_reads_and_seals_as_failed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    log = BuildLog(store, CAMPAIGN)
    nodes = [_add(log, store, f"c{i}") for i in range(3)]
    log.write()
    pending = _add(log, store, "c3")  # not journaled yet when it is unstored

    class Lost:
        key, record_id, address = nodes[1]["key"], nodes[1]["record"], nodes[1]["address"]

    class LostPending:
        key, record_id, address = pending["key"], pending["record"], pending["address"]

    log.unstore(Lost)  # type: ignore[arg-type]
    log.unstore(LostPending)  # type: ignore[arg-type]
    log.write()
    failed = [{**nodes[1], "action": "fail", "record": None}, {**pending, "action": "fail", "record": None}]
    expected = [nodes[0], failed[0], nodes[2], failed[1]]
    assert read_build_log(log.path).nodes == expected
    assert log.counts == {"executed": 2, "reused": 0, "failed": 2, "skipped": 0}
    log.end("store-failed")
    log.seal()
    assert read_build_log(log.path).nodes == expected
    log.write()  # a write after the seal (an interrupt while sealing) keeps the sealed nodes
    assert read_build_log(log.path).nodes == expected and json.loads(log.path.read_bytes())["format"] == 2


def test_a_damaged_journal_line_before_the_last_is_named(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    log = BuildLog(store, CAMPAIGN)
    _add(log, store, "c0")
    log.write()
    with open(journal_path(log.path), "ab") as fh:
        fh.write(b"not json\n" + b'{"fix":0}\n')
    with pytest.raises(StoreError, match=r"\.jsonl: line 2: not a JSON node"):
        read_build_log(log.path)


def test_the_log_keeps_planning_views_not_records(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    log = BuildLog(store, CAMPAIGN)
    _add(log, store, "c0")
    (node,) = read_head_doc(store, log.advance_head(None))["nodes"]
    view = node["record_doc"]
    assert "case" not in view and view["summary"] == {} and view["metrics"]["cost_usd"] == 0.5
