"""gc and fsck against the floor (issue 54): the time to read every pack once (cold and warm cache), to
BLAKE3-hash every pack's bytes, and to decode and hash every object (what fsck must do to verify content),
printed next to `claw gc --dry-run` and `claw fsck` over the same store (wall, CPU, peak RSS).

    python bench/gc_fsck_bench.py --store /path/to/a/copy/of/a/store [--runs 3]
    python bench/gc_fsck_bench.py --cases 2000 --models 5     # builds that campaign against the stand-in
    python bench/gc_fsck_bench.py --cases 2000 --models 5 --drop-model   # and times a real gc deleting a model's runs
    python bench/gc_fsck_bench.py --cases 2000 --models 5 --killed   # with a killed build's journal of the campaign

--killed (issue 54, session 77): the campaign's first build is a real `claw build` SIGKILLed late (the judgements of
its last two cases held back by the stand-in, one case's released once its log has been quiet, the kill once its log
counts them: every node but the last window's results and the last case's judgements journaled), then the same
campaign under another evaluation profile's name (the same nodes, keys and records: another campaign, which does not
tell the killed one) is built to its end. The killed build's journal is then a gc root (docs/gc-and-archives.md
"Roots"); gc --dry-run, fsck and status are timed with it and with it moved out of the store, alternately.

gc runs with --dry-run. The edges cache (edges/, docs/gc-and-archives.md) is written by the build that seals each pack;
gc writes it for a pack that has none (a store built before writers wrote it), fsck marks it verified with each
record's facts: the first run of each differs from later ones, so the runs are printed in order. Point --store at a
copy, never a shared store.
The cold read drops each pack from the page cache first (posix_fadvise DONTNEED: clean pages only).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import signal
import statistics
import subprocess
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
from clawstore.builder.execute import LOG_WRITE_INTERVAL_S  # noqa: E402
from clawstore.spend.killed import as_logged  # noqa: E402
from clawstore.store.core import codec  # noqa: E402
from clawstore.store.core.packfile import KIND_OBJECT, scan_pack  # noqa: E402
from clawstore.testing.standin import StandIn, held  # noqa: E402

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


# --killed: the same campaign under another name (an evaluation profile the same but for its id: the same nodes, keys
# and records), so that its build to the end does not tell the killed build of CAMPAIGN (spend/killed.py tell)
OTHER = ("--suite", "bench", "--run-profile", "bench", "--evaluation-profile", "ev-other")
KILL_WAIT_S = 600.0  # the longest the killed build may take to get there (a 10,000 x 5 cold build: ~6 min CPU)


def campaign_store(scratch: Path, cases: int, models: int, drop_model: bool = False,
                   killed: bool = False) -> tuple[Path, Path, dict[str, str]]:
    """A built, fresh campaign of `cases` x `models` (runs judged once): (workspace, store, the builds' environment).
    With `drop_model`, the campaign is then built again without its last model (what a user deleting a model's results
    does: the ref moves to a head without them, every node of the others reused), so a gc has that model's runs to
    delete. With `killed`, CAMPAIGN's build is SIGKILLed late (`killed_build`) and OTHER is built instead."""
    root, store = scratch / "ws", scratch / "store"
    generate(root, cases, models, evaluation=True, judge_repetitions=1)
    with StandIn() as server:  # (one server throughout: its address is part of a run's key)
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(store)}
        if killed:
            killed_build(root, server, env, cases, models)
            sent = len(server.requests)
            measure(root, ("build", *OTHER), env)
            print(f"{cases} x {models}: the build of the same nodes as another campaign sent "
                  f"{len(server.requests) - sent} requests after the kill (the rest reused)")
            return root, store, env
        server.script("judge/j", judge_reply(7))
        measure(root, ("build", *CAMPAIGN), env)
        if drop_model:
            suite = root / "configs" / "suites" / "bench.yaml"
            doc = yaml.safe_load(suite.read_text())
            doc["models"] = doc["models"][:-1]
            suite.write_text(yaml.safe_dump(doc, sort_keys=False))
            sent = len(server.requests)
            measure(root, ("build", *CAMPAIGN), env)
            assert len(server.requests) == sent, "the build without the last model sent requests"
    return root, store, env


