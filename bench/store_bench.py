"""Store benchmark: put/get throughput against raw blake3+zstd, small-put rate against fsync cost, fsck time.

    python bench/store_bench.py [--big-mib 256] [--small-count 10000] [--dir /path/on/the/store/fs]

Raw figures do the same work in memory (hash + zstd at the store's level, or zstd decode + hash) with
no files, no temp file, no fsync: the store's figures are judged against them (target >= 0.7x).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import blake3
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.store import Store  # noqa: E402
from clawstore.store.codec import CHUNK  # noqa: E402

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


def bench_1mib(store: Store, count: int) -> None:
    """Raw and store timings interleaved object by object, so load from other users hits both alike."""
    blobs = [json_like(MIB, seed=i) for i in range(count)]
    total = MIB * count
    frames = [_CCTX.compress(b) for b in blobs]
    ids: list[str] = []
    raw_put_s = put_s = raw_get_s = get_s = 0.0
    for blob in blobs:
        raw_put_s += timed(lambda b=blob: raw_put(b))
        put_s += timed(lambda b=blob: ids.append(store.put_bytes(b)))
    for frame, oid in zip(frames, ids, strict=True):
        raw_get_s += timed(lambda f=frame: raw_get(f))
        get_s += timed(lambda o=oid: store.get_bytes(o))
    batch_blobs = [b"%d" % i + blob for i, blob in enumerate(blobs)]
    raw_batch_s = sum(timed(lambda b=b: raw_put(b)) for b in batch_blobs)

    def batched() -> None:
        with store.batch():
            for blob in batch_blobs:
                store.put_bytes(blob)

    batch_s = timed(batched)
    print(f"1 MiB JSON-like objects x{count} (ratio {total / sum(len(f) for f in frames):.2f})")
    print(f"  put (durable each)   {rate(total, put_s)}   raw blake3+zstd-{LEVEL} {rate(total, raw_put_s)}"
          f"   = {raw_put_s / put_s:.2f}x")
    print(f"  put inside batch()   {rate(total, batch_s)}   raw blake3+zstd-{LEVEL} {rate(total, raw_batch_s)}"
          f"   = {raw_batch_s / batch_s:.2f}x")
    print(f"  get (verified)       {rate(total, get_s)}   raw unzstd+blake3   {rate(total, raw_get_s)}"
          f"   = {raw_get_s / get_s:.2f}x")
    rnd_put_s = rnd_raw_s = 0.0
    for _ in range(count):
        blob = os.urandom(MIB)
        rnd_raw_s += timed(lambda b=blob: raw_put(b))
        rnd_put_s += timed(lambda b=blob: store.put_bytes(b))
    print(f"  incompressible put   {rate(total, rnd_put_s)}   raw blake3+zstd-{LEVEL} {rate(total, rnd_raw_s)}"
          f"   = {rnd_raw_s / rnd_put_s:.2f}x (stored as raw blocks: no compression work)")


def bench_big(store: Store, work: Path, mib: int) -> None:
    path = work / "big.jsonl"
    block = json_like(8 * MIB, seed=99)
    with open(path, "wb") as out:  # varied 8 MiB blocks: beyond zstd's window, so no free repeats
        for i in range(mib // 8):
            out.write(b"%08d" % i + block[8:])
    size = path.stat().st_size
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    oid = ""

    def put() -> None:
        nonlocal oid
        oid = store.put_file(path)

    def get() -> None:
        with store.open_object(oid) as reader:
            while reader.read(CHUNK):
                pass

    put_s, get_s = timed(put), timed(get)
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - before
    import mmap

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        raw_put_s = timed(lambda: raw_put(mapped))
    frame = store.object_path(oid).read_bytes()
    raw_get_s = timed(lambda: raw_get(frame))
    logical, stored = store.object_sizes(oid)
    print(f"{mib} MiB JSON-like file (streamed; ratio {logical / stored:.2f})")
    print(f"  put_file             {rate(size, put_s)}   raw blake3+zstd-{LEVEL} {rate(size, raw_put_s)}"
          f"   = {raw_put_s / put_s:.2f}x")
    print(f"  open_object stream   {rate(size, get_s)}   raw unzstd+blake3   {rate(size, raw_get_s)}"
          f"   = {raw_get_s / get_s:.2f}x")
    print(f"  peak RSS growth during put+get: {growth / MIB:.1f} MiB (limit: 64 MiB)")
    path.unlink()


def fsync_cost(work: Path, samples: int = 300) -> tuple[float, float]:
    """Per-fsync cost of what one durable put does: a 2 KiB file fsync, then a directory fsync."""
    directory = work / "fsync_probe"
    directory.mkdir()
    data = os.urandom(2048)
    file_s = dir_s = 0.0
    dir_fd = os.open(directory, os.O_RDONLY)
    for i in range(samples):
        fd = os.open(directory / f"t{i}", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, data)
        file_s += timed(lambda fd=fd: os.fsync(fd))
        os.close(fd)
        os.rename(directory / f"t{i}", directory / f"f{i}")
        dir_s += timed(lambda: os.fsync(dir_fd))
    os.close(dir_fd)
    shutil.rmtree(directory)
    return file_s / samples, dir_s / samples


def bench_small(store_dir: Path, work: Path, count: int) -> Store:
    store = Store(store_dir)
    blobs = [json_like(2048, seed=100_000 + i) for i in range(count)]
    file_fsync, dir_fsync = fsync_cost(work)
    plain_s = timed(lambda: [store.put_bytes(b) for b in blobs[: count // 2]])
    plain = count // 2
    rest = blobs[count // 2:]

    def batched() -> None:
        with store.batch():
            for blob in rest:
                store.put_bytes(blob)

    batch_s = timed(batched)
    cpu_only = Store(work / "cpu_only")  # the same puts with durability switched off: Python's share
    import clawstore.store.objects as objects_module

    real_fsync, real_fsync_path = os.fsync, objects_module.fsync_path
    os.fsync = lambda fd: None  # type: ignore[assignment]
    objects_module.fsync_path = lambda path: None  # type: ignore[assignment]
    try:
        cpu_s = timed(lambda: [cpu_only.put_bytes(b) for b in blobs[:plain]])
    finally:
        os.fsync, objects_module.fsync_path = real_fsync, real_fsync_path
    floor = 1 / (file_fsync + dir_fsync)
    print(f"{count} objects of 2 KiB")
    print(f"  fsync alone: file {file_fsync * 1e6:.0f} us + directory {dir_fsync * 1e6:.0f} us per put"
          f" -> at most {floor:,.0f} durable puts/s")
    print(f"  put, durable each    {plain / plain_s:10,.0f} puts/s   ({plain_s / plain * 1e6:.0f} us/put;"
          f" {cpu_s / plain * 1e6:.0f} us of it is Python+hash+zstd+write, the rest is waiting for fsync)")
    print(f"  put inside batch()   {len(rest) / batch_s:10,.0f} puts/s   (one sync per 256 objects)")
    return store


def bench_fsck(store: Store) -> None:
    count = sum(1 for _ in store.iter_objects())
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from clawstore.cli import main; sys.exit(main())",
         "fsck", "--store", str(store.root)],
        capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    elapsed = time.perf_counter() - start
    print(f"claw fsck over {count} objects: {elapsed:.2f} s wall (exit {proc.returncode});"
          f" {proc.stdout.strip().splitlines()[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=10_000)
    parser.add_argument("--one-mib-count", type=int, default=32)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="store_bench_", dir=args.dir))
    try:
        print(f"work dir {work}; zstd level {LEVEL}; {os.cpu_count()} CPUs")
        bench_1mib(Store(work / "s1"), args.one_mib_count)
        bench_big(Store(work / "s2"), work, args.big_mib)
        small = bench_small(work / "s3", work, args.small_count)
        bench_fsck(small)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
