"""Store benchmark: put/get throughput against raw blake3+zstd, small-put rate against fsync cost, fsck time.

    python bench/store_bench.py [--big-mib 256] [--small-count 10000] [--dir /path/on/the/store/fs]

Raw figures do the same work in memory (hash + zstd at the store's level, or zstd decode + hash) with
no files, no temp file, no fsync: the store's figures are judged against them (target >= 0.7x).
Small puts are judged against the batched-fsync limit measured in the same run: the same hash +
compress + append to one file with one fsync per 256 objects, no index, no Python store code
(target: the store in group commit, one batch per object as a build does per node, >= 0.5x).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import mmap
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import blake3
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.host.durable import fsync_path  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.core.codec import CHUNK  # noqa: E402

LEVEL = 3
MIB = 1 << 20


def json_like(size: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    words = ["assistant", "tool_call", "content", "tokens", "latency", "model", "case", "message",
             "exec_shell", "read_file", "final_output", "sequence"]
    parts, total, i = [], 0, 0
    while total < size:
        line = (
            f'{{"sequence":{i},"event_type":"{rnd.choice(words)}","value":{rnd.random()!r},'
            f'"text":"{" ".join(rnd.choice(words) for _ in range(rnd.randint(2, 24)))}",'
            f'"id":"{rnd.getrandbits(64):016x}","tokens":{rnd.randint(0, 5000)}}}\n'
        )
        parts.append(line)
        total += len(line)
        i += 1
    return "".join(parts).encode()[:size]


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / MIB:8.1f} MiB/s"


_CCTX = zstandard.ZstdCompressor(level=LEVEL)  # reused contexts: the raw figures pay no setup
_DCTX = zstandard.ZstdDecompressor()


def raw_put(data: memoryview | bytes) -> None:
    """The reference: hash + compress the same bytes (one shot, or 1 MiB steps above 8 MiB)."""
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    if len(data) <= 8 * MIB:
        hasher.update(data)
        _CCTX.compress(data)
    else:
        cobj = _CCTX.compressobj(size=len(data))
        view = memoryview(data)
        for start in range(0, len(view), CHUNK):
            chunk = view[start:start + CHUNK]
            hasher.update(chunk)
            cobj.compress(chunk)
        cobj.flush()
    hasher.hexdigest()


def raw_get(frame: bytes) -> None:
    """The reference: decode + hash (one shot for small frames, streamed for big ones)."""
    hasher = blake3.blake3()
    if len(frame) <= 8 * MIB:
        hasher.update(_DCTX.decompress(frame))
    else:
        with _DCTX.stream_reader(io.BytesIO(frame)) as reader:
            while chunk := reader.read(CHUNK):
                hasher.update(chunk)
    hasher.hexdigest()


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    """Run the store's own code with fsync switched off: what is left is CPU + page-cache writes."""
    real_fsync = os.fsync
    os.fsync = lambda fd: None  # type: ignore[assignment]
    try:
        yield
    finally:
        os.fsync = real_fsync


def fsync_probe(directory: Path, payload: bytes) -> float:
    """What one durable put waits for, measured alone: fsync of a new file, then of its directory."""
    name = directory / f"probe-{time.perf_counter_ns()}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, payload)
    spent = timed(lambda: os.fsync(fd))
    os.close(fd)
    os.rename(name, str(name) + ".done")
    spent += timed(lambda: fsync_path(directory))
    os.unlink(str(name) + ".done")
    return spent


def _one_mib_round(store: Store, probe_dir: Path, blobs: list[bytes], frames: list[bytes],
                   tag: bytes) -> dict[str, float]:
    """One pass of every 1 MiB measurement; raw and store interleaved object by object."""
    times = dict.fromkeys(("raw_put", "put", "fsync", "nosync", "raw_get", "get", "raw_batch", "batch",
                           "raw_rnd", "rnd"), 0.0)
    ids: list[str] = []
    fresh = [tag + blob for blob in blobs]  # new bytes each round: every put really writes
    for i, blob in enumerate(fresh):
        times["raw_put"] += timed(lambda b=blob: raw_put(b))
        times["put"] += timed(lambda b=blob: ids.append(store.put_bytes(b)))
        times["fsync"] += fsync_probe(probe_dir, frames[i])
        with no_fsync():
            times["nosync"] += timed(lambda b=blob: store.put_bytes(b"nosync" + b))
    for frame, oid in zip(frames, ids, strict=True):
        times["raw_get"] += timed(lambda f=frame: raw_get(f))
        times["get"] += timed(lambda o=oid: store.get_bytes(o))
    batch_blobs = [b"batch" + blob for blob in fresh]
    times["raw_batch"] = sum(timed(lambda b=b: raw_put(b)) for b in batch_blobs)

    def batched() -> None:
        with store.batch():
            for blob in batch_blobs:
                store.put_bytes(blob)

    times["batch"] = timed(batched)
    for _ in blobs:
        blob = os.urandom(MIB)
        times["raw_rnd"] += timed(lambda b=blob: raw_put(b))
        with no_fsync():
            times["rnd"] += timed(lambda b=blob: store.put_bytes(b))
    return times


