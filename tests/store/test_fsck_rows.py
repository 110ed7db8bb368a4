"""fsck's quick check by rows of verified edges files (store/services/fsck_rows.py) vouches only for what is whole:
on a clean store it answers every entry and head node without the long way, and each damage it could meet — a
tree's file lost in a third pack, an input document lost, an output damaged in another pack, an entry pointed at the
record of another key — is still named, exactly as the long way names it."""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.actions import key_digest, set_entries
from clawstore.store.core.edgefile import PackEdges
from clawstore.store.core.ids import PREFIX
from clawstore.store.headdoc import write_head
from clawstore.store.services import fsck_reach
from clawstore.store.services.fsck import fsck
from clawstore.store.services.fsck_rows import RowCheck
from tests.support.storefiles import flip_in_frame, lose_object


def _store(root: Path, tmp: Path) -> tuple[Store, dict[str, object]]:
    """Files in one pack, the trees and artifacts naming them in a second, input documents, records (every other one
    naming its input document among its outputs too, as format-1 records did) and entries in a third; a parted head."""
    store = Store(root)
    made: dict[str, object] = {}
    made["files"] = [store.put_bytes(f"file {name} ".encode() * 40) for name in ("kept", "lost")]
    store.runtime.close_writer()
    directory = tmp / "out"
    directory.mkdir()
    for name in ("kept", "lost"):
        (directory / f"{name}.txt").write_bytes(f"file {name} ".encode() * 40)
    made["tree"] = store.put_tree(directory)
    made["artifacts"] = [store.put_bytes(f"artifact {i} ".encode() * 30) for i in range(6)]
    store.runtime.close_writer()
    keys, records, nodes = [], [], []
    for i in range(6):
        key = store.put_json({"node": i})
        outputs = {"input_document": key if i % 2 == 0 else None, "artifact": made["artifacts"][i],
                   "sandbox": made["tree"] if i == 0 else None}
        record = store.put_action(key, {"kind": "run", "key": key, "input": key, "outputs": outputs})
        keys.append(key)
        records.append(record)
        nodes.append({"kind": "run", "key": key, "record": record,
                      "address": {"model_id": "m", "case_id": f"c{i}", "repetition": 0}})
    store.runtime.close_writer()
    store.set_ref("campaigns/x", write_head(store, {"campaign": "x"}, nodes))
    store.runtime.close_writer()
    made["keys"], made["records"] = keys, records
    return store, made


