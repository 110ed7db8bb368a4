"""A build with no rows to copy (the first query after a campaign's first build, or after the manifest was deleted) is
indexed by DuckDB (query/sqlflat.py) as a first head is: the same rows, every view, as rows.py's flattening gives; the
nodes it reused are read from the head it wrote a part at a time, and a head that lost a part leaves them out as
before (docs/query.md, Scale: memory of the manifest refresh)."""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from clawstore.builder.buildlog import BuildLog
from clawstore.query import heads, rows
from clawstore.query.engine import run_query
from clawstore.query.manifest import index_pending, refresh_manifest
from clawstore.store import Store, headdoc
from tests.query.campaigns import Built, Spec, build
from tests.support.storefiles import lose_object

VIEWS = ("run_history", "judgement_history", "result_history", "build_nodes", "builds",
         "runs", "checks", "judgements", "results", "nodes")
HISTORY = VIEWS[:5]
FLATTENED_HERE = heads.flattened_here


def every_view(store: Store, views: tuple[str, ...] = VIEWS) -> dict[str, list[tuple[Any, ...]]]:
    return {view: run_query(store.root, f"select * from {view} order by all").rows for view in views}


@pytest.fixture
def store(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setattr(headdoc, "PART_MAX", 4)  # (a head of many parts)
    return Store(tmp_path / "store")


def two_builds(store: Store) -> tuple[Built, Built]:
    first = build(store, Spec(fail={("openai/gpt-a", "case_2")}), refresh=False)
    second = build(store, Spec(cases=["case_1", "case_4"], salt="v2"), refresh=False)  # (reuses case_1's runs)
    return first, second


def flattening(monkeypatch: pytest.MonkeyPatch, by_duckdb: bool) -> list[bool]:
    made: list[bool] = []

    def noting(*args: Any) -> Any:
        found = FLATTENED_HERE(*args) if by_duckdb else None
        made.append(found is not None)
        return found

    monkeypatch.setattr(heads, "flattened_here", noting)
    return made


def test_builds_indexed_by_duckdb_give_the_rows_rows_py_gives(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    two_builds(store)
    flattening(monkeypatch, by_duckdb=False)
    assert index_pending(store) == 2
    by_rows_py = every_view(store)
    assert len(by_rows_py["build_nodes"]) == 46  # (26 of the first build, 18 the second ran and 2 it reused)
    shutil.rmtree(store.root / "manifest")
    made = flattening(monkeypatch, by_duckdb=True)
    assert index_pending(store) == 2
    assert made[0]  # (the first build by DuckDB; the second copies the rows of the nodes it shares with it)
    assert every_view(store) == by_rows_py


def test_a_build_that_reused_nodes_is_indexed_by_duckdb_with_them(store: Store,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _, second = two_builds(store)
    assert second.reused > 0
    made = flattening(monkeypatch, by_duckdb=True)
    refresh_manifest(store, second.build_id)  # (no head indexed yet: nothing to copy its reused rows from)
    assert made == [True]
    ours = every_view(store, HISTORY)
    assert {action for *_, action in run_query(store.root, "select action from build_nodes").rows} == {
        "exec", "reuse"}
    shutil.rmtree(store.root / "manifest")
    flattening(monkeypatch, by_duckdb=False)
    refresh_manifest(store, second.build_id)
    assert every_view(store, HISTORY) == ours


def test_a_head_that_lost_a_part_leaves_the_reused_nodes_out_as_before(store: Store) -> None:
    _, second = two_builds(store)
    (head_id,) = store.list_refs("campaigns/").values()
    doc = store.get_json(head_id)
    assert headdoc.is_parted(doc) and len(headdoc.part_ids(doc)) > 1
    lose_object(store, headdoc.part_ids(doc)[-1])  # (its nodes are streamed after the others: some given already)
    refresh_manifest(store, second.build_id)
    assert {action for (action,) in run_query(store.root, "select action from build_nodes").rows} == {"exec"}
    assert run_query(store.root, "select count(*) from build_nodes").rows == [(second.executed,)]


def test_a_no_op_build_between_two_leaves_the_next_its_rows_to_copy(store: Store,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = build(store, Spec(), refresh=False)
    time.sleep(1.05)  # (build ids sort by their second, then by chance: indexed in this order)
    no_op = BuildLog(store, Spec().campaign)  # (a build that ran nothing and wrote no head)
    no_op.write()
    no_op.end("complete")
    no_op.seal()
    time.sleep(1.05)
    second = build(store, Spec(salt="v2"), refresh=False)  # (reuses every run of the first)
    assert sorted([first.build_id, no_op.build_id, second.build_id]) == [first.build_id, no_op.build_id,
                                                                          second.build_id]
    flattened: list[int] = []
    real = rows.flatten

    def counting(log: Any, load: Any, ahead: Any = None, nodes: Any = None, reusable: Any = None,
                 sink: Any = None) -> Any:
        listed = list(nodes or [])
        flat = real(log, load, ahead, listed, reusable, sink)
        flattened.append(len(listed) - len(flat.taken))
        return flat

    monkeypatch.setattr(heads, "flatten", counting)
    assert index_pending(store) == 3
    assert second.reused == 6 and flattened == [second.executed]  # (the first and the no-op by DuckDB; 6 copied)
    ours = every_view(store, HISTORY)
    shutil.rmtree(store.root / "manifest")
    monkeypatch.setattr(heads, "flatten", real)
    flattening(monkeypatch, by_duckdb=False)
    assert index_pending(store) == 3
    assert every_view(store, HISTORY) == ours
    assert first.executed == len(run_query(store.root, f"select * from build_nodes where build_id = '{first.build_id}'"
                                           ).rows)
