"""A head with no rows to copy is flattened by DuckDB (query/sqlflat.py): the same files, cell for cell, as rows.py's
flattening writes; a record rows.py would read otherwise gives way to it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from clawstore.query import heads, rows, segments, sqlflat
from clawstore.query.manifest import index_current
from clawstore.query.schema import PHYSICAL
from clawstore.store import Store
from tests.query.campaigns import Spec, build

T0, T1 = "2026-12-02T10:52:06.143501Z", "2026-12-02T16:22:07+05:30"
RUN_KEY = "blake3:" + "a" * 64


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def table_rows(directory: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in file order, each cell as text (a double's every digit, NULL apart from 'None')."""
    con = duckdb.connect()
    try:
        out = {}
        for table in PHYSICAL:
            path = directory / f"{table}.parquet"
            columns = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()]
            cells = ", ".join(f'CAST("{name}" AS VARCHAR)' for name in columns)
            out[table] = [tuple(columns), *con.execute(f"SELECT {cells} FROM read_parquet('{path}')").fetchall()]
        return out
    finally:
        con.close()


def by_rows_py(store: Store, log: dict[str, Any], nodes: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    flat = rows.flatten(log, heads.StoredRecords(store), None, nodes)
    con = duckdb.connect()
    try:
        segments.write_tables(con, flat, out)
    finally:
        con.close()
    return table_rows(out)


def by_duckdb(store: Store, log: dict[str, Any], nodes: list[dict[str, Any]], work: Path) -> dict[str, Any] | None:
    work.mkdir()
    flat = sqlflat.flatten_here(log, nodes, store, work)
    if flat is None:
        assert sorted(work.iterdir()) == []  # (what it wrote is gone)
        return None
    con = duckdb.connect()
    try:
        segments.write_tables(con, flat, work.with_name("out"))  # (and removes `work`)
    finally:
        con.close()
    return table_rows(work.with_name("out"))


def record(kind: str, **fields: Any) -> dict[str, Any]:
    address = {"model_id": "m", "case_id": "c", "repetition": 0}
    return {"kind": kind, "key": f"blake3:{kind}", "build_id": "b0", "status": "success", "cacheable": True,
            "address": address, "error": None, "outputs": {"input_document": f"blake3:{kind}"},
            "metrics": {"input_tokens": 3, "output_tokens": 2, "reasoning_tokens": 0, "cached_tokens": 0,
                        "cost_usd": 0.1, "latency_s": 0.5, "cost_source": "reported"},
            "summary": {**address, "run_key": RUN_KEY}, "started_at": T0, "finished_at": T1, **fields}


# Records claw writes, and what is unusual in them that the cells must still get right.
CLAW_WRITES: list[tuple[str, dict[str, Any]]] = [
    ("run", record("run", key=RUN_KEY, summary={"model_id": "m", "requested_model": "vendor/m é \"q\"\n",
                                                "runner_type": "llm_probe", "endpoint": None, "error_code": None},
                   outputs={"input_document": RUN_KEY, "artifact": "blake3:art", "sandbox": "blake3:sb",
                            "extra": ["blake3:x"], "same": "blake3:art"})),
    ("run", record("run", key="blake3:run2", status="provider_error",  # unknown cost: NULL, never 0
                   metrics={"cost_usd": None, "cost_source": "unknown", "input_tokens": 10**12},
                   error={"code": "provider_error", "message": "HTTP 503"}, outputs=None,
                   summary={"error_code": "ignored", "repetition": 2**31})),
    ("run", record("run", key="blake3:run4", status="timed_out",  # unknown, with a known part (an OpenClaw timeout)
                   metrics={"cost_usd": None, "cost_source": "unknown", "cost_known_usd": 0.00113,
                            "input_tokens_known": 300, "output_tokens_known": 20})),
    ("run", record("run", key="blake3:run3",  # a key the record's address holds as null wins over its summary's
                   address={"model_id": "m", "case_id": "c", "repetition": None, "judge_repetition": None},
                   summary={"repetition": 3, "judge_repetition": 4, "run_key": RUN_KEY})),
    ("checks", record("checks", metrics=None, summary={"run_key": RUN_KEY, "passed": 1, "checks": [
        {"check_id": "a", "kind": "file_contains", "outcome": "failed", "message": "m", "dimensions": ["task"]},
        {"check_id": "b", "kind": None, "outcome": "passed", "message": None, "dimensions": None}]})),
    ("judge", record("judge", address={"model_id": None, "judge_run_id": "main", "judge_repetition": 1},
                     metrics={"cost_usd": 3, "cost_source": "priced"},
                     summary={"run_key": RUN_KEY, "judge_id": "j", "overall_score": 7.25,
                              "dimensions": {"task": 7, "spark": None}, "case_id": "from-summary"})),
    ("judge", record("judge", key="blake3:j2", metrics={"cost_usd": 0.05},  # (no source: reported)
                     summary={"run_key": RUN_KEY, "overall_score": None})),
    ("result", record("result", error={}, metrics={}, summary={
        "run_key": RUN_KEY, "final_score": 7.0, "final_dimensions": {"task": 7.0}, "passed": True,
        "aggregation_method": "median", "pass_threshold": None, "judge_iterations": 2, "checks_failed": 0})),
    ("result", record("result", key="blake3:r2", summary={"run_key": "blake3:nobody"})),
]


@pytest.mark.parametrize("chunk", [3, sqlflat.CHUNK_NODES])
def test_duckdb_writes_the_cells_rows_py_writes(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(sqlflat, "CHUNK_NODES", chunk)  # (3: four files of lines, loaded while the next is written)
    nodes: list[dict[str, Any]] = []
    for kind, doc in CLAW_WRITES:
        address = {"judge_run_id": "main"} if kind == "judge" else {"model_id": "node-says", "case_id": None}
        nodes.append({"kind": kind, "key": doc["key"], "record": store.put_json(doc), "action": "exec",
                      "address": address})
    nodes += [  # without a record: skipped (cost 0), failed (unknown), failed with its own status and error
        {"kind": "judge", "key": "blake3:s", "record": None, "action": "skip", "address": {"model_id": "m"}},
        {"kind": "run", "key": "blake3:f", "action": "fail", "address": {}},
        {"kind": "run", "key": "blake3:g", "record": "", "action": "fail", "status": None,
         "error": {"code": "E", "message": "no"}},
    ]
    log = {"build_id": "b1", "started_at": T1, "campaign": {"id": "s__r__e", "suite_id": "s",
                                                            "run_profile_id": "r", "evaluation_profile_id": "e"}}
    expected = by_rows_py(store, log, nodes, tmp_path / "rows_py")
    assert by_duckdb(store, log, nodes, tmp_path / "duckdb") == expected
    assert [len(expected[t]) - 1 for t in ("runs", "checks", "judgements", "results", "nodes")] == [4, 2, 2, 2, 12]
    runs = [dict(zip(expected["runs"][0], row, strict=True)) for row in expected["runs"][1:]]
    assert [(r["cost_usd"], r["cost_known_usd"]) for r in runs] == [  # the known part: of an unknown cost only
        ("0.1", "0.1"), (None, "0.0"), (None, "0.00113"), ("0.1", "0.1")], runs
    assert [(r["input_tokens"], r["input_tokens_known"], r["output_tokens_known"]) for r in runs] == [  # tokens' too
        ("3", "3", "2"), ("1000000000000", "1000000000000", "0"), (None, "300", "20"), ("3", "3", "2")], runs


ODD: dict[str, bytes] = {  # records rows.py reads otherwise than SQL would: left to it
    "a number where text is read": b'{"kind":"run","key":"k","status":"success","summary":{"requested_model":5}}',
    "a status of null": b'{"kind":"run","key":"k","status":null}',
    "a score as an object": b'{"kind":"judge","key":"k","status":"success","summary":{"dimensions":{"task":'
                            b'{"score":7}}}}',
    "a time without its T": b'{"kind":"run","key":"k","status":"success","started_at":"2026-12-02 10:00:00"}',
    "a key twice": b'{"kind":"run","key":"k","status":"success","summary":{"runner_type":"a","runner_type":"b"}}',
    "a lone surrogate": b'{"kind":"run","key":"k","status":"success","build_id":"\\ud800"}',
    "metrics out of bounds": b'{"kind":"run","key":"k","status":"success","metrics":{"cost_usd":-1}}',
    "not an object": b'["run"]',
}


@pytest.mark.parametrize("odd", sorted(ODD))
def test_a_record_rows_py_reads_otherwise_is_left_to_it(store: Store, tmp_path: Path, odd: str) -> None:
    oid = store.put_bytes(ODD[odd])
    plain = store.put_json(record("run", key="blake3:plain"))
    nodes = [{"kind": "run", "key": "blake3:plain", "record": plain, "action": "exec"},
             {"kind": "run", "key": "k", "record": oid, "action": "exec"}]
    assert by_duckdb(store, {"build_id": "b1"}, nodes, tmp_path / "duckdb") is None


def test_a_first_head_is_flattened_by_duckdb_as_by_rows_py(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    build(store, Spec(fail={("openai/gpt-a", "case_2")}), refresh=False)
    build(store, Spec(cases=["case_1", "case_4"], salt="v2"), refresh=False)  # (reuses some runs)
    made: list[bool] = []
    real = sqlflat.flatten_here

    def noting(*args: Any) -> Any:
        found = real(*args)
        made.append(found is not None)
        return found

    monkeypatch.setattr(sqlflat, "flatten_here", noting)
    index_current(store)
    (head,) = (path for path in (store.root / "manifest" / "heads").iterdir() if path.is_dir())
    ours = table_rows(head)
    assert made == [True]
    shutil.rmtree(store.root / "manifest")
    monkeypatch.setattr(sqlflat, "flatten_here", lambda *args: None)
    index_current(store)
    assert table_rows(head) == ours


def test_tables_written_without_a_sort_keep_position_order(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nodes` is written in `flat`'s own order, not sorted again: over several files of lines and row groups, with
    kinds interleaved, every row of every table stands where rows.py puts it."""
    monkeypatch.setattr(sqlflat, "CHUNK_NODES", 41)  # (three files of lines, nine row groups of `nodes`)
    monkeypatch.setattr(sqlflat, "ROW_GROUP", 16)
    nodes: list[dict[str, Any]] = []
    check = {"check_id": "a", "kind": "file_contains", "outcome": "passed", "message": None, "dimensions": None}
    with store.batch():  # (one commit for the lot)
        for i in range(120):
            kind = ("run", "judge", "checks")[i % 3]
            doc = record(kind, key=f"blake3:{kind}{i}", summary={"case_id": f"c{i}", "run_key": RUN_KEY,
                                                                 "checks": [check] * (i % 2)})
            nodes.append({"kind": kind, "key": doc["key"], "record": store.put_json(doc), "action": "exec",
                          "address": {"repetition": i}})
    log = {"build_id": "b1", "started_at": T1}
    expected = by_rows_py(store, log, nodes, tmp_path / "rows_py")
    ours = by_duckdb(store, log, nodes, tmp_path / "duckdb")
    assert ours == expected
    assert [len(expected[t]) - 1 for t in ("runs", "checks", "judgements", "nodes")] == [40, 20, 40, 120]