def bench_1mib(work: Path, count: int, rounds: int) -> None:
    """Best of `rounds` for each figure: the host is shared, the best round is the least disturbed."""
    store = Store(work / "s1")
    probe_dir = work / "probe1"
    probe_dir.mkdir()
    blobs = [json_like(MIB, seed=i) for i in range(count)]
    total = MIB * count
    frames = [_CCTX.compress(b) for b in blobs]
    results = [_one_mib_round(store, probe_dir, blobs, frames, b"%d" % r) for r in range(rounds)]
    best = {name: min(result[name] for result in results) for name in results[0]}
    raw = f"raw blake3+zstd-{LEVEL} {rate(total, best['raw_put'])}"
    print(f"1 MiB JSON-like objects x{count}, best of {rounds} rounds (ratio "
          f"{total / sum(len(f) for f in frames):.2f})")
    print(f"  put, durable each    {rate(total, best['put'])}   {raw}   = {best['raw_put'] / best['put']:.2f}x"
          f"   ({best['put'] / count * 1e3:.1f} ms/put; file+dir fsync alone {best['fsync'] / count * 1e3:.1f} ms)")
    print(f"  put, fsync disabled  {rate(total, best['nosync'])}   {raw}   = "
          f"{best['raw_put'] / best['nosync']:.2f}x   (the store's own overhead)")
    print(f"  put inside batch()   {rate(total, best['batch'])}   raw blake3+zstd-{LEVEL} "
          f"{rate(total, best['raw_batch'])}   = {best['raw_batch'] / best['batch']:.2f}x")
    print(f"  get (verified)       {rate(total, best['get'])}   raw unzstd+blake3   "
          f"{rate(total, best['raw_get'])}   = {best['raw_get'] / best['get']:.2f}x")
    print(f"  incompressible put, fsync disabled {rate(total, best['rnd'])}   raw blake3+zstd-{LEVEL}"
          f" {rate(total, best['raw_rnd'])}   = {best['raw_rnd'] / best['rnd']:.2f}x (stored as raw blocks)")


