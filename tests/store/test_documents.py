"""The store's documents as typed models (store/documents.py): each writes the bytes it always wrote
(so records keep their object ids), reads back to the same model, and a reader names the document and
the field a hostile file gets wrong, in one line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import blake3
import pytest

from clawstore.errors import StoreError
from clawstore.graph.records import make_record
from clawstore.providers.usage import Usage, stored_tokens
from clawstore.store import Store, documents
from clawstore.store.buildlogs import build_log_path, read_build_log, write_build_log
from clawstore.store.documents import (
    METRIC_FIELDS,
    TOKEN_METRICS,
    BuildLogDoc,
    HeadNode,
    KeptApart,
    Metrics,
    Stamp,
    read_build_log_doc,
    read_head_node,
    read_kept_apart,
    read_record,
    read_stamp,
)
from clawstore.store.headdoc import read_head, write_head
from clawstore.store.untrusted import kept_apart
from clawstore.values.canonical import canonical_json

KEY = "blake3:" + "a" * 64
COMMON = dict(key=KEY, address={"case_id": "c", "model_id": "m", "repetition": 0},
              outputs={"artifact": "blake3:" + "b" * 64}, summary={"final_text": "hi"}, error=None,
              started_at="2026-11-25T14:00:00.000000Z", finished_at="2026-11-25T14:00:01.000000Z", build_id="b1")
RUN_METRICS = {"input_tokens": 1, "output_tokens": 2, "reasoning_tokens": 0, "cached_tokens": 3, "cost_usd": None,
               "latency_s": 0.5, "cost_source": "unknown"}


def _id(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def test_records_keep_the_ids_the_previous_release_gave_them() -> None:
    # (ids computed with the code before the documents had models: a changed byte breaks every store)
    run = make_record(kind="run", status="success", cacheable=True, metrics={**RUN_METRICS, "extra": 1}, **COMMON)
    checks = make_record(kind="checks", status="passed", cacheable=True, metrics={"latency_s": 0.25}, **COMMON)
    assert _id(canonical_json(run)) == "7830d0067e4176b3ac35771bab23d55a0f57b5c2ad2695e45e6a80b7bb452ce2"
    assert _id(canonical_json(checks)) == "cc9b28b602485d7d2c769f821d7d28df393e6ae09af81501b0ea0a40989375d7"
    assert "cost_source" not in checks["metrics"] and checks["metrics"]["cost_usd"] is None
    for record in (run, checks):  # read back, written again: the same bytes
        assert canonical_json(read_record(record, "r").to_json()) == canonical_json(record)
    assert read_record(run, "r").metrics == Metrics(1, 2, 0, 3, None, 0.5, "unknown")


def test_a_build_log_round_trips_to_the_same_bytes(tmp_path: Path) -> None:
    doc = BuildLogDoc(build_id="20261123T202753-c5f82c00", started_at="2026-11-23T20:27:53.123456Z",
                      campaign={"id": "s__r__none"})
    assert _id(doc.encode()) == "050e494c4a8acd54f31c738807dd4c56eec2478f539748cc51570a3e730fbd30"
    doc.nodes.append({"kind": "run", "key": KEY, "record": None, "action": "fail", "address": {}})
    doc.metrics["reasoning_tokens"] = 7
    (tmp_path / "tmp").mkdir()
    path = write_build_log(tmp_path, doc)
    read = read_build_log(path)
    assert read == doc and read.encode() == path.read_bytes() and read.campaign_id == "s__r__none"
    assert set(TOKEN_METRICS) <= doc.metrics.keys()


def test_a_format_1_log_reads_what_it_lacks_as_nothing() -> None:
    log = read_build_log_doc({"build_id": "b", "nodes": []}, "old.json")
    assert (log.format, log.state, log.counts, log.metrics, log.campaign) == (1, None, {}, {}, {})


@pytest.mark.parametrize(("change", "message"), [
    ({"build_id": 5}, "x.json: build_id: expected a string"),
    ({"campaign": []}, "x.json: campaign: expected an object"),
    ({"head": 7}, "x.json: head: expected an object id or null"),
    ({"head_written": "yes"}, "x.json: head_written: expected true or false"),
    ({"counts": "many"}, "x.json: counts: expected an object"),
    ({"format": 9}, "x.json: unsupported build log format 9 (this claw reads 1, 2 and 3)"),
    ({"nodes": {}}, "x.json: not a build log (a JSON object with a nodes list)"),
])
def test_a_hostile_build_log_is_named_by_its_field(change: dict[str, object], message: str) -> None:
    good = BuildLogDoc(build_id="b", started_at="s", campaign={}).to_json()
    with pytest.raises(StoreError) as caught:
        read_build_log_doc({**good, **change}, "x.json")
    assert str(caught.value) == message and caught.value.exit_code == 3


@pytest.mark.parametrize(("change", "message"), [
    ({"status": None}, "rec: status: expected a string"),
    ({"cacheable": 1}, "rec: cacheable: expected true or false"),
    ({"outputs": ["x"]}, "rec: outputs: expected an object"),
    ({"record_version": 3}, "rec: record_version: expected 1 or 2, not 3"),
    ({"metrics": {"input_tokens": -1}}, "rec: metrics.input_tokens: "),
    ({"metrics": {"cost_source": "guessed"}}, "rec: metrics.cost_source: expected one of"),
])
def test_a_hostile_record_is_named_by_its_field(change: dict[str, object], message: str) -> None:
    record = make_record(kind="run", status="success", cacheable=True, metrics=RUN_METRICS, **COMMON)
    with pytest.raises(StoreError) as caught:
        read_record({**record, **change}, "rec")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    without = {k: v for k, v in record.items() if k != "build_id"}
    with pytest.raises(StoreError, match="rec: build_id: expected a string .the record has none."):
        read_record(without, "rec")
    with pytest.raises(StoreError, match="rec: not a record"):
        read_record(["\n"], "rec")


def test_metric_names_are_the_fields_of_one_model() -> None:
    assert TOKEN_METRICS == ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens")
    assert METRIC_FIELDS == (*TOKEN_METRICS, "cost_usd", "latency_s")


def test_a_kept_apart_set_is_written_as_ever_and_read_typed(store: Store) -> None:
    head = store.put_json({"head": 1})
    name = store.keep_apart("key-1", {}, {"campaigns/c": head}, "blake3:" + "d" * 64)
    stored = store.get_json(store.get_ref(name))
    assert stored == {"kind": "untrusted-import", "signer": "key-1", "actions": {}, "refs": {"campaigns/c": head},
                      "digest": "blake3:" + "d" * 64}
    found = kept_apart(store)[name]
    assert found == KeptApart("key-1", {}, {"campaigns/c": head}, None, "blake3:" + "d" * 64)
    assert canonical_json(found.to_json()) == canonical_json(stored) and found.signer_text() == "key-1"
    assert read_kept_apart({"kind": "other"}, "k") is None
    with pytest.raises(StoreError, match="^k: refs: expected an object of ids$"):
        read_kept_apart({**stored, "refs": {"campaigns/c": 5}}, "k")


def test_a_build_log_on_disk_with_a_hostile_field_is_one_line_naming_it(tmp_path: Path) -> None:
    path = build_log_path(tmp_path, "b1")
    path.parent.mkdir()
    path.write_text(json.dumps({"build_id": "b1", "nodes": [], "started_at": ["\n"]}))
    with pytest.raises(StoreError, match=r"b1.json: started_at: expected a time \(string\)$"):
        read_build_log(path)


def test_a_usage_keeps_the_names_artifacts_always_stored_and_gives_records_theirs() -> None:
    usage = Usage(input_tokens=5, output_tokens=4, total_tokens=9, reasoning_tokens=1, cached_tokens=3,
                  cache_write_tokens=2, cost_usd=0.5)
    stored = {"input_tokens": 5, "output_tokens": 4, "total_tokens": 9, "reasoning_tokens": 1,
              "cached_input_tokens": 3, "cache_write_tokens": 2}
    assert usage.normalized() == stored and usage.to_json() == {**stored, "cost_usd": 0.5}
    assert Usage.from_stored(stored, 0.5) == usage
    assert stored_tokens(stored, TOKEN_METRICS) == {"input_tokens": 5, "output_tokens": 4, "reasoning_tokens": 1,
                                                    "cached_tokens": 3}
    with pytest.raises(TypeError, match="cached_prompt"):
        Usage.from_stored({**stored, "cached_prompt": 1})


def test_a_campaign_head_is_read_typed_whichever_version_wrote_it(store: Store) -> None:
    nodes = [{"kind": "run", "key": KEY, "record": None, "action": "fail", "address": {"case_id": "c"},
              "record_doc": None},
             {"kind": "judge", "key": KEY, "record": None, "address": {"case_id": "d"}, "quarantined": "gone"}]
    parted = write_head(store, {"build_id": "b", "campaign": {"id": "s__r__none"}}, nodes)
    inline = store.put_json({"build_id": "b", "campaign": {"id": "s__r__none"}, "nodes": nodes})
    for head_id, version in ((parted, 2), (inline, 1)):
        head = read_head(store, head_id)
        assert head.head_version == version and head.campaign_id == "s__r__none"
        assert sorted((n.kind, n.action, n.quarantined) for n in head.nodes) == [("judge", None, "gone"),
                                                                                 ("run", "fail", None)]


def test_a_head_node_merges_into_the_next_head_as_it_was_read(store: Store) -> None:
    nodes = [{"kind": "run", "key": KEY, "address": {"case_id": "c"}, "record": KEY, "extra": [1]},
             {"kind": "judge", "key": KEY, "address": {"case_id": "d"}, "quarantined": "gone"}]
    head_id = write_head(store, {"build_id": "b", "state": "complete", "campaign": {"id": "s__r__none"}}, nodes)
    head = read_head(store, head_id)
    assert (head.build_id, head.state, head.started_at) == ("b", "complete", None)
    assert write_head(store, {"build_id": "b", "state": "complete", "campaign": {"id": "s__r__none"}},
                      [node.as_doc() for node in head.nodes]) == head_id  # same parts, same bytes
    made = documents.HeadNode("run", KEY, {"case_id": "c"}, record=KEY)
    assert made.as_doc() == {"kind": "run", "key": KEY, "address": {"case_id": "c"}, "record": KEY}


def test_a_hostile_head_field_is_named() -> None:
    with pytest.raises(StoreError) as caught:
        documents.read_head({"campaign": {}, "nodes": [], "state": 3}, "campaign head h")
    assert str(caught.value) == "campaign head h: state: expected a string or null"


EXPECTED_STOP = ("stopped: expected by (one of fail_fast, max_cost, out_of_credit, stop_on_runner_error) and "
                 "nodes_not_started")


@pytest.mark.parametrize(("stopped", "message"), [
    ([], "stopped: expected an object or null"),
    ({"by": "rm -rf", "nodes_not_started": 2}, EXPECTED_STOP),
    ({"by": "fail_fast", "nodes_not_started": 2, "x": 1}, EXPECTED_STOP),
    ({"by": "max_cost", "nodes_not_started": 2, "runs_not_started": 2}, EXPECTED_STOP),
    ({"by": "out_of_credit", "runs_not_started": 2}, EXPECTED_STOP),
    ({"by": "max_cost", "nodes_not_started": True}, "stopped.nodes_not_started: expected a count"),
    ({"by": "out_of_credit", "nodes_not_started": -1}, "stopped.nodes_not_started: expected a count"),
    ({"by": "max_cost", "nodes_not_started": "3"}, "stopped.nodes_not_started: expected a count"),
    ({"by": ["max_cost"], "nodes_not_started": 1}, EXPECTED_STOP),  # (not a name: before, a TypeError's traceback)
    ({"by": {}, "runs_not_started": 1}, EXPECTED_STOP),
])
def test_a_hostile_heads_stop_is_named(stopped: object, message: str) -> None:
    """A head's `stopped` (session 78: a build a stop kept nodes of from starting) is shown by report and view: a forged
    one is refused in one line naming it; a head without one (every head before) reads as not stopped."""
    with pytest.raises(StoreError) as caught:
        documents.read_head({"campaign": {}, "nodes": [], "stopped": stopped}, "campaign head h")
    assert str(caught.value) == f"campaign head h: {message}"
    assert documents.read_head({"campaign": {}, "nodes": []}, "campaign head h").stopped is None
    for by in ("fail_fast", "stop_on_runner_error", "max_cost", "out_of_credit"):
        kept = {"by": by, "nodes_not_started": 2}
        assert documents.read_head({"campaign": {}, "nodes": [], "stopped": kept}, "campaign head h").stopped == kept


@pytest.mark.parametrize(("expected", "message"), [
    ([], "expected: expected an object or null"),
    ({"cases": 3}, "expected: expected cases and models"),
    ({"cases": 3, "models": [], "results": 6}, "expected: expected cases and models"),
    ({"cases": "3", "models": ["m"]}, "expected.cases: expected a count"),
    ({"cases": True, "models": ["m"]}, "expected.cases: expected a count"),
    ({"cases": -1, "models": ["m"]}, "expected.cases: expected a count"),
    ({"cases": 3, "models": "m"}, "expected.models: expected a list of model ids"),
    ({"cases": 3, "models": [1]}, "expected.models: expected a list of model ids"),
    ({"cases": 3, "models": ["m", "m"]}, "expected.models: expected a list of model ids"),
])
def test_a_hostile_heads_expectation_is_named(expected: object, message: str) -> None:
    """A head's `expected` (session 80: what its campaign expects, filter or not) is shown by report and view as a
    count of results: a forged one is refused in one line naming it; a head without one (every head before) has none."""
    with pytest.raises(StoreError) as caught:
        documents.read_head({"campaign": {}, "nodes": [], "expected": expected}, "campaign head h")
    assert str(caught.value) == f"campaign head h: {message}"
    assert documents.read_head({"campaign": {}, "nodes": []}, "campaign head h").expected is None
    kept = {"cases": 3, "models": ["m1", "m2"]}
    assert documents.read_head({"campaign": {}, "nodes": [], "expected": kept}, "campaign head h").expected == kept


def test_a_build_log_writes_its_expectation_only_when_it_has_one() -> None:
    """A log (and so the head it writes) without `expected` is byte for byte what it was before session 80."""
    log = BuildLogDoc(build_id="b", started_at="t", campaign={"id": "c"})
    assert "expected" not in log.to_json()
    log.expected = {"cases": 3, "models": ["m1"]}
    assert log.to_json()["expected"] == {"cases": 3, "models": ["m1"]}
    assert read_build_log_doc(json.loads(log.encode()), "log").expected == log.expected


@pytest.mark.parametrize(("node", "message"), [
    ({"key": KEY, "address": {}}, "nodes[0].kind: expected a string (the node has none)"),
    ({"kind": "run", "key": KEY, "address": []}, "nodes[0].address: expected an object"),
    ({"kind": "run", "key": KEY, "address": {}, "record": 5}, "nodes[0].record: expected an object id or null"),
    ("run", "nodes[0]: expected an object"),
])
def test_a_hostile_head_is_named_by_its_node_and_field(node: object, message: str) -> None:
    with pytest.raises(StoreError) as caught:
        documents.read_head({"campaign": {}, "nodes": [node]}, "campaign head h")
    assert str(caught.value) == f"campaign head h: {message}"


def test_a_stamp_is_written_in_its_old_field_order_and_read_back_whole() -> None:
    rows = {"bytes": 120, "blake3": "ab" * 32}  # (its rows file's: builder/stamp.py)
    stamp = Stamp(campaign={"id": "s__r__none"}, campaign_id="s__r__none", head=KEY, reads={"/w/a.yaml": [1, 2, 3, 4]},
                  env="e", code="c", store=[["i"], ["p"]], rows=rows, counts={"executed": 0, "reused": 1},
                  layers=[["m", {"run": 1}]], cases={"files": [["c", "/w/c/test.yaml"]], "layers": [["m", {"run": 1}]]})
    assert list(stamp.to_json()) == ["format", "campaign", "campaign_id", "head", "reads", "env", "code", "store",
                                     "rows", "counts", "layers", "cases"]
    data = json.dumps(stamp.to_json(), separators=(",", ":")).encode()
    assert json.dumps(read_stamp(json.loads(data), "s").to_json(), separators=(",", ":")).encode() == data
    with pytest.raises(StoreError, match="^s: rows: expected the rows file's bytes and blake3$"):
        read_stamp({**stamp.to_json(), "rows": {"bytes": "120", "blake3": "ab" * 32}}, "s")
    with pytest.raises(StoreError, match="^s: rows: expected an object$"):  # a format-1 stamp's, relabelled
        read_stamp({**stamp.to_json(), "rows": [{"model_id": "m"}]}, "s")
    for older in (1, 2):  # a stamp with its rows inside; one without its cases
        with pytest.raises(StoreError, match="^s: format: expected 3$"):
            read_stamp({**stamp.to_json(), "format": older}, "s")
    with pytest.raises(StoreError, match="^s: head: expected an object id .the stamp has none.$"):
        read_stamp({k: v for k, v in stamp.to_json().items() if k != "head"}, "s")


def _typed_field_by_field(node: dict[str, Any]) -> HeadNode:
    """read_head_node as it was before its one-expression path: each field checked in turn."""
    from clawstore.store.documents import _NODE_REQUIRED, _NODE_TYPES, damaged

    values = {}
    for name, (types, expected) in _NODE_TYPES.items():
        if name not in node:
            if name in _NODE_REQUIRED:
                raise damaged("w", f"nodes[0].{name}", f"{expected} (the node has none)")
            continue
        if type(node[name]) not in types:
            raise damaged("w", f"nodes[0].{name}", expected)
        values[name] = node[name]
    return HeadNode(**values, stored=node)


def test_a_head_node_of_any_shape_is_typed_or_refused_as_field_by_field() -> None:
    absent = object()
    shapes = {"kind": ["run", None, 1], "key": ["k", None], "address": [{"case_id": "c"}, None, []],
              "record": ["r", None, 2], "action": ["exec", None], "record_doc": [{}, None, "x"],
              "quarantined": ["q", None, 3.0]}
    for combo in itertools.product(*[[*values, absent] for values in shapes.values()]):
        node = {name: value for name, value in zip(shapes, combo, strict=True) if value is not absent}
        answers = []
        for typed in (lambda n: read_head_node(n, "w", 0), _typed_field_by_field):
            try:
                answers.append(("typed", typed(node)))
            except StoreError as exc:
                answers.append(("refused", str(exc)))
        assert answers[0] == answers[1], node
        if answers[0][0] == "typed":
            assert answers[0][1].stored is node
