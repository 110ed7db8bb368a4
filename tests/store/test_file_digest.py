"""ids.file_digest: a file's BLAKE3 whatever its size against FILE_CHUNK, read into one buffer (a fresh chunk a read
cost as much CPU as the hash: docs/scale/gc-and-fsck.md, session 55)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import blake3
import pytest

from clawstore.store.core import ids
from tests.support.fresh import measured_in_fresh_process


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 2560])
def test_a_file_hashes_to_the_blake3_of_its_bytes_at_any_size_against_the_chunk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    monkeypatch.setattr(ids, "FILE_CHUNK", 1024)
    data = bytes((i * 7 + 3) % 256 for i in range(size))
    path = tmp_path / "file"
    path.write_bytes(data)
    assert ids.file_digest(path) == blake3.blake3(data).hexdigest()


CHUNK = 1 << 20


def digest_peak_alone(path: str) -> tuple[str, int]:
    """(the file's digest, the peak bytes traced while hashing it) with FILE_CHUNK at CHUNK. Called in a new interpreter
    (measured_in_fresh_process): the bound leaves a quarter of a chunk, which a test worker's leftovers (their threads,
    their garbage's finalizers) would eat."""
    ids.FILE_CHUNK = CHUNK
    tracemalloc.start()
    try:
        digest = ids.file_digest(Path(path))
        return digest, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_hashing_a_file_holds_one_chunk_not_one_a_read(tmp_path: Path) -> None:
    chunk = CHUNK
    path = tmp_path / "file"
    path.write_bytes(b"\x5a" * (4 * chunk + 17))
    digest, peak = measured_in_fresh_process(digest_peak_alone, path)
    assert digest == blake3.blake3(path.read_bytes()).hexdigest()
    assert chunk <= peak < chunk + chunk // 4  # (a chunk a read: the last still held while the next is made, 2 chunks)
