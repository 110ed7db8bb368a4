"""Archive and gc benchmark: export/import of a large campaign against raw zstd, gc over 100,000 objects.

    python bench/archive_bench.py [--mib 500] [--gc-objects 100000] [--dir /path/on/the/store/fs]
                                  [--only archive|gc]

What is measured:
1. archive: a synthetic campaign is written through the real store API — `--mib` MiB of sandbox files
   (log-like text, ~2.5x with zstd -3, every file distinct) in per-run trees, each run with
   its input document, artifact, record and action-cache entry, and a campaign head (same shape as the
   build's) behind ref campaigns/<id>. Then, each timed separately:
   - export: `head_closure` (walking the head, reading every JSON object) + `write_archive` (copying every
     stored frame into the sealed tar, BLAKE3 of the whole file, fsync). The config snapshot of
     `claw archive export` is left out: it needs a workspace and is a few KiB.
   - import: `import_archive` into an empty store: full verification (every frame decompressed and
     hashed, the seal), staging into tmp/, one flush, renames, action-cache entries, ref.
   - raw zstd compress: the same logical bytes (every object's content, held in memory in 1 MiB chunks)
     through one zstd level-3 stream; raw zstd decompress: that stream decompressed in memory.
   Each is run 5 times, interleaved; medians of wall-clock time and of this process's CPU time are
   reported (the machine is shared, so wall-clock figures move with other people's load).
   Throughput is logical (uncompressed) MiB per second for all four; the targets are export >= 0.5x raw
   compress and import >= 0.5x raw decompress. The files are in the page cache (just written), like the
   in-memory baselines.
2. gc: a store of `--gc-objects` objects (runs of record + artifact + input document + sandbox tree +
   one file, five objects each); half of the runs are superseded (their entries still in the action
   cache, no ref reaches them). Timed: `collect(dry_run=True)` and the real `collect(grace_s=0)`, which
   deletes the superseded half.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.store import Store  # noqa: E402
from clawstore.store.reach import head_closure  # noqa: E402
from clawstore.store.services.archive import write_archive  # noqa: E402
from clawstore.store.services.archive_import import import_archive  # noqa: E402
from clawstore.store.services.gc import collect  # noqa: E402

MIB = 1 << 20
LEVEL = 3
CAMPAIGN = "bench__rp__none"
FILE_MIB = 4  # per sandbox file
FILES_PER_RUN = 2
REPEAT = 5


def text_pool(size: int, seed: int = 7) -> bytes:
    """Log-like text: 50,000 distinct lines (words, numbers, hex ids) drawn at random; zstd -3 gets ~2.5x."""
    rnd = random.Random(seed)
    words = ["INFO", "WARN", "DEBUG", "request", "tool_call", "exec_shell", "read_file", "tokens", "latency",
             "status=ok", "status=retry", "model", "sandbox", "write_file", "content", "bytes", "elapsed"]
    lines = [(f"{rnd.randint(0, 86399):05d} {rnd.choice(words)} {' '.join(rnd.choices(words, k=rnd.randint(2, 9)))} "
              f"id={rnd.getrandbits(64):016x} n={rnd.randint(0, 99999)}\n").encode() for _ in range(50_000)]
    out = bytearray()
    while len(out) < size:
        out += b"".join(rnd.choices(lines, k=10_000))
    return bytes(out[:size])


def run_record(key: str, outputs: dict[str, Any], i: int) -> dict[str, Any]:
    return {"record_version": 1, "kind": "run", "key": key,
            "address": {"model_id": f"m{i % 7}", "case_id": f"case_{i:06d}", "repetition": 0},
            "status": "success", "cacheable": True, "outputs": outputs,
            "metrics": {"input_tokens": 100, "output_tokens": 20, "reasoning_tokens": 0, "cached_tokens": 0,
                        "cost_usd": 0.0001, "latency_s": 1.0},
            "summary": {}, "error": None, "started_at": "2026-11-22T00:00:00Z",
            "finished_at": "2026-11-22T00:00:01Z", "build_id": "bench"}


def write_run(store: Store, i: int, sandbox: Path | None, pool: bytes | None) -> tuple[str, str, dict[str, Any]]:
    """One run's objects, record and entry; returns (key, record id, record)."""
    document = {"kind": "run", "case_id": f"case_{i:06d}", "model": f"m{i % 7}", "repetition": 0,
                "messages": [{"role": "user", "content": f"question {i}"}]}
    key = store.put_json(document)
    outputs: dict[str, Any] = {"input_document": key}
    if sandbox is not None and pool is not None:
        shutil.rmtree(sandbox, ignore_errors=True)
        sandbox.mkdir()
        for n in range(FILES_PER_RUN):
            start = ((i * FILES_PER_RUN + n) * 7919 * 4096) % (len(pool) - FILE_MIB * MIB)
            (sandbox / f"out_{n}.log").write_bytes(f"run {i} file {n}\n".encode() + pool[start:start + FILE_MIB * MIB])
        outputs["sandbox"] = store.put_tree(sandbox)
    else:
        outputs["sandbox"] = store.put_json({"tree_version": 1, "entries": [
            {"path": "answer.txt", "type": "file", "mode": 0o100644, "size": 16,
             "object": store.put_bytes(f"answer of {i:06d}".encode())}]})
    outputs["artifact"] = store.put_json({"identity": {"case_id": f"case_{i:06d}", "run_id": f"r{i}"},
                                          "status": "success", "trace": [{"event_type": "final_output",
                                                                          "text": f"answer {i}"}]})
    record = run_record(key, outputs, i)
    return key, store.put_action(key, record), record


