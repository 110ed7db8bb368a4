"""gc's walk by arrays (store/reach_arrays.py) reaches exactly what the walk by rows and the plainest walk reach, on an
index of several tables with what the arrays leave to a look-up an object at a time: a small segment's objects in a
pack a table also names (one named from a tabled object of its own pack), ids of objects never stored, a pack gc
writes the edges file of; and gc's dry-run report is the same either way."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest

from clawstore.errors import StoreError
from clawstore.store import Store, edges, reach, reach_arrays
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core import index
from clawstore.store.core.ids import PREFIX
from clawstore.store.reach import Reach
from clawstore.store.services.gc import collect
from tests.gc.test_reach_many import _graph, _reference_walk
from tests.support.once import made_once
from tests.support.storefiles import age_packs, pack_files

Built = tuple[Path, list[str]]  # (a built store's root, and its roots)


def _named_before_stored(store: Store) -> str:
    """Objects of one pack, most in the index's tables, whose first names one stored last (a small segment's: its id
    known before its bytes were put), which names tabled objects of that pack in turn."""
    leaves = [store.put_json({"leaf": i}) for i in range(40)]
    late = json.dumps({"late": leaves[:20]}).encode()
    late_id = PREFIX + blake3.blake3(late).hexdigest()
    first = store.put_json({"names": late_id, "and": leaves[20:25]})
    for i in range(60):  # (commits enough to merge the ones above into a table)
        store.put_json({"pad": i, "leaf": leaves[i % 40]})
    assert store.put_bytes(late) == late_id
    return first


def _entries(store: Store, count: int) -> str:
    """`count` action entries, a key of them twice (a newer entry); the records of every third named by the object
    returned (the others' entries are doomed by a gc with no grace)."""
    records = []
    for i in range(count):
        key = store.put_json({"node": i})
        records.append(store.put_action(key, {"kind": "run", "key": key, "input": key, "outputs": {}}))
        if i == count // 2:
            store.put_action(key, {"kind": "run", "key": key, "input": key, "outputs": {"again": records[0]}})
    return store.put_json({"records": records[::3]})


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, list[str]]:
    monkeypatch.setattr(index, "SMALL_ROWS", 16)  # each commit's segment merged into tables, as at scale
    store = Store(tmp_path / "store")
    roots = [_graph(store, 1500, seed=11)]
    records = _entries(store, 90)
    roots += [_named_before_stored(store), records]
    store.runtime.close_writer()
    roots.append(store.put_json({"another": roots[0], "small": store.put_json({"small": "segment"})}))
    store.runtime.close_writer()
    snapshot = store.runtime.index.snapshot()
    assert len(snapshot.entries.tables) >= 2 and snapshot.entries.objects  # (tables, and small segments)
    assert sum(table._head.n_actions for table in snapshot.entries.tables) > 50
    assert len(pack_files(store)) >= 4
    return store, roots


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """_store's store and roots, made once in the run (~1.3 s of CPU; made_once): each test walks or gcs a copy."""
    def make(made: Path) -> None:
        with pytest.MonkeyPatch.context() as monkeypatch:
            store, roots = _store(made, monkeypatch)
        store.close()
        (made / "roots.json").write_text(json.dumps(roots))

    made = made_once(tmp_path_factory, "reach-arrays", make)
    return made / "store", json.loads((made / "roots.json").read_text())


def _copied(built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, list[str]]:
    """A copy of the built store (its files' mtimes kept), written to as _store's is: each commit merged into tables."""
    monkeypatch.setattr(index, "SMALL_ROWS", 16)
    root, roots = built
    return Store(Path(shutil.copytree(root, tmp_path / "store")), create=False), list(roots)


def _walk(store: Store, roots: list[str], by_arrays: bool) -> Reach:
    walk = Reach(Store(store.root, create=False), cached=True)
    if not by_arrays:
        walk._held_arrays = lambda finder: None  # type: ignore[method-assign]
    walk.mark(roots[:1])
    walk.mark(roots[1:])  # (a second mark: marks, seen rows and waiting kept between marks)
    assert (walk._arrays is not None) == by_arrays
    return walk


