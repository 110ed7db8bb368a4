"""Push moves refs by compare-and-swap: read (and checked) before anything is sent, swapped after."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.remote import pull, push
from clawstore.remote.backends import DirectoryBackend, RemoteRefConflict
from clawstore.remote.config import Remote
from clawstore.store import Store


def _store_with_heads(root: Path, names: list[str]) -> Store:
    store = Store(root)
    with store.batch():
        for name in names:
            store.set_ref(name, store.put_json({"head": name}))
    return store


def test_a_ref_moved_between_the_read_and_the_swap_stops_the_push_and_the_others_are_remembered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store_with_heads(tmp_path / "a", ["campaigns/one", "campaigns/two"])
    remote = Remote("team", str(tmp_path / "remote"))
    backend = DirectoryBackend(tmp_path / "remote")
    read_refs = push._ref_moves

    def colleague_pushes_meanwhile(*args: object) -> list[push._RefMove]:
        moves = read_refs(*args)  # type: ignore[arg-type]
        backend.swap_ref("refs/campaigns/two", "blake3:" + "ab" * 32, None)  # after our read, before our swap
        return moves

    monkeypatch.setattr(push, "_ref_moves", colleague_pushes_meanwhile)
    with pytest.raises(RemoteRefConflict, match="refs/campaigns/two"):
        push.push(store, remote)
    assert backend.read_ref("refs/campaigns/one").value == store.get_ref("campaigns/one")
    assert backend.read_ref("refs/campaigns/two").value == "blake3:" + "ab" * 32  # theirs, kept
    assert store.get_ref("remotes/team/campaigns/one") == store.get_ref("campaigns/one")  # it did move
    assert store.get_ref("remotes/team/campaigns/two") is None
    monkeypatch.undo()
    with pytest.raises(RemoteRefConflict, match="refs/campaigns/two"):  # now refused before sending
        push.push(store, remote)


def test_each_moved_ref_has_its_signed_statement_before_it_moves(tmp_path: Path) -> None:
    store = _store_with_heads(tmp_path / "a", [f"campaigns/c{i}" for i in range(12)])
    remote = Remote("team", str(tmp_path / "remote"))
    report = push.push(store, remote)
    assert sorted(report.refs_moved) == report.refs_moved and len(report.refs_moved) == 12
    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)  # checks every statement before it moves a ref
    assert len(pulled.refs_moved) == 12
    assert target.list_refs("campaigns/") == store.list_refs("campaigns/")
    assert push.push(store, remote).refs_moved == []  # the remote holds them all already
