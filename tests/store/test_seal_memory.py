"""A pack's seal (PackWriter.seal: the trailer, the edges file, the pack's BLAKE3) lets go of the writer's edge log and
table as it reads them, and hashes the pack a small buffer at a time: a build's seal held the log, the table, the
edges file's dicts and an 8 MiB hash buffer at once, +24-28 MB landing while a window concluded (docs/scale/building.md,
Session 56: the seal)."""

from __future__ import annotations

import gc
import random
import tracemalloc
from pathlib import Path

from clawstore.store.core import ids
from clawstore.store.core.edgefile import ID
from clawstore.store.core.packfile import KIND_OBJECT, PackWriter
from clawstore.store.edges import load
from tests.support.fresh import measured_in_fresh_process


def _writer(root: Path) -> PackWriter:
    (root / "packs").mkdir(parents=True)
    (root / "tmp").mkdir()
    return PackWriter(root / "packs", edges_root=root)


def _fill(writer: PackWriter, objects: int, size: int, seed: int) -> dict[bytes, list[bytes]]:
    """`objects` blobs of `size` bytes appended as a build's groups append them, each naming four earlier objects of
    the pack and one in twenty an id stored elsewhere too (a mid-build pack's shape: 3-6 % of the ids it names
    are others')."""
    rng = random.Random(seed)
    written: list[bytes] = []
    named: dict[bytes, list[bytes]] = {}
    for start in range(0, objects, 256):
        group = [rng.randbytes(ID) for _ in range(min(256, objects - start))]
        children = [[rng.choice(written) for _ in range(4)] + ([rng.randbytes(ID)] if rng.random() < 0.05 else [])
                    if written else [rng.randbytes(ID)] for _ in group]
        blobs = writer.append_many([(KIND_OBJECT, digest, [rng.randbytes(size)]) for digest in group])
        for blob, names in zip(blobs, children, strict=True):
            writer.edge_log.add(blob.id, blob.offset, names)  # type: ignore[union-attr]
            named[blob.id] = names
        written += group
    return named


def _seal_traced(writer: PackWriter) -> tuple[int, int]:
    """What the writer held before its seal (its log and table), and the seal's peak over what was held before it."""
    log = writer.edge_log
    assert log is not None
    held = len(log.ids) + len(log.edges) + log.offsets.itemsize * len(log.offsets) + 4 * len(log.starts) \
        + len(writer.table)
    gc.collect()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    writer.seal()
    return held, tracemalloc.get_traced_memory()[1] - before


def lets_go_alone(root: str) -> tuple[int, int, int]:
    """(what the writer held, the seal's peak over what was held before it, ids its edges file covers) of a pack of
    40,000 small blobs each naming another. Called in a new interpreter (measured_in_fresh_process), as the next: in a
    test worker, what earlier tests left (their threads, their garbage's finalizers) would be counted too."""
    ids.FILE_CHUNK = 64 << 10  # (the hash's buffer: the next test)
    store = Path(root)
    tracemalloc.start()  # (before the log and the table are made: what the seal frees of them counts)
    try:
        writer = _writer(store)
        named = _fill(writer, 40_000, 16, 1)
        held, peak = _seal_traced(writer)
    finally:
        tracemalloc.stop()
    writer.close()
    found = load(store, store / "packs", writer.pack_id)
    assert found is not None and len(found.covered()) == len(named)
    assert all(found.children(digest, offset) == named[digest] for digest, offset in found.covered())
    return held, peak, len(named)


def test_a_seal_lets_go_of_the_log_and_the_table_as_it_reads_them(tmp_path: Path) -> None:
    held, peak, named = measured_in_fresh_process(lets_go_alone, tmp_path / "store")
    assert named == 40_000
    # Before, the log and the table stayed beside the file's dicts: 1.18x what they held (10.5 MB over 8.9 MB); now
    # 0.55x (4.9 MB: the rows' dict and keys, the table's columns, the file's arrays).
    assert peak < held * 0.7, f"the seal's peak {peak / 1e6:.1f} MB over the writer's {held / 1e6:.1f} MB"


def hash_peak_alone(root: str) -> int:
    """The seal's peak of a pack of 6 MiB of blobs naming few ids (FILE_CHUNK as shipped), in a new interpreter."""
    store = Path(root)
    tracemalloc.start()
    try:
        writer = _writer(store)
        _fill(writer, 192, 32 << 10, 2)  # 6 MiB of blobs, few ids: the hash's buffer is most of what the seal holds
        _, peak = _seal_traced(writer)
    finally:
        tracemalloc.stop()
    writer.close()
    assert load(store, store / "packs", writer.pack_id) is not None  # (its file records the pack's BLAKE3)
    return peak


def test_a_seal_hashes_its_pack_a_small_buffer_at_a_time(tmp_path: Path) -> None:
    peak = measured_in_fresh_process(hash_peak_alone, tmp_path / "store")
    assert peak < (1 << 20) + (256 << 10), f"the seal's peak {peak / 2**20:.2f} MiB (an 8 MiB buffer on main)"