def test_the_walk_by_arrays_reaches_what_the_walk_by_rows_and_the_plainest_walk_reach(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, roots = _copied(built, tmp_path, monkeypatch)
    for pack in pack_files(store)[:1]:  # (a pack without its file: gc writes it when the walk takes the pack up)
        edges.edges_path(store.root, pack.name.split(".")[0]).unlink(missing_ok=True)
    reached, missing = _reference_walk(store, roots)
    by_rows, by_arrays = _walk(store, roots, False), _walk(store, roots, True)
    assert len(reached) > 500 and missing
    for walk in (by_rows, by_arrays):
        assert walk.marked == reached
        assert len(walk) == len(reached)
        assert set(walk.missing) == missing
        assert all(walk.missing[hexdigest] in reached for hexdigest in missing)  # (who named it: a reached object)
        assert walk.mark(roots) == 0
    assert by_arrays.loads <= by_rows.loads + 1


@pytest.mark.parametrize("edges_at_once", [1, 5])
def test_the_walk_by_arrays_taken_a_few_ids_at_a_time_reaches_the_same(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edges_at_once: int) -> None:
    """The walk by arrays takes a frontier's rows WALK_EDGES ids at a time (its arrays bounded by that, not by a pack's
    frontier): cut to a few, it marks what the plainest walk reaches, and says what is missing the same."""
    store, roots = _copied(built, tmp_path, monkeypatch)
    reached, missing = _reference_walk(store, roots)
    taken: list[tuple[int, int]] = []  # (rows, the ids they name) of each take
    real_cut = reach._cut

    def cut(todo: Any, starts: Any) -> Any:
        found = real_cut(todo, starts)
        taken.append((len(found[0]), int((starts[found[0] + 1] - starts[found[0]]).sum())))
        return found

    monkeypatch.setattr(reach, "WALK_EDGES", edges_at_once)
    monkeypatch.setattr(reach, "_cut", cut)
    walk = _walk(store, roots, True)
    assert walk.marked == reached and set(walk.missing) == missing
    assert all(named <= edges_at_once or rows == 1 for rows, named in taken)
    assert len(taken) > 100 and max(named for _, named in taken) > 1  # (cut often; a row naming more taken alone)


@pytest.mark.parametrize("edges_at_once", [reach.WALK_EDGES, 40])
def test_the_walk_by_arrays_looks_up_a_packs_ids_gathered_over_its_frontiers(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edges_at_once: int) -> None:
    """The ids a pack's frontiers name elsewhere are looked up together, WALK_EDGES at most at once (more only as one
    frontier's own): one look-up a pack taken up where they are fewer, not one a frontier (a look-up reads a table's
    rows wherever its keys fall, nearly all of it for a few thousand ids as for 65,536), and the same marks."""
    store, roots = _copied(built, tmp_path, monkeypatch)
    reached, missing = _reference_walk(store, roots)
    asked: list[int] = []  # (ids of each look-up by the walk)
    others: list[int] = []  # (ids each frontier sent to be looked up)
    real_lookup, real_gather = reach_arrays.HeldArrays.lookup, reach_arrays.gather

    def lookup(self: reach_arrays.HeldArrays, digests: Any) -> Any:
        if sys._getframe(1).f_code.co_name not in ("_row_of", "_roots_waiting"):  # (a root's or a stacked id's own
            # look-up: not the walk's)
            asked.append(len(digests))
        return real_lookup(self, digests)

    def gather(starts: Any, tokens: Any, frontier: Any) -> Any:
        found = real_gather(starts, tokens, frontier)
        others.append(len(found[0]))  # (what a frontier names: what it may send, at most)
        return found

    monkeypatch.setattr(reach, "WALK_EDGES", edges_at_once)
    monkeypatch.setattr(reach_arrays.HeldArrays, "lookup", lookup)
    monkeypatch.setattr(reach_arrays, "gather", gather)
    walk = _walk(store, roots, True)
    assert walk.marked == reached and set(walk.missing) == missing
    if edges_at_once > 1000:  # (WALK_EDGES: no pack of this store names that many, one look-up a pack at most)
        assert 0 < len(asked) <= walk.loads < len([count for count in others if count])
    else:  # (cut at WALK_EDGES, or at one frontier's own: a row naming more is taken alone)
        assert max(asked) <= max(edges_at_once, *others) and len(asked) > walk.loads


def test_many_roots_marked_at_once_are_looked_up_together(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gc marks a killed build's records 8,192 roots at a time (store/buildlogs.py unadopted_records): they are looked
    up in one go, not one look-up a root. Before session 77 each root was looked up alone (`_row_of`, ~0.1 ms of numpy
    each): 7.0 s of the 7.3 s a 2,000 x 5 gc --dry-run took with a killed build's journal of 38,000 records, 0.4 s
    without it (docs/scale/gc-and-fsck.md, Session 77)."""
    store, roots = _copied(built, tmp_path, monkeypatch)
    reached, missing = _reference_walk(store, roots)
    many = [PREFIX + hexdigest for hexdigest in sorted(reached)] + [PREFIX + hexdigest for hexdigest in missing]
    one_at_a_time: list[int] = []
    real_lookup = reach_arrays.HeldArrays.lookup

    def lookup(self: reach_arrays.HeldArrays, digests: Any) -> Any:
        if sys._getframe(1).f_code.co_name == "_row_of":
            one_at_a_time.append(len(digests))
        return real_lookup(self, digests)

    monkeypatch.setattr(reach_arrays.HeldArrays, "lookup", lookup)
    walk = Reach(Store(store.root, create=False), cached=True)
    assert walk.mark(many) == len(reached)
    assert walk._arrays is not None and walk.marked == reached and set(walk.missing) == missing
    # (those the arrays leave to a look-up an object at a time: ids the index lacks, a small segment's, ids of a pack
    # read without its file)
    assert len(one_at_a_time) < len(many) // 10, (len(one_at_a_time), len(many))


@pytest.mark.parametrize("tally_rows", [reach_arrays.TALLY_ROWS, 7])
def test_gc_and_its_dry_run_report_the_same_by_arrays_and_by_rows_and_keep_the_same(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tally_rows: int) -> None:
    """The dry run by arrays also counts the tables' objects by arrays (reach_arrays.tally, a table TALLY_ROWS rows at
    a time: cut to a few, the same): the same report."""
    monkeypatch.setattr(reach_arrays, "TALLY_ROWS", tally_rows)
    store, roots = _copied(built, tmp_path, monkeypatch)
    store.set_ref("pins/some", roots[1])  # (the graph's objects unreached: doomed, the packs rewritten)
    store.set_ref("pins/records", roots[2])  # (a third of the entries' records reached: the others' entries doomed)
    age_packs(store, 7200)
    shutil.copytree(store.root, tmp_path / "copy")
    tallied: list[tuple[bool, bool]] = []  # whether each plan not holding them counted objects and entries by arrays
    tally, tally_actions = Reach.tally, Reach.tally_actions

    def counted(self: Reach, entries: index.Entries) -> object:
        found = tally(self, entries)
        tallied.append((found is not None, tally_actions(self, entries) is not None))
        return found

    monkeypatch.setattr(Reach, "tally", counted)
    reports, kept = [], []
    for held, root in ((reach.HELD, store.root), (0, tmp_path / "copy")):  # (HELD 0: the walk by rows)
        monkeypatch.setattr(reach, "HELD", held)
        for dry_run in (True, False):
            report = collect(Store(root, create=False), grace_s=0, dry_run=dry_run).to_json()
            reports.append({name: value for name, value in report.items() if name != "seconds"})
        kept.append(sorted(Store(root, create=False).iter_objects()))
    assert reports[0] == reports[2] and reports[1] == reports[3]
    assert reports[0]["objects_deleted"] and reports[0]["reachable"] and reports[0]["packs_rewritten"]
    assert kept[0] == kept[1] and len(kept[0]) == reports[0]["reachable"]
    assert tallied[0] == (True, True) and tallied[-1] == (False, False)  # (by arrays, then by rows)
    assert reports[0]["actions_deleted"]


def test_a_table_whose_rows_are_out_of_order_is_not_searched_by_arrays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Searched by arrays, rows out of order hide objects that are there (gc would count them unreached): such an
    index is walked by rows, whose look-ups refuse it, so gc stops the same way both walks do."""
    monkeypatch.setattr(index, "SMALL_ROWS", 16)
    store = Store(tmp_path / "store")  # (no id the index lacks: no object read, which would look the table up)
    store.set_ref("pins/records", _entries(store, 200))
    store.set_ref("pins/late", _named_before_stored(store))
    store.runtime.close_writer()
    age_packs(store, 7200)
    table = max(store.runtime.index.snapshot().entries.tables, key=lambda table: table._head.n_objects)
    at, size = table._head.objects_at, 52
    outcomes = []
    for held in (reach.HELD, 0):  # (each on a copy: a process shares one runtime, its tables' look-ups, a store)
        root = tmp_path / f"held{held}"
        shutil.copytree(store.root, root)
        path = root / "index" / f"{table.name}.idx"
        data = bytearray(path.read_bytes())
        data[at:at + 2 * size] = data[at + size:at + 2 * size] + data[at:at + size]  # (its first two rows swapped)
        data[-32:] = blake3.blake3(bytes(data[:-32])).digest()  # (a writer's bug, not damage: the checksum holds)
        path.write_bytes(bytes(data))
        monkeypatch.setattr(reach, "HELD", held)
        try:
            report = collect(Store(root, create=False), grace_s=0, dry_run=True).to_json()
            outcomes.append(str({name: value for name, value in report.items() if name != "seconds"}))
        except StoreError as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    assert outcomes[0] == outcomes[1]
    assert f"BadSegmentError: index segment {table.name} is not sorted" == outcomes[0]


def test_a_table_naming_an_object_twice_is_not_walked_by_arrays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table holding a row twice (a damaged table its checks pass: its rows are still in order) made the walk by
    arrays mark the second row, reached from its pack's file, while a look-up answers with the first: the record, kept,
    read as unreached, and its action entry doomed. Such an index is walked by rows: both walks keep the same."""
    store, pinned, table, rows = _pinned_store(tmp_path, monkeypatch)
    wanted = {bytes.fromhex(record[len(PREFIX):]) for record in pinned}
    row = next(row for digest, row in rows[:-1] if digest in wanted and rows[row + 1][0] not in wanted)

    def twice(data: bytearray, start: int, size: int) -> None:
        data[start + size:start + 2 * size] = data[start:start + size]  # (the row twice; the next one's object unnamed)

    _same_both_ways(store, table, row, twice, pinned, tmp_path, monkeypatch)


def _keys_cut_to_a_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arrays' sort keys cut to each id's first byte: ~1 id in 256 shares each key, as ids sharing their first 8
    bytes do in a crafted store (records name ids as any text; 2**32 hashes for a real pair)."""
    def cut(dtype: Any, field: str) -> Any:
        fields = {name: (dtype.fields[name][0], dtype.fields[name][1]) for name in dtype.names}
        fields[field] = (reach_arrays.np.dtype(">u1"), 0)
        return reach_arrays.np.dtype({"names": list(fields), "formats": [f for f, _ in fields.values()],
                                      "offsets": [at for _, at in fields.values()], "itemsize": dtype.itemsize})

    monkeypatch.setattr(reach_arrays, "_ROW", cut(reach_arrays._ROW, "key"))
    monkeypatch.setattr(reach_arrays, "_ACTION", cut(reach_arrays._ACTION, "sort"))
    monkeypatch.setattr(reach_arrays, "keys_of", lambda digests: reach_arrays.np.ascontiguousarray(digests).view(
        "u1").reshape(-1, 32)[:, 0].astype(reach_arrays.np.uint64))


@pytest.mark.parametrize("rows_read", [reach_arrays.ROWS_READ, 7])
def test_ids_sharing_their_sort_keys_are_told_apart_by_their_whole_ids(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: int) -> None:
    """The walk by arrays holds each table's sort keys, not its rows: a key matched reads its row in place
    (reach_arrays.rows_at), and the whole id is compared. With ~7 ids a key (keys cut to a byte), the walk still
    marks what the plainest walk reaches, and gc by arrays deletes and keeps what gc by rows does: an id taken for
    another that shares its key would leave an object unmarked, and gc would delete what a pin still names. The rows
    read ROWS_READ at a time (cut to 7: ids sharing a key across a read's edge) do the same."""
    monkeypatch.setattr(reach_arrays, "ROWS_READ", rows_read)
    store, roots = _copied(built, tmp_path, monkeypatch)
    reached, missing = _reference_walk(store, roots)
    _keys_cut_to_a_byte(monkeypatch)
    walk = _walk(store, roots, True)
    assert walk.marked == reached and set(walk.missing) == missing
    keys = walk._arrays._tables[0][1] if walk._arrays is not None else None
    assert keys is not None and len(keys) > 1000 and len(set(keys.tolist())) <= 256  # (the keys shared, many a key)
    store.set_ref("pins/some", roots[1])
    store.set_ref("pins/records", roots[2])
    age_packs(store, 7200)
    shutil.copytree(store.root, tmp_path / "copy")
    reports, kept = [], []
    for held, root in ((reach.HELD, store.root), (0, tmp_path / "copy")):  # (HELD 0: the walk by rows)
        monkeypatch.setattr(reach, "HELD", held)
        report = collect(Store(root, create=False), grace_s=0).to_json()
        reports.append({name: value for name, value in report.items() if name != "seconds"})
        kept.append(sorted(Store(root, create=False).iter_objects()))
    assert reports[0] == reports[1] and kept[0] == kept[1]
    assert reports[0]["objects_deleted"] and reports[0]["actions_deleted"]


@pytest.mark.parametrize(("rows_read", "gap"), [(reach_arrays.ROWS_READ, reach_arrays._GAP), (7, 64), (64, 0)])
def test_a_dry_run_by_arrays_lists_the_rows_it_read_in_place_as_the_walk_by_rows_does(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: int, gap: int) -> None:
    """A dry run by arrays names its doomed objects from their rows read in place (reach_arrays.rows_at: rows at most
    _GAP apart in one read, ROWS_READ rows' worth of reads at once): cut to a few, so that a batch holds many reads
    and the wanted rows come from each, it lists the same ids and sizes as the walk by rows, each once."""
    monkeypatch.setattr(reach_arrays, "ROWS_READ", rows_read)
    monkeypatch.setattr(reach_arrays, "_GAP", gap)
    store, roots = _copied(built, tmp_path, monkeypatch)
    store.set_ref("pins/records", roots[2])  # (a third of the records reached: the doomed rows interleaved with kept)
    store.set_ref("pins/some", roots[1])
    age_packs(store, 7200)
    reads: list[int] = []
    rows_at = reach_arrays.rows_at

    def counted(table: index.Table, rows: Any) -> Any:
        reads.append(len(rows))
        return rows_at(table, rows)

    monkeypatch.setattr(reach_arrays, "rows_at", counted)
    listed = []
    for held in (reach.HELD, 0):  # (HELD 0: the walk by rows)
        monkeypatch.setattr(reach, "HELD", held)
        report = collect(Store(store.root, create=False), grace_s=0, dry_run=True)
        listed.append((report.objects, report.actions, report.object_bytes_deleted))
    assert listed[0] == listed[1]
    assert len(listed[0][0]) > 1000 and len({oid for oid, _ in listed[0][0]}) == len(listed[0][0])
    assert sum(reads) > 1000  # (the doomed rows read in place by arrays)


@pytest.mark.parametrize("rows_read", [reach_arrays.ROWS_READ, 7])
def test_a_table_naming_an_object_twice_with_an_id_sharing_its_key_between_is_not_walked_by_arrays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: int) -> None:
    """As above, the row twice, but a row between them naming an id that shares their first 8 bytes (a crafted table:
    its keys in order, its ids not): the checks that compared neighbours only passed it, the walk by arrays marked the
    second row, and the kept record's entry was doomed. Such an index is walked by rows: both keep the same. (The
    rows read 7 at a time: the second row the first of a read, after the id between.)"""
    monkeypatch.setattr(reach_arrays, "ROWS_READ", rows_read)
    store, pinned, table, rows = _pinned_store(tmp_path, monkeypatch)
    wanted = {bytes.fromhex(record[len(PREFIX):]) for record in pinned}
    row = next(row for digest, row in rows[:-2] if digest in wanted
               and rows[row + 1][0] not in wanted and rows[row + 2][0] not in wanted)

    def shared_key_between(data: bytearray, start: int, size: int) -> None:
        twice = bytes(data[start:start + size])
        between = bytearray(data[start + size:start + 2 * size])  # (the next row's place, an id sharing 8 bytes)
        between[:32] = twice[:8] + bytes(b ^ 0xFF for b in twice[8:32])
        if between[:32] < twice[:32]:
            between[8] = 0xFF
        data[start + size:start + 3 * size] = bytes(between) + twice
        assert rows_read != 7 or (row + 2) % 7 == 0  # (the second row begins a read)

    _same_both_ways(store, table, row, shared_key_between, pinned, tmp_path, monkeypatch)


