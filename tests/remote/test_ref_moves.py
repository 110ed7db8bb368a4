"""Push moves refs by compare-and-swap: read (and checked) before anything is sent, swapped after."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.remote import pull, push, refsign
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


def test_the_refs_remote_values_are_read_while_the_remote_is_listed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Their round trips overlap the listing's instead of following it: the listing waits here until a ref's read has
    begun, which only happens beside it. A ref moved meanwhile is still refused before anything is sent."""
    store = _store_with_heads(tmp_path / "a", ["campaigns/one", "campaigns/two"])
    remote = Remote("team", str(tmp_path / "remote"))
    asked, seen = threading.Event(), []
    real_read, real_list = DirectoryBackend.read_ref, DirectoryBackend.list

    def read_ref(self: DirectoryBackend, name: str) -> Any:
        asked.set()
        return real_read(self, name)

    def listed(self: DirectoryBackend, prefix: str) -> dict[str, int]:
        seen.append(asked.wait(timeout=5))  # (read one after the other: never set while the listing waits)
        return real_list(self, prefix)

    monkeypatch.setattr(DirectoryBackend, "read_ref", read_ref)
    monkeypatch.setattr(DirectoryBackend, "list", listed)
    assert sorted(push.push(store, remote).refs_moved) == ["campaigns/one", "campaigns/two"]
    assert seen and all(seen)
    DirectoryBackend(tmp_path / "remote").swap_ref("refs/campaigns/two", "blake3:" + "ab" * 32,
                                                   DirectoryBackend(tmp_path / "remote").read_ref("refs/campaigns/two"))
    store.set_ref("campaigns/two", store.put_json({"head": "two, later"}))
    packs = set((tmp_path / "remote" / "packs").iterdir())
    with pytest.raises(RemoteRefConflict, match="refs/campaigns/two"):
        push.push(store, remote)
    assert set((tmp_path / "remote" / "packs").iterdir()) == packs  # refused before anything was sent


def test_the_signed_statements_go_once_every_pack_is_handed_over_and_are_there_before_their_refs_move(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Needed only before the swap, they do not hold up the first packs; handed over last, they may wait for a free
    upload thread (one here) and are still waited for, never cancelled with the pool."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 10)
    monkeypatch.setattr(push, "WORKERS", 1)
    store = _store_with_heads(tmp_path / "a", [f"campaigns/c{i}" for i in range(12)])
    with store.batch():
        for i in range(20):
            store.put_json({"answer": i})
    sent, sent_before = [], []
    real_send, real_publish = push._Sender.send, refsign.publish

    def send(self: push._Sender, item: Any) -> None:
        sent.append(item)
        real_send(self, item)

    def publish(*args: Any) -> None:
        sent_before.append(len(sent))
        real_publish(*args)

    monkeypatch.setattr(push._Sender, "send", send)
    monkeypatch.setattr(refsign, "publish", publish)
    remote = Remote("team", str(tmp_path / "remote"))
    assert len(push.push(store, remote).refs_moved) == 12
    assert len(sent) >= 3 and sent_before == [len(sent)] * 12
    target = Store(tmp_path / "b")
    assert len(pull.pull(target, remote).refs_moved) == 12  # each statement checked before its ref moves
    assert target.list_refs("campaigns/") == store.list_refs("campaigns/")


def test_each_ref_the_remote_moved_to_is_remembered_as_soon_as_its_swap_is_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracking ref (a local write, durable) is written while the other swaps are still on their way, not after
    all of them: here the second swap waits until the first one's tracking ref is there."""
    store = _store_with_heads(tmp_path / "a", ["campaigns/a", "campaigns/b"])
    remote = Remote("team", str(tmp_path / "remote"))
    real_swap, seen = DirectoryBackend.swap_ref, []

    def swap_ref(self: DirectoryBackend, name: str, value: str, expected: Any) -> None:
        if name == "refs/campaigns/b":
            deadline = time.monotonic() + 5
            while store.get_ref("remotes/team/campaigns/a") is None and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append(store.get_ref("remotes/team/campaigns/a"))
        real_swap(self, name, value, expected)

    monkeypatch.setattr(DirectoryBackend, "swap_ref", swap_ref)
    assert push.push(store, remote).refs_moved == ["campaigns/a", "campaigns/b"]
    assert seen == [store.get_ref("campaigns/a")]
    assert store.get_ref("remotes/team/campaigns/b") == store.get_ref("campaigns/b")
