"""A received pack's small frames checked in batches of bounded content (transfer._verify_small), a lying table
refused."""

from __future__ import annotations

import mmap
from pathlib import Path

import blake3
import pytest

from clawstore.store.core import codec
from clawstore.store.core.packfile import KIND_OBJECT, PackCheckError, PackWriter
from clawstore.store.services import transfer


def test_small_frames_are_checked_in_batches_bounded_by_their_content(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch ends with the frame whose content reaches _BATCH_BYTES (decoded memory stays bounded whatever the pack
    holds); every frame is checked, the big ones streamed; a swapped one is named."""
    monkeypatch.setattr(transfer, "_BATCH_BYTES", 10_000)
    contents = [bytes([i]) * (1000 + 700 * (i % 5)) for i in range(40)] + [b"w" * (2 << 20)]
    writer = PackWriter(tmp_path)
    blobs = writer.append_many([(KIND_OBJECT, blake3.blake3(content).digest(), codec.encode(content, 3))
                                for content in contents])
    writer.seal()
    writer.close()
    held: list[int] = []
    real = codec.decode_frames
    monkeypatch.setattr(codec, "decode_frames", lambda buffer, spans, size: held.append(size) or real(buffer, spans,
                                                                                                       size))
    with open(writer.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        picks = transfer._Picks(frozenset(), None, {})
        large = transfer._verify_small(mapped, view, blobs, "pack", picks)
        view.release()
    assert [blob.id for blob in large] == [blobs[-1].id]
    sizes = [len(content) for content in contents[:-1]]
    expected, total = [], 0
    for size in sizes:  # (the rule, one frame at a time)
        total += size
        if total >= 10_000:
            expected.append(total)
            total = 0
    assert held == expected + ([total] if total else [])
    assert sum(held) == sum(sizes)

    data = bytearray(writer.path.read_bytes())  # (two frames of the same length swapped: the table lies about both)
    first, second = blobs[7], blobs[12]
    assert first.length == second.length
    data[first.offset:first.offset + first.length], data[second.offset:second.offset + second.length] = (
        data[second.offset:second.offset + second.length], data[first.offset:first.offset + first.length])
    writer.path.write_bytes(bytes(data))
    with pytest.raises(PackCheckError, match=first.id.hex()):
        transfer.verify_pack(writer.path, blake3.blake3(bytes(data)).hexdigest(), "pack")