def test_a_table_of_action_rows_alone_leaves_the_walk_by_arrays(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table without object rows (a commit of action entries alone, their records put before) has nothing to hold:
    the walk stays by arrays (it turned to the walk by rows, which holds the index's rows, once session 61 held keys
    only: such a table counted as held) and marks what the plainest walk reaches."""
    store, roots = _copied(built, tmp_path, monkeypatch)
    records = store.get_json(roots[2])["records"]
    set_entries(store, {key_digest(PREFIX + "%064x" % (i + 1)): (bytes.fromhex(record[len(PREFIX):]), 1)
                        for i, record in enumerate((records * 2)[:40])})
    store.runtime.close_writer()
    assert any(not table._head.n_objects for table in store.runtime.index.snapshot().entries.tables)
    reached, _ = _reference_walk(store, roots)
    walk = _walk(store, roots, True)
    assert walk.marked == reached


def _pinned_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, list[str], Any, list]:
    """A store whose records a third of are pinned (named from their own pack), its packs aged past the grace, and
    its biggest index table with that table's (id, row) pairs."""
    monkeypatch.setattr(index, "SMALL_ROWS", 16)
    store = Store(tmp_path / "store")
    store.set_ref("pins/records", _entries(store, 90))
    store.runtime.close_writer()
    age_packs(store, 7200)
    pinned = store.get_json(store.get_ref("pins/records"))["records"]
    table = max(store.runtime.index.snapshot().entries.tables, key=lambda table: table._head.n_objects)
    rows = [(bytes(digest), row) for row, (digest, _) in enumerate(table.iter_objects())]
    return store, pinned, table, rows


def _same_both_ways(store: Store, table: Any, row: int, damage: Callable[[bytearray, int, int], None],
                    pinned: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`damage` the table's rows from `row` on (its checksum made good again) in two copies of the store, then gc one
    by arrays and one by rows: both keep every pinned record's entry and report the same."""
    at, size = table._head.objects_at, 52
    outcomes = []
    for held in (reach.HELD, 0):  # (HELD 0: the walk by rows)
        root = tmp_path / f"held{held}"
        shutil.copytree(store.root, root)
        path = root / "index" / f"{table.name}.idx"
        data = bytearray(path.read_bytes())
        damage(data, at + row * size, size)
        data[-32:] = blake3.blake3(bytes(data[:-32])).digest()
        path.write_bytes(bytes(data))
        monkeypatch.setattr(reach, "HELD", held)
        report = collect(Store(root, create=False), grace_s=0)
        outcomes.append({name: value for name, value in report.to_json().items() if name != "seconds"})
        assert not {record for _, record in report.actions} & set(pinned)  # (a kept record's entry kept)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0]["actions_deleted"]
