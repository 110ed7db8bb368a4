"""A claim's release unlinks its file outside the board's lock (the group commit's thread releases while workers
take), and its file is free again only once unlinked: a new claim of the same key never shares it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store import claims as claims_module
from clawstore.store.claims import ClaimBoard

KEY_A = "blake3:" + "a" * 64
KEY_B = "blake3:" + "b" * 64


def test_a_release_unlinks_without_holding_the_board_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    with ClaimBoard(store.root, owner="b1") as board:
        assert board.take(KEY_A)
        held_during_unlink: list[bool] = []
        original = os.unlink

        def unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
            held_during_unlink.append(board._lock.locked())
            original(path)

        monkeypatch.setattr(claims_module.os, "unlink", unlink)
        board.release(KEY_A)
        monkeypatch.setattr(claims_module.os, "unlink", original)
        assert held_during_unlink == [False]
        assert not Path(board._name(KEY_A)).exists()
        # Its file is a spare again: the next claim links it, with its own body.
        assert board.take(KEY_B)
        assert board.read(KEY_B) is not None and board.read(KEY_B).owner == "b1"
        assert board.read(KEY_A) is None
        board.release(KEY_B)


def test_a_claim_taken_again_while_its_release_unlinks_keeps_its_own_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    with ClaimBoard(store.root, owner="b1") as board:
        assert board.take(KEY_A)
        first = os.stat(board._name(KEY_A)).st_ino
        original = os.unlink
        again: list[bool] = []

        def unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
            original(path)
            if not again:  # another node of this build takes the key between the unlink and the release's end
                taker = threading.Thread(target=lambda: again.append(board.take(KEY_A)))
                taker.start()
                taker.join(timeout=5)  # (a release unlinking under the lock would keep it waiting)
                again.append(not taker.is_alive())

        monkeypatch.setattr(claims_module.os, "unlink", unlink)
        board.release(KEY_A)
        monkeypatch.setattr(claims_module.os, "unlink", original)
        assert again == [True, True]
        second = os.stat(board._name(KEY_A)).st_ino
        assert second != first  # a fresh file: the released one was not handed out while linked
        assert board.take(KEY_B)  # the released file, now a spare
        assert os.stat(board._name(KEY_B)).st_ino == first
        assert os.stat(board._name(KEY_A)).st_ino == second and board.read(KEY_A).key == KEY_A
        board.release(KEY_A)
        board.release(KEY_B)
