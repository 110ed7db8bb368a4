"""Rows of reused nodes are copied from the campaign's previous head, not read and flattened again, and
are exactly the rows flattening gives (query/copied.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from clawstore.query import copied, heads, packed, rows
from clawstore.query.engine import _with_views, run_query
from clawstore.query.manifest import index_pending
from clawstore.store import Store
from tests.query.campaigns import Spec, build, count_flattened

VIEWS = ("runs", "checks", "judgements", "results", "nodes", "run_history", "check_history",
         "judgement_history", "result_history", "build_nodes", "builds")
GROWN = Spec(cases=["case_1", "case_2", "case_3", "case_4"])  # one case more: 2 runs of 8 are new
NEW_NODES = 2 * 5  # a run, its checks, two judgements and a result per model


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def flattened(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The nodes whose records are read and flattened, as each is."""
    return count_flattened(monkeypatch)


def every_view(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each view's rows in the order the files list them (a copy keeps the order flattening gives), all read on one
    connection with the views (run_query's own connection for each view was most of these tests' CPU)."""
    sql = " ".join(f"select * from {view};" for view in VIEWS)
    return _with_views(root, sql, lambda con, _: {view: con.execute(f"select * from {view}").fetchall()
                                                  for view in VIEWS}, None, None, False, None)


def flattened_from_nothing(store: Store, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[Any, ...]]]:
    """The views of a manifest indexed again from the build logs alone, every record flattened."""
    monkeypatch.setattr(copied, "reusable", lambda source: None)
    shutil.rmtree(store.root / "manifest")
    index_pending(store)
    return every_view(store.root)


def test_a_build_reusing_most_nodes_reads_only_the_records_it_made(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    build(store, Spec())
    flattened.clear()
    grown = build(store, GROWN)
    assert grown.reused == 30 and grown.executed == NEW_NODES
    assert len(flattened) == NEW_NODES  # the build's 30 reused nodes were copied; its head is its segment
    copied_views = every_view(store.root)
    assert len(copied_views["runs"]) == 8 and len(copied_views["build_nodes"]) == 30 + 40
    flattened.clear()
    assert flattened_from_nothing(store, monkeypatch) == copied_views
    assert len(flattened) == 30 + 40  # (both builds; the head is the second one's segment)


def test_builds_indexed_by_one_query_copy_from_the_one_before(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    build(store, Spec(), refresh=False)
    build(store, GROWN, refresh=False)
    index_pending(store)
    # Each node once: whichever build was indexed second copied the rest from the other's segment.
    assert len(flattened) == 30 + NEW_NODES
    copied_views = every_view(store.root)
    assert flattened_from_nothing(store, monkeypatch) == copied_views


def test_a_head_another_build_wrote_copies_what_its_campaign_had(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    build(store, Spec())
    monkeypatch.setattr(heads, "same_rows", lambda *args: False)  # as for a head pulled or imported
    flattened.clear()
    build(store, GROWN)
    assert len(flattened) == 2 * NEW_NODES  # the build's new nodes, then the head's
    copied_views = every_view(store.root)
    assert flattened_from_nothing(store, monkeypatch) == copied_views


def test_a_source_gone_before_the_copy_is_flattened_in_full(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's compaction or refresh removes the directory between the look and the copy."""
    build(store, Spec())
    real = copied.reusable

    def vanishing(source: Path):  # type: ignore[no-untyped-def]
        found = real(source)
        shutil.rmtree(source)
        return found

    monkeypatch.setattr(copied, "reusable", vanishing)
    flattened.clear()
    build(store, GROWN)
    assert len(flattened) == NEW_NODES + 40  # copying failed, so all 40 nodes were flattened again
    copied_views = every_view(store.root)
    assert flattened_from_nothing(store, monkeypatch) == copied_views
    assert not list((store.root / "manifest" / "tmp").glob("*"))  # the failed write left nothing behind


def test_another_flattening_copies_nothing_an_older_claw_wrote(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    build(store, Spec())
    monkeypatch.setattr(rows, "_CODE_TAG", b"rows.py as changed by an upgrade")
    flattened.clear()
    build(store, GROWN)
    assert len(flattened) == 40


def _nodes_file(path: Path, values: str, hidden: bool = True) -> Path:
    path.mkdir()
    columns = "record_id, kind, key, status, latency_s, cost_usd"
    columns += ", _claw_node_sig, _claw_run_key" if hidden else ""
    duckdb.execute(f"COPY (SELECT * FROM (VALUES {values}) AS t({columns})) TO '{path / 'nodes.parquet'}' "
                   "(FORMAT parquet)")
    return path


def test_only_a_node_held_once_with_a_read_record_can_be_copied(tmp_path: Path) -> None:
    source = _nodes_file(tmp_path / "head", ", ".join([
        "('r1', 'run', 'k1', 'success', 1.5, 0.25, 11, NULL)",
        "('r2', 'judge', 'k2', 'success', 0.5, 0.5, 12, 'k1')",
        "('r3', 'judge', 'k3', 'success', 0.5, 0.5, 13, 'k1')",  # the same node twice: which rows?
        "('r3', 'judge', 'k3', 'success', 0.5, 0.5, 13, 'k1')",
        "('r4', 'run', 'k4', NULL, NULL, NULL, NULL, NULL)",  # its record could not be read
    ]))
    found = copied.reusable(source)
    assert found is not None and found.source == source
    assert dict(found.facts) == {("r1", 11): rows.Facts("run", "k1", "success", 1.5, 0.25, None),
                                 ("r2", 12): rows.Facts("judge", None, None, None, 0.5, "k1")}  # (what is read of it)
    older = _nodes_file(tmp_path / "older", "('r1', 'run', 'k1', 'success', 1.5, 0.25)", hidden=False)
    assert copied.reusable(older) is None  # written before the hidden columns
    assert copied.reusable(tmp_path / "gone") is None


def test_claw_installed_without_its_sources_signs_nodes_by_its_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(path: Path) -> bytes:
        raise FileNotFoundError(path)

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    tag = rows._code_tag()  # (at import: no source to read must not stop claw query)
    assert tag == rows._code_tag() != rows._CODE_TAG


def test_a_record_reused_under_another_address_is_flattened_with_it(
        store: Store, flattened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A model renamed in the suite (its run keys unchanged) reuses every record of the old name: the
    rows must name the new model, so those nodes' rows are not copied from the old head."""
    build(store, Spec())
    flattened.clear()
    renamed = build(store, Spec(models=["alias/gpt-a", "anthropic/claude-b"],
                                key_model={"alias/gpt-a": "openai/gpt-a"}))
    assert renamed.reused == 30 and renamed.executed == 0
    # The renamed model's 15 nodes, for the build and again for its head (which here also keeps the old
    # name's nodes, so it is not the build's rows): everything else was copied.
    assert len(flattened) == 2 * 15
    copied_views = every_view(store.root)
    named = run_query(store.root, f"select distinct model_id from run_history where build_id = '{renamed.build_id}'")
    assert {row[0] for row in named.rows} == {"alias/gpt-a", "anthropic/claude-b"}
    assert flattened_from_nothing(store, monkeypatch) == copied_views


def _oid(n: int) -> str:
    return f"blake3:{n:064x}"


def _nodes_of(path: Path, nodes: list[tuple[Any, ...]]) -> Path:
    values = ", ".join("(" + ", ".join("NULL" if v is None else repr(v) for v in node) + ")" for node in nodes)
    return _nodes_file(path, values)


def test_packed_facts_are_the_mapping_of_the_nodes_held_once(tmp_path: Path) -> None:
    """copied.reusable's FactTable gives what a dict of the source's nodes held once gives: object ids packed, a record
    with two signatures, an id that is not an object id (held beside), an id in uppercase never the lowercase one's."""
    upper = "blake3:" + _oid(0xABC4)[7:].upper()
    nodes = [  # record_id, kind, key, status, latency_s, cost_usd, _claw_node_sig, _claw_run_key
        (_oid(1), "run", "k1", "success", 1.5, 0.25, 5, None),
        (_oid(1), "judge", "j1", "success", 2.5, 0.5, -7, "k1"),  # (the same record under another signature)
        (_oid(3), "result", "x", "success", None, 0.0, 2, "k1"),
        (_oid(2), "checks", "c", "success", None, 0.0, 2, "k9"),
        ("r1", "run", "k2", None, None, None, 11, None),  # not an object id
        (upper, "run", "k4", "failed", None, 0.5, 4, None),
        (_oid(5), "run", "k5", "success", 1.0, 0.1, 6, None),  # held twice: not copied
        (_oid(5), "run", "k5", "success", 1.0, 0.1, 6, None),
    ]
    table = copied.reusable(_nodes_of(tmp_path / "head", nodes))
    assert table is not None
    expected = {(record_id, sig): rows.Facts(kind, key if kind == "run" else None, status if kind == "run" else None,
                                             latency if kind == "run" else None, cost, run_key)
                for record_id, kind, key, status, latency, cost, sig, run_key in nodes[:6]}
    assert dict(table.facts) == expected and len(table.facts) == 6
    for key, facts in expected.items():
        entry = table.facts.lookup(*key)
        assert entry is not None and table.facts.facts_at(entry) == facts and table.facts.key_at(entry) == key
    for missing in ((_oid(1), 6), (_oid(0xABC4), 4), (_oid(4), 2), (_oid(5), 6), ("r1", 12)):
        assert table.facts.lookup(*missing) is None


def test_taken_nodes_are_the_list_of_taken_they_replace(tmp_path: Path) -> None:
    table = copied.reusable(_nodes_of(tmp_path / "head", [(_oid(7), "run", "k", "success", 1.0, 0.5, -1, None),
                                                          ("r1", "result", "x", None, None, 0.0, 2, "k"),
                                                          (_oid(8), "judge", "j", "success", None, 0.1, 3, "k")]))
    assert table is not None
    taken = packed.TakenNodes(table.facts)
    scored = {"run_status": "success", "latency_s": 1.5, "run_cost_usd": None, "eval_cost_usd": 0.25,
              "total_cost_usd": None}
    for position, record_id, sig, action in ((3, _oid(7), -1, "reuse"), (9, "r1", 2, None), (12, _oid(8), 3, "x")):
        entry = table.facts.lookup(record_id, sig)
        assert entry is not None
        taken.add(position, entry, action)
    taken.score(9, scored)
    with pytest.raises(ValueError, match="detached"):
        list(taken)
    assert list(taken.detach()) == [packed.Taken(3, _oid(7), -1, "reuse", None), packed.Taken(9, "r1", 2, None, scored),
                           packed.Taken(12, _oid(8), 3, "x", None)]
    assert len(taken) == 3
    with pytest.raises(ValueError, match="after"):
        taken.add(12, 0, "reuse")
    with pytest.raises(KeyError):
        taken.score(10, scored)
