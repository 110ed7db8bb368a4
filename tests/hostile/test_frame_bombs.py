"""An archive, or a pulled pack, whose one frame is a decompression bomb: a few hundred KB of zstd blocks that decode
to gigabytes.

Memory stays bounded whatever a frame decodes to (session 74: tests/gc/test_archive_read_memory.py), but before
session 75 the CPU did not: `claw archive verify` and `import`, and `claw pull`, decoded and hashed every byte of it
(0.6 s a GiB) before finding that the content did not match its name: 512 KiB held an import 6 s, a pull 45 s. Now the
content an archive's or a pack's frames may decode to is bounded by their own size (codec.CONTENT_RATIO times their
bytes, at least CONTENT_FLOOR): a frame that declares more is refused before any of it is decoded, and one that
declares no size is stopped as soon as its output passes what is left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.actions import set_entries
from clawstore.store.core import codec
from clawstore.store.core.codec import CONTENT_FLOOR, CONTENT_RATIO
from clawstore.store.core.ids import PREFIX
from clawstore.store.services.archive import write_archive
from clawstore.store.services.archive_import import import_archive
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, env  # noqa: F401 (fixture)
from tests.support.workspace import standard

BLOCK = 1 << 17  # zstd's largest block
GIB = 1 << 30


def bomb_frame(content: int, declare: bool) -> bytes:
    """A zstd frame of RLE blocks (4 bytes each, 128 KiB of zeros each) decoding to `content` bytes; its header declares
    that size, or none."""
    head = b"\x28\xb5\x2f\xfd" + (bytes([0xC0, 0x38]) + content.to_bytes(8, "little") if declare
                                  else bytes([0x00, 0x38]))
    blocks = content // BLOCK
    rle = [((BLOCK << 3) | (1 << 1) | int(at == blocks - 1)).to_bytes(3, "little") + b"\0" for at in range(blocks)]
    return head + b"".join(rle)


def hostile_archive(root: Path, bomb: bytes) -> tuple[Path, str]:
    """An archive claw wrote from a store of real objects, one of whose frames is `bomb` (under a name of its own, as a
    hostile store would hold it): (the archive, the bomb's object id)."""
    store = Store(root / "origin")
    ids = [store.put_json({"record": n, "status": "success"}) for n in range(20)]
    ids.append(store.put_bytes(os.urandom(1 << 16)))
    digest = bytes.fromhex("ab" * 32)
    store.put_frame(digest, bomb)
    bomb_id = PREFIX + digest.hex()
    archive = root / "hostile.claw"
    write_archive(store, archive, {"head": ids[0]}, [*ids, bomb_id])
    return archive, bomb_id


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "sizeless"])
def test_an_archive_holding_a_decompression_bomb_is_refused_at_once(tmp_path: Path, declare: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not declare:  # (decoded up to the floor before it is stopped: a smaller floor keeps the test quick under load)
        monkeypatch.setattr(codec, "CONTENT_FLOOR", 64 << 20)
    bomb = bomb_frame(16 * GIB, declare)  # 512 KiB that decode to 16 GiB: ~10 s of CPU before
    assert len(bomb) < 600 << 10
    archive, bomb_id = hostile_archive(tmp_path, bomb)
    assert 16 * GIB > max(CONTENT_FLOOR, CONTENT_RATIO * archive.stat().st_size)  # (over any bound the archive allows)
    claw = Claw(tmp_path)
    for args in (["archive", "verify", str(archive)],
                 ["archive", "import", str(archive), "--store", str(tmp_path / "target")]):
        started = time.process_time()  # (CPU, which a loaded machine does not stretch: CI's first run at load 12 took
        code, out, err = claw(*args)  # 2.9 s of wall for what takes 0.3 s alone; decoding the bomb took ~6 s of CPU)
        took = time.process_time() - started
        assert took < 2.0, f"{args[1]} took {took:.1f} s of CPU"
        assert code == 2, out + err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert bomb_id[len(PREFIX):len(PREFIX) + 16] in err and "more than" in err, err
    target = tmp_path / "target"
    if target.exists() and any(target.iterdir()):  # (an import into a new store leaves none)
        left = Store(target, create=False)
        assert list(left.iter_objects()) == [] and os.listdir(left.tmp_dir) == []


def test_an_archive_of_legitimately_repetitive_content_is_still_read(tmp_path: Path) -> None:
    """The bound is on the whole archive, never below CONTENT_FLOOR: a claw store's own frames of very repetitive
    content (zeros: zstd's best ratio, ~32,000:1) under it verify and import as before."""
    store = Store(tmp_path / "origin")
    ids = [store.put_bytes(bytes(64 << 20)), store.put_bytes(b"x" * (8 << 20)), store.put_bytes(bytes(300 << 20))]
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {}, ids)
    assert (372 << 20) > CONTENT_RATIO * archive.stat().st_size  # (only the floor lets it through)
    code, out, err = Claw(tmp_path)("archive", "verify", str(archive))
    assert code == 0, out + err
    target = Store(tmp_path / "target")
    assert import_archive(target, archive).new_objects == 3
    assert target.get_bytes(ids[1]) == b"x" * (8 << 20)


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "sizeless"])
def test_a_pull_of_a_pack_holding_a_decompression_bomb_is_refused_at_once(
        tmp_path: Path, env: dict[str, str], standin: StandIn, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        declare: bool) -> None:
    """Bob's store holds the bomb as the record of an action-cache entry, so his push sends it in a pack; Alice's
    `pull --untrusted` checks every frame of what it receives (45 s of CPU before)."""
    if not declare:
        monkeypatch.setattr(codec, "CONTENT_FLOOR", 64 << 20)
    bob = standard(tmp_path / "bob")
    monkeypatch.chdir(bob.root)
    monkeypatch.setenv("CLAW_STORE", str(bob.root / "store"))
    assert Claw(bob.root).build()[0] == 0
    store = Store(bob.root / "store", create=False)
    digest = bytes.fromhex("ab" * 32)
    with store.batch():
        store.put_frame(digest, bomb_frame(16 * GIB, declare))
        key = store.put_json({"input": "bomb"})
        set_entries(store, {bytes.fromhex(key[len(PREFIX):]): (digest, 1)})
    remote = tmp_path / "share"
    code, out, err = Claw(bob.root)("push", str(remote))
    assert code == 0, out + err

    alice = standard(tmp_path / "alice")
    monkeypatch.chdir(alice.root)
    monkeypatch.setenv("CLAW_STORE", str(alice.root / "store"))
    started = time.process_time()  # (CPU, as above: the pull's threads are this process's; decoding took ~45 s)
    code, out, err = Claw(alice.root)("pull", "--untrusted", str(remote))
    took = time.process_time() - started
    assert took < 2.0, f"the pull took {took:.1f} s of CPU"
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, out + err
    assert "abababababababab" in err and "more than" in err, err
    assert not (alice.root / "store").exists() or Store(alice.root / "store", create=False).list_refs() == {}
