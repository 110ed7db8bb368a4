"""gc and fsck against the floor (issue 54): the time to read every pack once (cold and warm cache), to
BLAKE3-hash every pack's bytes, and to decode and hash every object (what fsck must do to verify content),
printed next to `claw gc --dry-run` and `claw fsck` over the same store (wall, CPU, peak RSS).

    python bench/gc_fsck_bench.py --store /path/to/a/copy/of/a/store [--runs 3]
    python bench/gc_fsck_bench.py --cases 2000 --models 5     # builds that campaign against the stand-in
    python bench/gc_fsck_bench.py --cases 2000 --models 5 --drop-model   # and times a real gc deleting a model's runs

gc runs with --dry-run. The edges cache (edges/, docs/gc-and-archives.md) is written by the build that seals each pack;
gc writes it for a pack that has none (a store built before writers wrote it), fsck marks it verified with each
record's facts: the first run of each differs from later ones, so the runs are printed in order. Point --store at a
copy, never a shared store.
The cold read drops each pack from the page cache first (posix_fadvise DONTNEED: clean pages only).
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import blake3
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import generate  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402
from bench.growth_bench import CAMPAIGN, Measured, measure  # noqa: E402
from clawstore.store.core import codec  # noqa: E402
from clawstore.store.core.packfile import KIND_OBJECT, scan_pack  # noqa: E402
from clawstore.testing.standin import StandIn  # noqa: E402

READ = 8 << 20
DECODE_BATCH = 64 << 20  # content bytes decoded per batch call in the floor (fsck's own bound is the same order)


def packs_of(store: Path) -> list[Path]:
    return sorted((store / "packs").glob("*.pack"))


class Clock:
    """Wall and CPU seconds (this process, all its threads) of a `with` block: on a loaded machine the CPU is
    the figure to compare, and each command's CPU is read the same way (by wait4)."""

    def __enter__(self) -> Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu

    def __str__(self) -> str:
        return f"{self.wall:.2f} s ({self.cpu:.2f} s CPU)"


def read_all(packs: list[Path], cold: bool) -> None:
    for path in packs:
        fd = os.open(path, os.O_RDONLY)
        try:
            if cold:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while os.read(fd, READ):
                pass
        finally:
            os.close(fd)


def hash_packs(packs: list[Path]) -> None:
    """BLAKE3 of every pack's bytes, blake3's own threads (the disk-speed bound on hashing)."""
    for path in packs:
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            hasher.update(mapped)
        hasher.digest()


def verify_objects(packs: list[Path]) -> tuple[int, int]:
    """Decode every object (zstd's batch API) and hash its content (one blake3 call each): the least fsck
    can do to verify content from Python. Returns (objects, content bytes)."""
    count = content = 0
    for path in packs:
        blobs = [blob for blob in scan_pack(path).blobs if blob.kind == KIND_OBJECT]
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            batch: list[tuple[bytes, int, int]] = []
            held = 0
            for blob in [*blobs, None]:
                size = codec.batch_size(mapped[blob.offset:blob.offset + codec.MAX_HEADER]) if blob else 0
                if blob is not None and not size:  # large (or empty): streamed
                    data = codec.decode_verified("", blob.id.hex(), str(path),
                                                 mapped[blob.offset:blob.offset + blob.length])
                    count, content = count + 1, content + len(data)
                    continue
                if batch and (blob is None or held + size > DECODE_BATCH):
                    decoded = codec.decode_frames(mapped, [(offset, length) for _, offset, length in batch], held)
                    assert decoded is not None, f"{path}: a frame does not decode"
                    for (digest, _, _), data in zip(batch, decoded, strict=True):
                        assert blake3.blake3(data).digest() == digest, f"{path}: an object does not verify"
                    count, content, batch, held = count + len(batch), content + held, [], 0
                if blob is not None:
                    batch.append((blob.id, blob.offset, blob.length))
                    held += size
    return count, content


