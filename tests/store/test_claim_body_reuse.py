"""A claim's file written a moment ago is linked as it is for the next claim (no write a node in a busy build), and a
body shorter than the file is padded, never truncated: one system call at most before the link."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store import claims as claims_module
from clawstore.store.claims import REUSE_BODY_TTL_SHARE, ClaimBoard

KEYS = ["blake3:" + f"{i:064x}" for i in range(20)]


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    pwrite, ftruncate = os.pwrite, os.ftruncate

    def counted_pwrite(fd: int, data: bytes, offset: int) -> int:
        calls.append("pwrite")
        return pwrite(fd, data, offset)

    def counted_ftruncate(fd: int, length: int) -> None:
        calls.append("ftruncate")
        ftruncate(fd, length)

    monkeypatch.setattr(claims_module.os, "pwrite", counted_pwrite)
    monkeypatch.setattr(claims_module.os, "ftruncate", counted_ftruncate)
    return calls


def test_claims_taken_one_after_another_write_their_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    calls = _count_writes(monkeypatch)
    with ClaimBoard(store.root, owner="b1", ttl_s=30) as board:
        for key in KEYS:
            assert board.take(key)
            claim = board.read(key)
            assert claim is not None and claim.owner == "b1" and claim.live(time.time(), board.host)
            # The claim counts from when its body was written (the heartbeat renews it from then)...
            assert board._held[key] == claim.acquired_at
            # ...and lives at least all but the reuse share of a ttl from now.
            assert claim.expires_at >= time.time() + 30 * (1 - REUSE_BODY_TTL_SHARE)
            board.release(key)
        assert calls == ["pwrite"], "twenty claims in a row: one file, written once"
        # Once its body is older than the share, the next claim writes its own.
        board._spares[0].written -= 30 * REUSE_BODY_TTL_SHARE
        before = time.time()
        assert board.take(KEYS[0])
        assert calls == ["pwrite", "pwrite"]
        assert board.read(KEYS[0]).acquired_at >= before and board._held[KEYS[0]] >= before


def test_a_shorter_body_is_padded_to_the_file_and_reads_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with ClaimBoard(store.root, owner="b1", ttl_s=30) as board:
        assert board.take(KEYS[0])
        board.release(KEYS[0])
        spare = board._spares[0]
        os.pwrite(spare.fd, b"x" * 300, 0)  # an earlier, longer body (the text of a float grows and shrinks)
        spare.size, spare.written = 300, float("-inf")
        assert board.take(KEYS[1])
        raw = Path(board._name(KEYS[1])).read_bytes()
        assert len(raw) == 300 and raw.rstrip(b" ") == raw.strip()
        assert json.loads(raw)["owner"] == "b1" and board.read(KEYS[1]).owner == "b1"
        board.release(KEYS[1])