def write_head(store: Store, runs: list[tuple[str, str, dict[str, Any]]]) -> str:
    nodes = [{"kind": "run", "key": key, "record": rid, "action": "exec", "address": rec["address"],
              "record_doc": rec} for key, rid, rec in runs]
    head = store.put_json({"build_id": "bench", "campaign": {"id": CAMPAIGN}, "state": "complete",
                           "nodes": nodes, "counts": {}, "metrics": {}})
    store.set_ref(f"campaigns/{CAMPAIGN}", head)
    return head


def logical_chunks(store: Store, objects: list[str]):  # noqa: ANN201 - a generator of bytes
    for oid in objects:
        with store.open_object(oid) as reader:
            while chunk := reader.read(MIB):
                yield chunk


def bench_archive(base: Path, mib: int) -> None:
    store = Store(base / "origin")
    pool = text_pool(64 * MIB)
    runs_needed = max(1, mib // (FILE_MIB * FILES_PER_RUN))
    began = time.perf_counter()
    sandbox = base / "sandbox"
    runs = [write_run(store, i, sandbox, pool) for i in range(runs_needed)]
    head = write_head(store, runs)
    print(f"setup: {runs_needed} runs written in {time.perf_counter() - began:.1f}s")

    closure = head_closure(store, head)
    objects = sorted("blake3:" + h for h in closure.objects)
    logical = sum(store.object_sizes(o)[0] for o in objects)
    stored = sum(store.object_sizes(o)[1] for o in objects)
    print(f"campaign: {len(objects)} objects, {logical / MIB:.0f} MiB logical, {stored / MIB:.0f} MiB stored "
          f"(ratio {logical / stored:.2f})")

    archive = base / "campaign.claw"
    timings: dict[str, list[tuple[float, float]]] = {"export": [], "import": [], "compress": [], "decompress": []}
    for rep in range(REPEAT):  # interleaved; medians are reported (the machine is shared)
        with timed(timings["export"]):
            closure = head_closure(store, head)
            write_archive(store, archive, {"head": head, "refs": {f"campaigns/{CAMPAIGN}": head},
                                           "actions": closure.actions}, closure.objects)
        target = Store(base / f"imported{rep}")
        with timed(timings["import"]):
            report = import_archive(target, archive)
        assert report.new_objects == len(objects), report
        shutil.rmtree(target.root)

        # The baselines work in memory on the same bytes: every object's content, 1 MiB at a time.
        chunks = list(logical_chunks(store, objects))
        with timed(timings["compress"]):
            cobj = zstandard.ZstdCompressor(level=LEVEL).compressobj()
            frames = [cobj.compress(chunk) for chunk in chunks]
            frames.append(cobj.flush())
        del chunks
        with timed(timings["decompress"]):
            dobj = zstandard.ZstdDecompressor().decompressobj()
            for frame in frames:
                dobj.decompress(frame)
        del frames

    print(f"archive: {archive.stat().st_size / MIB:.0f} MiB on disk; throughput in logical MiB/s, "
          f"median of {REPEAT}: wall clock (CPU time of this process)")
    wall = {name: statistics.median(w for w, _ in values) for name, values in timings.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in timings.items()}
    mib = logical / MIB
    for name, label in (("export", "export"), ("compress", "raw zstd -3 compress"), ("import", "import"),
                        ("decompress", "raw zstd decompress")):
        print(f"{label:22s} {wall[name]:6.2f}s {mib / wall[name]:7.0f} MiB/s   (cpu {cpu[name]:6.2f}s "
              f"{mib / cpu[name]:7.0f} MiB/s)")
    for name, values in timings.items():
        print(f"  {name} samples (wall s): {' '.join(f'{w:.2f}' for w, _ in values)}")
    print(f"export / compress    = {wall['compress'] / wall['export']:.2f}x wall, "
          f"{cpu['compress'] / cpu['export']:.2f}x cpu")
    print(f"import / decompress  = {wall['decompress'] / wall['import']:.2f}x wall, "
          f"{cpu['decompress'] / cpu['import']:.2f}x cpu")


@contextlib.contextmanager
def timed(into: list[tuple[float, float]]) -> Iterator[None]:
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    into.append((time.perf_counter() - wall, time.process_time() - cpu))


def bench_gc(base: Path, count: int) -> None:
    store = Store(base / "gc")
    runs = max(2, count // 5)
    began = time.perf_counter()
    written = []
    for start in range(0, runs, 200):  # a few hundred entries per batch (a batch keeps its pointers' files open)
        with store.batch():
            for i in range(start, min(runs, start + 200)):
                written.append(write_run(store, i, None, None))
    live = written[: runs // 2]
    write_head(store, live)
    total = sum(1 for _ in store.iter_objects())
    print(f"setup: {total} objects, {runs} action-cache entries, half superseded, in "
          f"{time.perf_counter() - began:.1f}s")
    time.sleep(0.05)  # everything strictly older than gc's start
    t0 = time.perf_counter()
    dry = collect(store, grace_s=0, dry_run=True)
    dry_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    real = collect(store, grace_s=0)
    real_s = time.perf_counter() - t0
    left = sum(1 for _ in store.iter_objects())
    print(f"gc --dry-run  {dry_s:6.2f}s  (would delete {len(dry.objects)} objects, {len(dry.actions)} entries)")
    print(f"gc            {real_s:6.2f}s  (deleted {len(real.objects)} objects, {len(real.actions)} entries; "
          f"{left} objects left, {real.reachable} reachable)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=500)
    parser.add_argument("--gc-objects", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="where to create the stores (default: a temp dir)")
    parser.add_argument("--only", choices=["archive", "gc"], default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claw-archive-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        if args.only in (None, "archive"):
            bench_archive(base, args.mib)
            shutil.rmtree(base / "origin")
        if args.only in (None, "gc"):
            bench_gc(base, args.gc_objects)


if __name__ == "__main__":
    main()
