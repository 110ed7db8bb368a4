"""The store index alone: what opening it holds in memory per entry, and what a lookup costs.

Writes an index like a busy store's (one big segment, a medium one, a few commits' small ones) and opens it as a new
process would: Python memory held (tracemalloc) per entry, time to open, then the four lookups a build makes per node
(an object present/absent, an action entry present/absent) in ns each, and a whole-index pass (gc, fsck, stats) in
entries per second. Run it with another checkout on PYTHONPATH for a before/after (it uses only the index's
long-standing API).

    python bench/index_bench.py --entries 200000
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
import timeit
import tracemalloc
from pathlib import Path

from clawstore.store.core.index import ActionEntry, IndexView, Segment, new_segment_name, write_segment

PACKS = [os.urandom(16).hex() for _ in range(40)]


def _segment(rng: random.Random, objects: int, actions: int) -> Segment:
    segment = Segment(new_segment_name())
    for _ in range(objects):
        segment.objects[rng.randbytes(32)] = (rng.choice(PACKS), rng.randrange(1 << 30), rng.randrange(1, 1 << 16))
    for _ in range(actions):
        segment.actions[rng.randbytes(32)] = ActionEntry(rng.randbytes(32), time.time_ns(), rng.choice(PACKS),
                                                         rng.randrange(1 << 30))
    return segment


def _ns(fn: object, keys: list[bytes], rounds: int) -> float:
    def run() -> None:
        for key in keys:
            fn(key, False)  # type: ignore[operator]
    # CPU time, not wall: on a shared machine other processes' turns would count as the lookups'.
    return min(timeit.repeat(run, number=1, repeat=rounds, timer=time.process_time)) / len(keys) * 1e9


def _open(index_dir: Path, tmp: Path, *keys: bytes) -> IndexView:
    view = IndexView(index_dir, tmp, tmp)
    view.refresh()
    for key in keys:  # (a first lookup may finish what opening began)
        view.find_object(key, False)
        view.find_action(key, False)
    return view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000, help="objects, and as many action entries")
    parser.add_argument("--small", type=int, default=8, help="small segments (a commit's each)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(54)
    n = args.entries
    parts = [_segment(rng, n - n // 8, n - n // 8), _segment(rng, n // 8, n // 8)]
    parts += [_segment(rng, 40, 40) for _ in range(args.small)]
    with tempfile.TemporaryDirectory() as tmp:
        index_dir = Path(tmp) / "index"
        index_dir.mkdir()
        for part in parts:
            write_segment(index_dir, Path(tmp), part)
        total = sum(len(part.objects) + len(part.actions) for part in parts)
        present_objects = [key for part in parts for key in part.objects][:: max(1, n // 20_000)]
        present_actions = [key for part in parts for key in part.actions][:: max(1, n // 20_000)]
        absent = [rng.randbytes(32) for _ in range(len(present_objects))]
        rng.shuffle(present_objects)
        rng.shuffle(present_actions)
        del parts
        started = time.process_time()
        _open(index_dir, Path(tmp), present_objects[0], absent[0])
        opened = time.process_time() - started
        tracemalloc.start()  # (again, traced: tracing slows allocations down)
        view = _open(index_dir, Path(tmp), present_objects[0], absent[0])
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"index of {total:,} entries in {len(os.listdir(index_dir))} segments "
              f"({sum(p.stat().st_size for p in index_dir.iterdir()) / 1e6:.1f} MB on disk)")
        print(f"open and a first lookup: {opened:.3f} s CPU, Python memory held {held / 1e6:.1f} MB "
              f"= {held / total:.1f} bytes per entry")
        for label, fn, keys in (("object present", view.find_object, present_objects),
                                ("object absent", view.find_object, absent),
                                ("action present", view.find_action, present_actions),
                                ("action absent", view.find_action, absent)):
            print(f"lookup {label:15} {_ns(fn, keys, args.rounds):7.0f} ns")
        started = time.process_time()
        count = sum(1 for _ in view.objects.items()) + sum(1 for _ in view.actions.items())
        print(f"whole-index pass: {count:,} entries in {time.process_time() - started:.3f} s CPU")


if __name__ == "__main__":
    main()