def campaign_store(scratch: Path, cases: int, models: int, drop_model: bool = False) -> tuple[Path, Path]:
    """A built, fresh campaign of `cases` x `models` (runs judged once): (workspace, store). With `drop_model`, the
    campaign is then built again without its last model (what a user deleting a model's results does: the ref moves
    to a head without them, every node of the others reused), so a gc has that model's runs to delete."""
    root, store = scratch / "ws", scratch / "store"
    generate(root, cases, models, evaluation=True, judge_repetitions=1)
    with StandIn() as server:  # (one server throughout: its address is part of a run's key)
        server.script("judge/j", judge_reply(7))
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(store)}
        measure(root, ("build", *CAMPAIGN), env)
        if drop_model:
            suite = root / "configs" / "suites" / "bench.yaml"
            doc = yaml.safe_load(suite.read_text())
            doc["models"] = doc["models"][:-1]
            suite.write_text(yaml.safe_dump(doc, sort_keys=False))
            sent = len(server.requests)
            measure(root, ("build", *CAMPAIGN), env)
            assert len(server.requests) == sent, "the build without the last model sent requests"
    return root, store


def median(runs: list[Measured]) -> Measured:
    return Measured(statistics.median(m.wall for m in runs), statistics.median(m.cpu for m in runs),
                    max(m.max_rss for m in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="an existing store (a copy: gc runs --dry-run, fsck reads)")
    parser.add_argument("--cases", type=int, default=200, help="without --store: build a campaign this size")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (median wall, worst RSS)")
    parser.add_argument("--drop-model", action="store_true",
                        help="without --store: build the campaign again without its last model, then time a real "
                             "`claw gc --grace 0` last (it deletes that model's results)")
    args = parser.parse_args()
    if args.drop_model and (args.store or args.models < 2):
        parser.error("--drop-model builds its own campaign of two models or more (no --store)")
    with tempfile.TemporaryDirectory(prefix="claw-gcfsck-") as scratch:
        store = args.store or campaign_store(Path(scratch), args.cases, args.models, args.drop_model)[1]
        packs = packs_of(store)
        size = sum(path.stat().st_size for path in packs)
        print(f"store {store}: {len(packs)} packs, {size / 2**20:.1f} MiB; load {os.getloadavg()[0]:.1f}")
        with Clock() as cold:
            read_all(packs, cold=True)
        with Clock() as warm:
            read_all(packs, cold=False)
        with Clock() as hashed:
            hash_packs(packs)
        with Clock() as verify:
            objects, content = verify_objects(packs)
        print(f"floor: read every pack {cold} cold, {warm} warm; BLAKE3 of the packs {hashed}; decode + hash "
              f"every object {verify} ({objects} objects, {content / 2**20:.1f} MiB, "
              f"{verify.cpu / max(objects, 1) * 1e6:.1f} us CPU each)")
        env = {"CLAW_STORE": str(store)}
        for name, command in (("gc --dry-run", ("gc", "--dry-run")), ("fsck", ("fsck",))):
            runs = [measure(Path(scratch), command, env) for _ in range(args.runs)]
            found = median(runs)
            each = "; ".join(f"{m.wall:.2f} s, {m.cpu:.2f} s CPU, {m.max_rss / 2**20:.0f} MB" for m in runs)
            print(f"claw {name:13} median {found.wall:6.2f} s wall, {found.cpu:6.2f} s CPU, worst "
                  f"{found.max_rss / 2**20:5.0f} MB max RSS; CPU {found.cpu / max(verify.cpu, 1e-9):.1f}x the "
                  f"decode + hash floor's (runs in order: {each})")
        if args.drop_model:  # (last: it changes the store)
            found = measure(Path(scratch), ("gc", "--grace", "0"), env)
            print(f"claw gc --grace 0 after the last model's results were dropped: {found.wall:.2f} s wall, "
                  f"{found.cpu:.2f} s CPU, {found.max_rss / 2**20:.0f} MB max RSS")


if __name__ == "__main__":
    main()
