"""One pack's seal alone, as a build's writer does it: a sealed pack of a build (its blobs and its edges file) is
written again into a new writer under the same pack id, its edge log noted as the build noted it, then sealed (the
trailer, the fsync, the edges file: `EdgeLog.against`, the pack's BLAKE3, the file's encoding). What the seal holds
at its peak over what the writer held before it: Python's (tracemalloc), glibc's mmapped blocks and the RSS (a
sampler thread, every ~0.5 ms), and its thread CPU. The edges file made is compared with the pack's own, byte for
byte (the same pack, the same log: the same file).

Usage: python bench/seal_bench.py PACK [PACK ...] [--rounds 3] [--no-trace]
(a store's packs/<id>.pack with its edges/<id>.edges; run it with PYTHONPATH naming the tree to measure), or
`--generate N` for a pack of N random blobs each naming four earlier ones (the suite's smoke run)
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from array import array
from pathlib import Path

from clawstore.host import heap
from clawstore.store.core import edgefile
from clawstore.store.core.packfile import KIND_OBJECT, PackWriter, scan_pack

_BATCH = 256  # blobs appended at once (a group's queued objects)
_PAGE = os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


_LIBC = ctypes.CDLL(None)
_LIBC.mallinfo2.restype = _MallInfo2


def _mmapped() -> int:
    return _LIBC.mallinfo2().hblkhd


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


class _Sampler(threading.Thread):
    """The highest mmapped bytes and RSS seen while it runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.mmapped, self.rss = _mmapped(), _rss()

    def run(self) -> None:
        while not self.stop.is_set():
            self.mmapped, self.rss = max(self.mmapped, _mmapped()), max(self.rss, _rss())
            time.sleep(0.0005)


def _replay(pack: Path, root: Path) -> PackWriter:
    """A writer under `pack`'s id in `root` holding its blobs, in order, and its edge log as a build noted it."""
    scan = scan_pack(pack)
    pack_id = pack.name.removesuffix(".pack")
    data = (pack.parent.parent / edgefile.DIR / f"{pack_id}{edgefile.SUFFIX}").read_bytes()
    table = edgefile.Table(b"".join(blob.id for blob in scan.blobs), array("Q", [blob.offset for blob in scan.blobs]))
    found = edgefile.decode(pack_id, data, scan.size, table) if edgefile.recorded(data, pack_id, scan.size) else None
    if found is None:
        raise SystemExit(f"{pack}: no edges file of its own to replay")
    (root / "packs").mkdir(parents=True)
    (root / "tmp").mkdir()
    writer = PackWriter(root / "packs", pack_id, edges_root=root)
    with open(pack, "rb") as fh:
        for start in range(0, len(scan.blobs), _BATCH):
            blobs = scan.blobs[start:start + _BATCH]
            parts = [(blob.kind, blob.id, [os.pread(fh.fileno(), blob.length, blob.offset)]) for blob in blobs]
            if [written.offset for written in writer.append_many(parts)] != [blob.offset for blob in blobs]:
                raise SystemExit(f"{pack}: its blobs are not back to back")
        assert writer.edge_log is not None
        for row, blob in enumerate(scan.blobs):
            if found.covers[row]:
                writer.edge_log.add(blob.id, blob.offset, found._named(row))
    return writer


def _generated(root: Path, objects: int) -> Path:
    """A sealed pack of `objects` random 512-byte blobs, each naming four earlier ones, with its edges file."""
    (root / "packs").mkdir(parents=True)
    (root / "tmp").mkdir()
    writer = PackWriter(root / "packs", edges_root=root)
    rng = random.Random(0)
    written: list[bytes] = []
    for start in range(0, objects, _BATCH):
        group = [rng.randbytes(edgefile.ID) for _ in range(min(_BATCH, objects - start))]
        named = [[rng.choice(written) for _ in range(4)] if written else [] for _ in group]
        for blob, names in zip(writer.append_many([(KIND_OBJECT, i, [rng.randbytes(512)]) for i in group]), named,
                               strict=True):
            writer.edge_log.add(blob.id, blob.offset, names)  # type: ignore[union-attr]
        written += group
    writer.seal()
    writer.close()
    return root / "packs" / f"{writer.pack_id}.pack"


def measure(pack: Path, trace: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="seal-", dir=os.environ.get("SEAL_TMP")) as scratch:
        root = Path(scratch) / "store"
        if trace:
            tracemalloc.start()  # (before the writer's log and table are made: what the seal frees of them counts)
        writer = _replay(pack, root)
        gc.collect()
        sampler = _Sampler()
        mmapped0, rss0 = sampler.mmapped, sampler.rss
        tracemalloc.reset_peak()
        held = tracemalloc.get_traced_memory()[0]
        sampler.start()
        cpu = time.thread_time()
        writer.seal()
        cpu = time.thread_time() - cpu
        peak = tracemalloc.get_traced_memory()[1] - held if trace else 0
        sampler.stop.set()
        sampler.join()
        if trace:
            tracemalloc.stop()
        writer.close()
        made = (root / edgefile.DIR / f"{writer.pack_id}{edgefile.SUFFIX}").read_bytes()
        own = (pack.parent.parent / edgefile.DIR / f"{writer.pack_id}{edgefile.SUFFIX}").read_bytes()
        if made != own:
            raise SystemExit(f"{pack}: the edges file made differs from the pack's own")
    return {"peak_mb": peak / 1e6, "mmapped_mb": (sampler.mmapped - mmapped0) / 1e6,
            "rss_mb": (sampler.rss - rss0) / 1e6, "cpu_ms": cpu * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packs", nargs="*", type=Path)
    parser.add_argument("--generate", type=int, default=0, help="measure a generated pack of this many blobs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-trace", action="store_true", help="no tracemalloc (its CPU off the seal's)")
    args = parser.parse_args()
    sys.setswitchinterval(0.0005)  # (the sampler's turns while the seal runs Python)
    heap.settle()  # as a build does: blocks of 128 KiB or more mapped on their own, so mmapped is what they hold
    if not args.packs and not args.generate:
        parser.error("name a pack or --generate N")
    made = tempfile.TemporaryDirectory(prefix="seal-made-", dir=os.environ.get("SEAL_TMP"))
    packs = [*args.packs, *([_generated(Path(made.name) / "store", args.generate)] if args.generate else [])]
    for pack in packs:
        rows = [measure(pack, not args.no_trace) for _ in range(args.rounds)]
        medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(f"{pack.name[:8]} ({pack.stat().st_size / 2**20:.1f} MiB): seal's peak over the writer's "
              f"{medians['peak_mb']:.1f} MB (tracemalloc), mmapped +{medians['mmapped_mb']:.1f} MB, "
              f"RSS +{medians['rss_mb']:.1f} MB, CPU {medians['cpu_ms']:.0f} ms (medians of {args.rounds}); "
              f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
