"""Pulling a remote that `build --remote` filled with small packs (one per interim push).

    python bench/interim_packs_bench.py [--pushes 2000] [--runs 5] [--repeat 1]

A store commits `--runs` runs (an output, an input document and an entry each) and pushes them as an
interim push would, `--pushes` times, to a directory remote. An empty store then pulls it all, twice
per round: once as claw pulls (the objects of small packs copied into one pack of the pull's own), and
once with every pack moved in whole, as large packs are and as every pack was before (the baseline,
measured in the same run). Prints the wall time, the pack files and the disk blocks (`du -s -B1`) of
each pulled store, and the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.builder.cyclic_gc import collector_paused  # noqa: E402
from clawstore.remote import pull, push  # noqa: E402
from clawstore.remote.config import Remote  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.services import transfer  # noqa: E402
from clawstore.store.services.stats import store_stats  # noqa: E402


def fill(root: Path, remote: Remote, pushes: int, runs: int) -> None:
    source = Store(root)
    known = push.RemoteKnowledge()
    for turn in range(pushes):
        with source.batch():
            for i in range(turn * runs, (turn + 1) * runs):
                output = source.put_json({"answer": f"{i:08d}" + "x" * 400})
                key = source.put_json({"input": i})
                source.put_action(key, {"kind": "run", "key": key, "input": key, "status": "success",
                                        "cacheable": True, "outputs": {"answer": output}})
        if turn == 0:
            push.push(source, remote, move_refs=False, knowledge=known)
        else:
            push.push_new(source, remote, known)


def pull_into(root: Path, remote: Remote, adopt_bytes: int) -> tuple[float, int, int]:
    """(seconds, pack files, disk bytes) of a pull into an empty store at `root`."""
    shutil.rmtree(root, ignore_errors=True)
    saved, transfer.ADOPT_BYTES = transfer.ADOPT_BYTES, adopt_bytes
    try:
        began = time.perf_counter()
        with collector_paused():  # as `claw pull` runs it
            pull.pull(Store(root), remote)
        seconds = time.perf_counter() - began
    finally:
        transfer.ADOPT_BYTES = saved
    stats = store_stats(Store(root), with_gc=False)
    return seconds, stats.packs, stats.disk_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pushes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5, help="runs committed between two interim pushes")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of both pulls (medians are compared)")
    args = parser.parse_args()
    if args.pushes < 1 or args.runs < 1:
        parser.error("--pushes and --runs: at least 1 (a pull of nothing has no figure to compare)")
    with tempfile.TemporaryDirectory(prefix="claw-interim-bench-") as tmp:
        root = Path(tmp)
        remote = Remote("team", str(root / "remote"))
        fill(root / "source", remote, args.pushes, args.runs)
        packs = len(list((root / "remote" / "packs").glob("*.pack")))
        claw, whole = [], []
        for _ in range(max(1, args.repeat)):
            claw.append(pull_into(root / "claw", remote, transfer.ADOPT_BYTES))
            whole.append(pull_into(root / "whole", remote, 0))
    mine, base = statistics.median(c[0] for c in claw), statistics.median(w[0] for w in whole)
    print(f"pull of {packs} packs ({args.pushes} interim pushes of {args.runs} runs), median of {len(claw)}:")
    print(f"  claw (small packs copied into one): {mine:.2f} s, {claw[-1][1]} pack file(s), "
          f"{claw[-1][2]:,} bytes on disk")
    print(f"  every pack moved in whole (baseline): {base:.2f} s, {whole[-1][1]} pack file(s), "
          f"{whole[-1][2]:,} bytes on disk")
    print(f"  time {mine / base:.2f}x, pack files {claw[-1][1] / whole[-1][1]:.4f}x, "
          f"disk {claw[-1][2] / whole[-1][2]:.2f}x of the baseline")


if __name__ == "__main__":
    main()