def killed_build(root: Path, server: StandIn, env: dict[str, str], cases: int, models: int) -> Path:
    """CAMPAIGN's cold build, SIGKILLed late; its journal. The stand-in holds back the judgements of the last case
    (until the kill) and of the one before (`late`): every other run and judgement is answered, the log goes quiet
    (a build writes it at a node's end LOG_WRITE_INTERVAL_S after its last write, builder/execute.py), then `late` is
    released and the kill comes once the log counts more than before (what ended until that write is journaled)."""
    profiles = root / "configs" / "evaluation_profiles"
    other = yaml.safe_load((profiles / "ev.yaml").read_text())
    (profiles / "ev-other.yaml").write_text(yaml.safe_dump({**other, "evaluation_profile_id": "ev-other"}))
    # (a judge's prompt quotes its case's expectation, "Says {index + 1}.": bench/_workspace.py generate)
    server.script("judge/j", held("tail", **judge_reply(7)), match=f"Says {cases}.")
    server.script("judge/j", held("late", **judge_reply(7)), match=f"Says {cases - 1}.")
    server.script("judge/j", judge_reply(7))
    builds = Path(env["CLAW_STORE"]) / "builds"
    # (--fixed-concurrency: the adaptive limit, seeing requests held, may step down to as few as are held, and stop)
    build = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", *CAMPAIGN, "--fixed-concurrency"],
                             cwd=root, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, released, counted = time.monotonic() + KILL_WAIT_S, False, 0
        while build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            journal = next(builds.glob("*.jsonl"), None) if builds.is_dir() else None
            logged = as_logged(journal) if journal is not None else None
            if journal is None or logged is None:
                continue
            if released and logged.executed > counted:
                break
            quiet = time.time() - max(journal.stat().st_mtime, journal.with_suffix(".json").stat().st_mtime)
            # (quiet first: the stand-in's requests are copied to be counted, 200,000 of them at 10,000 x 5)
            if not released and quiet > LOG_WRITE_INTERVAL_S + 0.5 and len(server.requests) >= 2 * cases * models:
                released, counted = True, logged.executed
                server.release("late")
        else:
            raise SystemExit(f"the build to kill ended or took {KILL_WAIT_S:.0f} s first (exit {build.poll()}, "
                             f"{len(server.requests)} requests)")
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
        server.release("late")
        server.release("tail")
    return journal


def killed_journal(store: Path) -> Path:
    """The killed build's journal, still a gc root: its log `running`, untold (spend/killed.py)."""
    [journal] = (store / "builds").glob("*.jsonl")
    log = json.loads(journal.with_suffix(".json").read_bytes())
    assert log["state"] == "running" and "told_by" not in log, f"{journal}: no longer a gc root: {log}"
    return journal


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
    parser.add_argument("--killed", action="store_true",
                        help="without --store: leave a killed build's journal of the campaign beside it, and time "
                             "gc --dry-run, fsck and status with it and without it")
    args = parser.parse_args()
    if args.drop_model and (args.store or args.models < 2):
        parser.error("--drop-model builds its own campaign of two models or more (no --store)")
    if args.killed and (args.store or args.drop_model or args.cases < 2):
        parser.error("--killed builds its own campaign of two cases or more (no --store, no --drop-model)")
    with tempfile.TemporaryDirectory(prefix="claw-gcfsck-") as scratch:
        built = None if args.store else campaign_store(Path(scratch), args.cases, args.models, args.drop_model,
                                                       args.killed)
        store = args.store or built[1]
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
        if args.killed:
            with_and_without(built[0], store, built[2], args.cases * args.models, args.runs)
        if args.drop_model:  # (last: it changes the store)
            found = measure(Path(scratch), ("gc", "--grace", "0"), env)
            print(f"claw gc --grace 0 after the last model's results were dropped: {found.wall:.2f} s wall, "
                  f"{found.cpu:.2f} s CPU, {found.max_rss / 2**20:.0f} MB max RSS")


def with_and_without(root: Path, store: Path, env: dict[str, str], pairs: int, runs: int) -> None:
    """gc --dry-run, fsck and status over the store with the killed build's journal and with it moved out of the
    store, alternately (the same store otherwise: without it gc has no killed build to keep, status none to name)."""
    journal = killed_journal(store)
    lines = sum(1 for _ in journal.open("rb"))
    print(f"killed build's journal: {lines} nodes of the campaign's {4 * pairs} (a run, its checks, its judgement, "
          f"its result a case and model), {journal.stat().st_size / 2**20:.1f} MiB")
    aside = root.parent / journal.name
    for name, command in (("gc --dry-run", ("gc", "--dry-run")), ("fsck", ("fsck",)),
                          ("status", ("status", *CAMPAIGN))):
        found: dict[bool, list[Measured]] = {True: [], False: []}
        for _ in range(runs):
            for present in (True, False):
                if not present:
                    shutil.move(journal, aside)
                try:
                    found[present].append(measure(root, command, env))
                finally:
                    if not present:
                        shutil.move(aside, journal)
        each = {present: median(runs) for present, runs in found.items()}
        print(f"claw {name:13} with the journal: median {each[True].wall:6.2f} s wall, {each[True].cpu:6.2f} s CPU, "
              f"worst {each[True].max_rss / 2**20:5.0f} MB max RSS; without: {each[False].wall:6.2f} s wall, "
              f"{each[False].cpu:6.2f} s CPU, {each[False].max_rss / 2**20:5.0f} MB")


if __name__ == "__main__":
    main()
