"""The manifest: what a build's records become in DuckDB, across builds, compaction and rebuilds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from clawstore.query import heads, segments
from clawstore.query.engine import run_query
from clawstore.query.manifest import compact_manifest, index_current, index_pending, rebuild_manifest, refresh_manifest
from clawstore.query.rows import node_sig, same_rows
from clawstore.store import Store
from tests.query.campaigns import JUDGE_COST, RUN_COST, Spec, build, score_of


def one(root: Path, sql: str):
    rows = run_query(root, sql).rows
    assert len(rows) == 1, rows
    return rows[0][0] if len(rows[0]) == 1 else rows[0]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def test_one_build_tables_match_the_campaign(store: Store) -> None:
    built = build(store, Spec())
    root = store.root
    assert one(root, "select count(*) from runs") == built.run_nodes == 6
    assert one(root, "select count(*) from judgements") == built.judge_nodes == 12
    assert one(root, "select count(*) from results") == built.result_nodes == 6
    assert one(root, "select count(*) from checks") == built.check_rows == 12
    assert one(root, "select count(*) from nodes") == 30
    assert one(root, "select count(*), sum(executed), sum(reused), sum(nodes) from builds") == (1, 30, 0, 30)
    # Every run row carries its campaign, build, tokens and costs from the record.
    row = one(root, "select count(distinct build_id), min(campaign_id), sum(input_tokens), "
                    "round(sum(cost_usd), 6), bool_and(artifact_id like 'blake3:%') from runs")
    assert row == (1, "suite_a__std__judge_x", 600, round(6 * RUN_COST, 6), True)
    # A result's final score is the median of its judge repetitions; costs add up per run.
    got = run_query(root, "select model_id, case_id, final_score, total_cost_usd from results "
                          "order by model_id, case_id").rows
    for model_id, case_id, final, total in got:
        assert final == score_of(model_id, case_id, 1)  # median of 2 reps = upper one here
        assert total == pytest.approx(RUN_COST + 2 * JUDGE_COST)
    # Checks keep their per-check outcome and dimension list.
    assert one(root, "select list_sort(list_distinct(flatten(list(dimensions)))) from checks") == ["closeness", "task"]
    assert one(root, "select count(*) from checks where outcome = 'failed'") == 2


def test_second_build_reuses_and_history_keeps_both(store: Store) -> None:
    first = build(store, Spec())
    second = build(store, Spec(models=["openai/gpt-a", "new/model-c"]))
    root = store.root
    assert second.reused == 15 and second.executed == 15
    assert one(root, "select count(*) from runs") == 9  # the head keeps what this (unfiltered) campaign built
    assert one(root, "select count(*) from run_history") == 12
    assert one(root, "select count(*) from build_nodes") == 60
    # A reused run's current row names the head's build, and the build that produced its record.
    row = one(root, "select build_id, record_build_id, action from runs where model_id = 'openai/gpt-a' "
                    "and case_id = 'case_1'")
    assert row == (second.build_id, first.build_id, "reuse")
    assert one(root, f"select count(*) from result_history where build_id = '{first.build_id}'") == 6
    assert one(root, f"select count(*) from results where build_id = '{first.build_id}'") == 0
    spent = run_query(root, "select build_id, round(cost_usd, 6) from builds order by started_at").rows
    assert spent == [(first.build_id, round(6 * RUN_COST + 12 * JUDGE_COST, 6)),
                     (second.build_id, round(3 * RUN_COST + 6 * JUDGE_COST, 6))]


def test_failed_run_is_recorded_then_retried(store: Store) -> None:
    build(store, Spec(fail={("openai/gpt-a", "case_1")}))
    root = store.root
    row = one(root, "select status, action, error_code, cacheable from runs where case_id = 'case_1' "
                    "and model_id = 'openai/gpt-a'")
    assert row == ("provider_error", "fail", "provider_error", False)
    failures = run_query(root, open_saved("failures")).rows
    assert len(failures) == 1
    retry = build(store, Spec())
    assert one(root, "select status, build_id from runs where case_id = 'case_1' and model_id = 'openai/gpt-a'") \
        == ("success", retry.build_id)
    assert run_query(root, open_saved("failures")).rows == []


def test_two_model_ids_sharing_runs_keep_a_row_each(store: Store) -> None:
    # Two suite model_ids for the same model and settings share run keys (model_id is not in the key).
    build(store, Spec(models=["gpt", "gpt-alias"], key_model={"gpt-alias": "gpt"}))
    assert one(store.root, "select count(*), count(distinct key) from runs") == (6, 3)
    assert one(store.root, "select count(distinct model_id) from runs") == 2


def open_saved(name: str) -> str:
    return (Path(__file__).resolve().parents[2] / "queries" / f"{name}.sql").read_text()


def test_compaction_keeps_history_and_current_rows(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "COMPACT_AT", 3)
    root = store.root
    # Alternate two rubrics: every build re-points the head (no build is a no-op), the runs are reused.
    builds = [build(store, Spec(cases=["case_1"], salt=str(i % 2))) for i in range(4)]
    manifest = root / "manifest"
    snap = segments.snapshot(manifest)
    assert snap.pack is not None, "three waiting segments trigger a compaction"
    assert len(snap.covers) + len(snap.segments) == 4
    # Current rows: the head, which the last build wrote (it reused the second build's results);
    # history: all four builds.
    assert one(root, "select count(*), min(build_id), max(record_build_id) from results") == \
        (2, builds[3].build_id, builds[1].build_id)
    assert one(root, "select count(*) from result_history") == 8
    assert one(root, "select count(*) from builds") == 4
    assert one(root, "select count(*), min(build_id), max(record_build_id) from runs") == \
        (2, builds[3].build_id, builds[0].build_id)
    newest = build(store, Spec(cases=["case_1"]))
    assert segments.snapshot(manifest).segments, "the new build waits beside the pack"
    assert one(root, "select count(*) from result_history") == 10
    assert compact_manifest(store)
    snap = segments.snapshot(manifest)
    assert not snap.segments
    # History is append-only: the first pack's chunk is shared (hard link), the two segments are a new one.
    chunks = segments.pack_chunks(snap.pack, "nodes")
    assert len(chunks) == 2 and chunks[0].stat().st_nlink == 1  # the old pack is gone, its chunk kept
    assert one(root, "select count(*), min(build_id) from results") == (2, newest.build_id)
    assert one(root, "select count(*) from build_nodes") == 5 * 10
    # Too many chunks: the next compaction rewrites history into one.
    monkeypatch.setattr(segments, "MAX_CHUNKS", 2)
    build(store, Spec(cases=["case_1"], salt="2"))
    assert compact_manifest(store)
    assert len(segments.pack_chunks(segments.snapshot(manifest).pack, "nodes")) == 1
    assert one(root, "select count(*) from build_nodes") == 6 * 10
    # The incrementally extended pack equals one recomputed from scratch.
    tables = ("nodes", "checks", "results", "build_nodes", "result_history")
    before = {t: run_query(root, f"select * from {t} order by all").rows for t in tables}
    assert rebuild_manifest(store) == 6
    assert {t: run_query(root, f"select * from {t} order by all").rows for t in tables} == before


def test_a_no_op_build_adds_its_build_row_and_no_node_rows(store: Store) -> None:
    first = build(store, Spec())
    again = build(store, Spec())  # everything reused, the head unchanged
    root = store.root
    assert again.reused == 30 and again.executed == 0
    assert one(root, "select count(*) from build_nodes") == 30
    assert one(root, "select count(distinct build_id) from runs") == 1
    assert one(root, "select build_id from runs limit 1") == first.build_id
    row = one(root, f"select nodes, executed, reused from builds where build_id = '{again.build_id}'")
    assert row == (30, 0, 30)
    # What it used is not in its rows (its log names no record), so the cost of it is not known here: NULL, never
    # the 0 of a sum over nothing, which docs/query.md's "how much did reuse save?" read as "nothing saved".
    used = run_query(root, "select build_id, results_cost_usd, cost_usd from builds order by started_at").rows
    assert used == [(first.build_id, pytest.approx(6 * RUN_COST + 12 * JUDGE_COST), pytest.approx(used[0][2])),
                    (again.build_id, None, 0.0)]
    log = json.loads((root / "builds" / f"{again.build_id}.json").read_bytes())
    assert log["format"] == 2 and log["nodes"] == [] and log["head_written"] is False
    assert log["head"] == store.get_ref("campaigns/" + Spec().campaign_id)
    assert len(json.dumps(log)) < 1024


def test_refreshing_a_build_twice_never_duplicates(store: Store) -> None:
    built = build(store, Spec())
    refresh_manifest(store, built.build_id)
    assert one(store.root, "select count(*) from run_history") == 6
    compact_manifest(store)
    refresh_manifest(store, built.build_id)  # now covered by the pack: merged again, not added
    assert one(store.root, "select count(*) from run_history") == 6
    assert one(store.root, "select count(*) from builds") == 1


def test_rebuild_manifest_from_records(store: Store) -> None:
    build(store, Spec())
    build(store, Spec(models=["new/model-c"]))
    before = run_query(store.root, "select * from result_history order by key, build_id").rows
    shutil.rmtree(store.root / "manifest")
    assert one(store.root, "select count(*) from runs") == 0  # empty but typed views
    assert rebuild_manifest(store) == 2
    after = run_query(store.root, "select * from result_history order by key, build_id").rows
    assert after == before
    assert one(store.root, "select count(*) from runs") == 9


def test_objects_table_lists_every_object_with_sizes(store: Store) -> None:
    build(store, Spec(cases=["case_1"]))
    expected = {oid: store.object_sizes(oid) for oid in store.iter_objects()}
    rows = run_query(store.root, "select object_id, logical_size, stored_size from objects", store=store).rows
    assert {r[0]: (r[1], r[2]) for r in rows} == expected
    extra = store.put_bytes(b"x" * 10_000)
    rows = run_query(store.root, f"select logical_size from objects where object_id = '{extra}'", store=store).rows
    assert rows == [(10_000,)]
    assert (store.root / "manifest" / "objects.parquet").is_file()


def test_build_log_missing_is_a_store_error(store: Store) -> None:
    from clawstore.errors import StoreError

    with pytest.raises(StoreError, match="no build log"):
        refresh_manifest(store, "nope")


def test_segment_slots_are_safe_names() -> None:
    assert segments.slot_for("20261122T030000-abcd1234") == "20261122T030000-abcd1234"
    odd = [segments.slot_for(b) for b in ("a@1", "a b", "../x", "a:b", "a_b")]
    assert all(segments._SAFE.match(s) for s in odd) and len(set(odd)) == len(odd)


PLAIN = ("runs", "checks", "judgements", "results", "nodes")


@pytest.mark.parametrize("scenario", ["first build", "a build reusing half", "a run failed"])
def test_a_head_gets_the_rows_and_files_of_the_build_that_wrote_it(
        store: Store, monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    if scenario == "a build reusing half":
        build(store, Spec(models=["openai/gpt-a"]))
    flattened: list[object] = []
    real = heads.flatten

    def counting(log, *args, **kwargs):  # type: ignore[no-untyped-def]
        flattened.append(log.get("build_id"))
        return real(log, *args, **kwargs)

    monkeypatch.setattr(heads, "flatten", counting)
    real_here = heads.flattened_here

    def counting_here(reader, log, *args, **kwargs):  # type: ignore[no-untyped-def]  # (by DuckDB: sqlflat.py)
        flattened.append(log.get("build_id"))
        return real_here(reader, log, *args, **kwargs)

    monkeypatch.setattr(heads, "flattened_here", counting_here)
    fail = {("openai/gpt-a", "case_2")} if scenario == "a run failed" else set()
    built = build(store, Spec(fail=fail))
    assert flattened == [built.build_id]  # its segment's rows; its head got the same ones
    manifest = store.root / "manifest"
    (head,) = (path for path in (manifest / "heads").iterdir() if path.is_dir())
    (segment,) = (manifest / "segments").glob(f"{segments.slot_for(built.build_id)}@*")
    for table in PLAIN:  # the same files, not written twice
        assert (head / f"{table}.parquet").stat().st_ino == (segment / f"{table}.parquet").stat().st_ino
    shared = {table: run_query(store.root, f"select * from {table} order by all").rows for table in PLAIN}
    assert len(shared["nodes"]) == (26 if fail else 30)  # (a failed run has no evaluation)

    shutil.rmtree(store.root / "manifest")
    monkeypatch.setattr(heads, "same_rows", lambda *args: False)
    index_pending(store)  # every build, then the head flattened on its own
    assert flattened.count(built.build_id) == 3
    assert {table: run_query(store.root, f"select * from {table} order by all").rows for table in PLAIN} == shared


def test_same_rows_needs_one_context_and_the_same_nodes_in_any_order() -> None:
    nodes = [{"kind": "run", "key": f"k{i}", "record": f"r{i}", "action": "exec",
              "address": {"model_id": "m", "case_id": f"c{i}", "repetition": 0}} for i in range(3)]
    log = {"build_id": "b1", "started_at": "2026-11-27T08:00:00Z", "campaign": {"id": "c"}}
    head = {**log, "nodes": list(reversed(nodes))}

    def same(log: dict[str, Any], ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> bool:
        # (the log's side as indexing gives it: each node's signature and action; the head's nodes streamed)
        return same_rows(log, [node_sig(n) for n in ours], [n.get("action") for n in ours], head, iter(theirs))

    assert same(log, nodes, head["nodes"])
    assert not same({**log, "build_id": "b2"}, nodes, head["nodes"])  # another build's rows
    assert not same(log, nodes[:2], head["nodes"])  # a node the log does not have
    assert not same(log, nodes + nodes[:1], head["nodes"])  # one node twice
    reused = [{**node, "action": "reuse"} if i == 0 else node for i, node in enumerate(nodes)]
    assert not same(log, reused, head["nodes"])  # one node another action
    failed = [{**node, "error": {"message": "boom"}} if i == 1 else node for i, node in enumerate(nodes)]
    assert not same(log, failed, head["nodes"])
    listed = [{**node, "action": ["exec"]} if i == 2 else node for i, node in enumerate(nodes)]
    assert not same(log, nodes, listed)  # a hostile head's action that is no text: told apart, no TypeError


def test_a_manifest_written_without_cost_sources_is_indexed_again(store: Store) -> None:
    # An older clawstore wrote the manifest without `cost_source` (and no schema stamp): its files are
    # derived data, dropped and made again from the records (whose costs read as reported).
    import duckdb

    build(store, Spec())
    manifest = store.root / "manifest"
    con = duckdb.connect()
    for path in manifest.rglob("*.parquet"):
        names = [r[0] for r in con.execute("select name from parquet_schema(?)", [str(path)]).fetchall()]
        if "cost_source" in names:
            con.execute(f"copy (select * exclude (cost_source) from read_parquet('{path}')) to '{path}.old' "
                        "(format parquet)")
            Path(f"{path}.old").replace(path)
    con.close()
    (manifest / "schema.json").unlink()
    index_current(store)  # what `claw query` of a plain view does first
    sql = "select count(*), min(cost_source), max(cost_source), round(sum(cost_usd), 6) from runs"
    assert run_query(store.root, sql, store=store).rows == [(6, "reported", "reported", round(6 * RUN_COST, 6))]
    assert json.loads((manifest / "schema.json").read_text())["runs"]  # stamped: the next query keeps it


@pytest.mark.parametrize("record", [None, {"kind": "run", "status": "success", "summary": {"model_id": "m"},
                                           "metrics": {"input_tokens": 3, "cost_usd": 0.5, "cost_source": "reported"}}])
def test_a_node_row_is_the_nodes_row_itself(record: dict[str, object] | None) -> None:
    # flatten gives a node's row to the `nodes` table as made (not picked again): its keys are that table's columns.
    from clawstore.query import rows
    from clawstore.query.schema import PHYSICAL

    node = {"kind": "run", "key": "k", "record": "r", "action": "exec", "address": {"case_id": "c"}}
    row = rows._node_row(node, record, rows.build_context({"build_id": "b", "campaign": {"id": "x"}}))
    assert list(row) == [column.name for column in PHYSICAL["nodes"]]