def _status(key: str) -> int:
    """A /proc/self/status memory figure in bytes (this process only, unlike ru_maxrss after exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def big_worker(store_dir: Path, path: Path) -> None:
    """Child process of bench_big: measures the peak memory of the streaming put+get alone."""
    store = Store(store_dir)
    base = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    oid = ""

    def put() -> None:
        nonlocal oid
        oid = store.put_file(path)

    def get() -> None:
        with store.open_object(oid) as reader:
            while reader.read(CHUNK):
                pass

    put_s, get_s = timed(put), timed(get)
    growth = _status("VmHWM") - base
    print(json.dumps({"oid": oid, "put_s": put_s, "get_s": get_s, "rss_growth": growth,
                      "rss_base": base}))


def bench_big(work: Path, mib: int) -> None:
    path = work / "big.jsonl"
    block = json_like(8 * MIB, seed=99)
    with open(path, "wb") as out:  # varied 8 MiB blocks: beyond zstd's window, so no free repeats
        for i in range(mib // 8):
            out.write(b"%08d" % i + block[8:])
    size = path.stat().st_size
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        raw_put_s = timed(lambda: raw_put(mapped))
    child = subprocess.run([sys.executable, __file__, "--big-worker", str(work / "s2"), str(path)],
                           capture_output=True, text=True, check=True)
    result = json.loads(child.stdout)
    store = Store(work / "s2")
    frame = store.read_frame(result["oid"])
    raw_get_s = timed(lambda: raw_get(frame))
    logical, stored = store.object_sizes(result["oid"])
    put_s, get_s = result["put_s"], result["get_s"]
    print(f"{mib} MiB JSON-like file (streamed; ratio {logical / stored:.2f})")
    print(f"  put_file, durable    {rate(size, put_s)}   raw blake3+zstd-{LEVEL} {rate(size, raw_put_s)}"
          f"   = {raw_put_s / put_s:.2f}x")
    print(f"  open_object stream   {rate(size, get_s)}   raw unzstd+blake3   {rate(size, raw_get_s)}"
          f"   = {raw_get_s / get_s:.2f}x")
    print(f"  peak RSS of the put+get process: {(result['rss_base'] + result['rss_growth']) / MIB:.1f} MiB,"
          f" {result['rss_growth'] / MIB:.1f} MiB above its state before the put (limit: 64 MiB)")
    path.unlink()


def batched_fsync_limit(directory: Path, blobs: list[bytes], window: int = 256) -> float:
    """Puts/s of the bare minimum a durable small put needs when fsyncs are batched: hash, compress,
    append to one file, one fsync per `window` objects (no index, no store code)."""
    path = directory / "append-only"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.perf_counter()
    try:
        for i, blob in enumerate(blobs, 1):
            blake3.blake3(blob).digest()
            os.write(fd, _CCTX.compress(blob))
            if i % window == 0:
                os.fsync(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    path.unlink()
    return len(blobs) / elapsed


def bench_small(work: Path, count: int) -> Store:
    """Small puts: one by one (durable each), in group commit (one batch each, as a build's nodes),
    against the fsync cost and the batched-fsync limit, both probed in the same run (the disk is shared)."""
    store = Store(work / "s3")
    probe_dir = work / "probe3"
    probe_dir.mkdir()
    blobs = [json_like(2048, seed=100_000 + i) for i in range(count)]
    tenth = max(count // 10, 1)
    put_s = fsync_s = 0.0
    probes = 0
    for start in range(0, tenth, 100):
        put_s += timed(lambda s=start: [store.put_bytes(b) for b in blobs[s:min(s + 100, tenth)]])
        for _ in range(10):
            fsync_s += fsync_probe(probe_dir, blobs[0])
            probes += 1
    per_fsync_pair = fsync_s / probes
    grouped = blobs[tenth:]
    limit = batched_fsync_limit(probe_dir, [b"ref" + blob for blob in grouped])

    def group() -> None:
        with store.group_commit(max_batches=256):
            for blob in grouped:
                with store.batch():
                    store.put_bytes(blob)

    group_s = timed(group)
    group_rate = len(grouped) / group_s
    print(f"{count} objects of 2 KiB ({tenth} put one by one, the rest in group commit, one batch each)")
    print(f"  fsync alone (file + directory, probed between puts): {per_fsync_pair * 1e6:.0f} us"
          f" -> at most {1 / per_fsync_pair:,.0f} durable puts/s one by one")
    print(f"  put, durable each    {tenth / put_s:10,.0f} puts/s   ({put_s / tenth * 1e6:.0f} us/put)")
    print(f"  put in group commit  {group_rate:10,.0f} puts/s   batched-fsync limit (hash+zstd+append, one "
          f"fsync per 256) {limit:,.0f} puts/s   = {group_rate / limit:.2f}x (target >= 0.5x)")
    return store


def bench_fsck(store: Store) -> None:
    count = sum(1 for _ in store.iter_objects())
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "clawstore.cli",
         "fsck", "--store", str(store.root)],
        capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    elapsed = time.perf_counter() - start
    print(f"claw fsck over {count} objects: {elapsed:.2f} s wall incl. process start (exit {proc.returncode});"
          f" {proc.stdout.strip().splitlines()[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=10_000)
    parser.add_argument("--one-mib-count", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="1 MiB section: best of this many rounds")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--big-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.big_worker:
        big_worker(*args.big_worker)
        return
    work = Path(tempfile.mkdtemp(prefix="store_bench_", dir=args.dir))
    try:
        print(f"work dir {work}; zstd level {LEVEL}; {os.cpu_count()} CPUs")
        bench_1mib(work, args.one_mib_count, args.rounds)
        bench_big(work, args.big_mib)
        bench_fsck(bench_small(work, args.small_count))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
