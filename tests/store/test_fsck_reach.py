"""fsck checks each record that entries and heads name once, in chunks: every entry and every head node
that relies on a damaged record, output or output-tree file is still named, whatever the chunking."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store, edges
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services import fsck_reach
from clawstore.store.services.fsck import fsck
from tests.support.storefiles import flip_in_frame, lose_object


@pytest.mark.parametrize("chunk,sealed", [(3, False), (4096, False), (4096, True)])
def test_every_entry_and_head_node_relying_on_a_lost_file_is_named_whatever_the_chunks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, sealed: bool) -> None:
    """`sealed`: the packs are sealed, so the first fsck writes their edges files and the second checks output trees
    by what they name (edges.py) instead of reading them: a lost file must be named all the same."""
    monkeypatch.setattr(fsck_reach, "CHUNK", chunk)
    monkeypatch.setattr(fsck_module, "CHUNK", chunk)
    store = Store(tmp_path / "store")
    trees = {}
    for name in ("damaged", "whole"):
        directory = tmp_path / name
        (directory / "sub").mkdir(parents=True)
        (directory / "sub" / "kept.txt").write_text(f"kept in {name}")
        (directory / "lost.txt").write_text(f"lost from {name}")
        trees[name] = store.put_tree(directory)
    lost = store.put_bytes(b"lost from damaged")
    gone = store.put_bytes(b"an artifact lost on its own")
    keys, records = [], []
    for i in range(8):
        key = store.put_json({"node": i})
        artifact = gone if i == 7 else store.put_bytes(f"artifact {i}".encode())
        tree = trees["damaged" if i % 2 == 0 else "whole"]
        record = {"kind": "run", "key": key, "input": key,
                  "outputs": {"input_document": key, "artifact": artifact, "sandbox": tree}}
        records.append(store.put_action(key, record))
        keys.append(key)
    nodes = [{"kind": "run", "record": rid, "address": {"model_id": "m", "case_id": f"c{i}", "repetition": 0}}
             for i, rid in enumerate(records)]
    head = store.put_json({"nodes": nodes})
    store.set_ref("campaigns/x", head)
    store.set_ref("pins/p", head)
    if sealed:
        store.runtime.close_writer()
    assert fsck(store).problems == []
    assert any((store.root / edges.DIR).glob(f"*{edges.SUFFIX}")) == sealed
    lose_object(store, lost)
    lose_object(store, gone)

    report = fsck(store)
    why = {i: f"output tree {trees['damaged']}: file lost.txt ({lost}) is missing" for i in (0, 2, 4, 6)}
    why[7] = f"output {gone} is missing"
    assert report.bad_actions == {keys[i]: reason for i, reason in why.items()}
    expected = {i: f"node run c{i}/m/0: {reason}" for i, reason in why.items()}
    assert report.bad_head_nodes == {"campaigns/x": expected, "pins/p": expected}


def test_a_file_damaged_in_its_own_pack_is_named_though_its_tree_is_vouched_for_by_an_edges_file(
        tmp_path: Path) -> None:
    """The tree's pack still hashes the same (its edges file trusted, the tree not read); the file's pack does not."""
    store = Store(tmp_path / "store")
    directory = tmp_path / "out"
    directory.mkdir()
    (directory / "log.txt").write_text("a log, damaged later " * 50)
    file_id = store.put_bytes(("a log, damaged later " * 50).encode())
    store.runtime.close_writer()
    tree = store.put_tree(directory)
    key = store.put_json({"node": 1})
    store.put_action(key, {"kind": "run", "key": key, "input": key, "outputs": {"sandbox": tree}})
    store.runtime.close_writer()
    assert fsck(store).problems == [] and len(list((store.root / edges.DIR).iterdir())) == 2
    flip_in_frame(store, file_id, -5)
    report = fsck(store)
    assert report.bad_actions == {key: f"output tree {tree}: file log.txt ({file_id}) is corrupt"}


def test_the_edges_file_most_asked_stays_held_while_others_come_and_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FILES held at once: the one let go for the next is the one read fewest times, the oldest of those. A pack most
    groups ask (their input documents') between packs asked once each is read twice, not each time it came back (by
    age alone, 9 reads of one file in a later fsck at 10,000 x 5 where 3 would do)."""
    reads: list[str] = []

    def load(root: Path, packs_dir: Path, pack: str, digest: bytes) -> None:
        reads.append(pack)

    monkeypatch.setattr(fsck_reach.edges, "load", load)
    monkeypatch.setattr(fsck_reach, "FILES", 3)
    asked = "A B C D A E F G A H I J A".split()
    files = fsck_reach.PackFiles(Store(tmp_path / "s"), {pack: bytes(32) for pack in asked}, lambda digest: None)
    for pack in asked:
        assert files.file(pack) is None
    assert reads.count("A") == 2 and len(reads) == len(set(asked)) + 1, reads