def _long_way(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The record ids fsck checks the long way (fsck_reach.Reach.check)."""
    asked: list[str] = []
    check = fsck_reach.Reach.check

    def counted(self: fsck_reach.Reach, record_ids: object, located: object = None) -> object:
        ids = list(record_ids)  # type: ignore[call-overload]
        asked.extend(ids)
        return check(self, ids, located)  # type: ignore[arg-type]

    monkeypatch.setattr(fsck_reach.Reach, "check", counted)
    return asked


def test_a_clean_store_is_answered_by_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _store(tmp_path / "store", tmp_path)
    assert fsck(store).problems == []  # (the first: verifies every pack, writes the files with records' facts)
    asked = _long_way(monkeypatch)
    report = fsck(store)
    assert report.problems == [] and report.actions == 6 and asked == []


@pytest.mark.parametrize("damage", ["tree file lost", "input document lost", "entry of another key",
                                    "output damaged"])
def test_each_damage_is_named_as_the_long_way_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    """Only the records the damage touches go the long way (but for a damaged pack: nothing in it is vouched for)."""
    store, made = _store(tmp_path / "store", tmp_path)
    assert fsck(store).problems == []
    keys, records, artifacts = made["keys"], made["records"], made["artifacts"]
    files, tree = made["files"], made["tree"]
    if damage == "tree file lost":  # a file of record 0's output tree, in a third pack
        lose_object(store, files[1])
        bad, why, long_way = 0, f"output tree {tree}: file lost.txt ({files[1]}) is missing", [records[0]]
    elif damage == "input document lost":  # (of a record that does not name it among its outputs: its node is fine)
        lose_object(store, keys[1])
        bad, why, long_way = 1, "the input document its key is computed from is missing", [records[1]]
    elif damage == "entry of another key":
        set_entries(store, {key_digest(keys[3]): (bytes.fromhex(records[4][len(PREFIX):]), time.time_ns())})
        bad, why, long_way = 3, f"its record is for another key ({keys[4][:23]}...)", [records[4]]
    else:  # an output damaged in another pack than its record's: that pack's file is no longer trusted
        flip_in_frame(store, artifacts[2], -5)
        bad, why, long_way = 2, f"output {artifacts[2]} is corrupt", None
    store.runtime.index.reload()
    asked = _long_way(monkeypatch)
    report = fsck(store)
    assert report.bad_actions == {keys[bad]: why}
    nodes = {"campaigns/x": {bad: f"node run c{bad}/m/0: {why}"}}
    if damage in ("entry of another key", "input document lost"):  # (a node checks its record's outputs only)
        nodes = {}
    assert report.bad_head_nodes == nodes
    if long_way is not None:
        assert sorted(set(asked)) == long_way


def test_the_answers_kept_are_those_of_the_files_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quick check's answers (a byte a row and other id) live on the edges files fsck holds, and it holds no file
    itself: with fsck_reach.FILES = 1, one file is alive at each record checked, not one a pack."""
    monkeypatch.setattr(fsck_reach, "FILES", 1)
    made: list[weakref.ref[PackEdges]] = []
    post_init = PackEdges.__post_init__

    def tracked(self: PackEdges) -> None:
        post_init(self)
        made.append(weakref.ref(self))

    monkeypatch.setattr(PackEdges, "__post_init__", tracked)
    alive: list[int] = []
    record = RowCheck.record

    def counted(self: RowCheck, pack: str, digest: bytes, offset: int) -> object:
        found = record(self, pack, digest, offset)
        gc.collect()
        alive.append(sum(1 for ref in made if (edges := ref()) is not None and edges.answers is not None))
        return found

    store, _ = _store(tmp_path / "store", tmp_path)  # (records in one pack, what they name in two others)
    assert fsck(store).problems == []  # (the edges files made: counted from the next fsck on, a collection a record)
    made.clear()
    monkeypatch.setattr(RowCheck, "record", counted)
    report = fsck(store)
    assert report.problems == [] and report.actions == 6
    assert len(alive) == 6 and max(alive) == 1 and len(made) > 2  # (files loaded again as the check moves between them)


def _shared_outputs(root: Path, tmp: Path) -> tuple[Store, list[str], list[str], str]:
    """Four records in one pack naming the same output tree (its files in another pack) and the same artifact."""
    store = Store(root)
    directory = tmp / "shared"
    directory.mkdir()
    for name in ("a", "b"):
        (directory / f"{name}.txt").write_bytes(f"shared {name} ".encode() * 40)
    tree = store.put_tree(directory)
    artifact = store.put_bytes(b"shared artifact " * 30)
    store.runtime.close_writer()
    files = [store.put_bytes(f"shared {name} ".encode() * 40) for name in ("a", "b")]  # (already there: ids only)
    keys, nodes = [], []
    for i in range(4):
        key = store.put_json({"shared": i})
        record = store.put_action(key, {"kind": "run", "key": key, "input": key,
                                        "outputs": {"sandbox": tree, "artifact": artifact}})
        keys.append(key)
        nodes.append({"kind": "run", "key": key, "record": record,
                      "address": {"model_id": "m", "case_id": f"c{i}", "repetition": 0}})
    store.runtime.close_writer()
    store.set_ref("campaigns/x", write_head(store, {"campaign": "x"}, nodes))
    store.runtime.close_writer()
    return store, keys, files, tree


def test_an_output_many_records_name_is_judged_once(tmp_path: Path) -> None:
    """The quick check keeps an output's verdict (it and all it names there) with its token: four records naming one
    tree in another pack look it up twice (whether it is there, where its pack's file says what it names), not five
    times, and its files once."""
    store, _, files, tree = _shared_outputs(tmp_path / "store", tmp_path)
    assert fsck(store).problems == []
    asked: list[bytes] = []
    init = RowCheck.__init__

    def counting(self: RowCheck, file: object, find: object, damaged: object, keys: object = None) -> None:
        def counted(digest: bytes) -> object:
            asked.append(digest)
            return find(digest)  # type: ignore[operator]
        init(self, file, counted, damaged)  # type: ignore[arg-type]  # (no keys: each id asked one at a time)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RowCheck, "__init__", counting)
        report = fsck(store)
    assert report.problems == [] and report.actions == 4
    assert asked.count(bytes.fromhex(tree[len(PREFIX):])) == 2
    for oid in files:
        assert asked.count(bytes.fromhex(oid[len(PREFIX):])) == 1


def test_a_broken_output_many_records_name_is_named_for_each(tmp_path: Path) -> None:
    """The kept verdict of a broken output sends every record naming it the long way, each named as before."""
    store, keys, files, tree = _shared_outputs(tmp_path / "store", tmp_path)
    assert fsck(store).problems == []
    lose_object(store, files[1])
    store.runtime.index.reload()
    report = fsck(store)
    why = f"output tree {tree}: file b.txt ({files[1]}) is missing"
    assert report.bad_actions == dict.fromkeys(keys, why)
    assert report.bad_head_nodes == {"campaigns/x": {i: f"node run c{i}/m/0: {why}" for i in range(4)}}


def test_an_output_judged_whole_is_taken_as_its_kept_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose outputs another record's check already judged whole takes that kept answer in place: the four
    records naming one tree and one artifact judge each of the two once (two judgements, not eight), and all four
    entries and head nodes are still vouched for."""
    store, _, _, _ = _shared_outputs(tmp_path / "store", tmp_path)
    assert fsck(store).problems == []
    judged: list[int] = []
    output = RowCheck._output

    def counted(self: RowCheck, edges: PackEdges, token: int) -> bool:
        judged.append(token)
        return output(self, edges, token)

    monkeypatch.setattr(RowCheck, "_output", counted)
    report = fsck(store)
    assert report.problems == [] and report.actions == 4
    assert len(judged) == 2 and len(set(judged)) == 2
