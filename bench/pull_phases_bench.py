"""Where a pull's CPU goes, phase by phase: the profile docs/scale/remote.md keeps.

    python bench/pull_phases_bench.py [--objects 20000] [--size 4096] [--pulls 7]

remote_bench's store (`--objects` JSON objects of about `--size` bytes, an action-cache entry each) is pushed to a
directory remote, then pulled `--pulls` times into an empty store, in this process (as remote_bench pulls: no start-up
or imports). Each phase is the thread CPU of the pulling thread inside the functions that do it (those of the phases
below it excluded where they nest); the whole pull is this process's CPU, zstd's threads included. Medians, and the
lowest: compare two trees taking turns, on a quiet machine if there is one.
"""

from __future__ import annotations

import argparse
import functools
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.remote_bench import generate  # noqa: E402
from clawstore.builder.cyclic_gc import collector_paused  # noqa: E402
from clawstore.remote import pull as pulling  # noqa: E402
from clawstore.remote.config import Remote  # noqa: E402
from clawstore.remote.push import push  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.core import batch, index  # noqa: E402
from clawstore.store.services import transfer  # noqa: E402

# (label, owner and name of the function timed, the phases it calls: subtracted from it), in the order a pull runs
PHASES: list[tuple[str, Any, str, tuple[str, ...]]] = [
    ("the listings, what the store has", pulling._Pull, "__init__", ()),
    ("checking the packs (hash, decode, BLAKE3 each)", transfer.Incoming, "check", ()),
    ("a pack's ids against its listing", pulling._Pull, "_check", ("checking the packs (hash, decode, BLAKE3 each)",)),
    ("checking the entries", pulling._Pull, "_check_entries", ()),
    ("taking the packs", transfer.Incoming, "take", ()),
    ("which entries to set (fresh_entries)", transfer, "fresh_entries", ()),
    ("writing the entries into a pack", batch, "write_entries", ()),
    ("encoding the index segment", index, "encode_segment", ()),
    ("adopting: renames, fsyncs, the rest of the commit", transfer, "adopt_packs",
     ("writing the entries into a pack", "encoding the index segment")),
]


_ADDING = threading.Lock()  # (push_phases_bench times its upload threads too: no addition lost between them)


def _timed(label: str, function: Callable[..., Any], spent: Counter[str]) -> Callable[..., Any]:
    """`function`, adding the CPU time of the thread that runs it to `spent[label]`."""
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            with _ADDING:
                spent[label] += time.thread_time() - start
    return timed


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--pulls", type=int, default=7)
    args = parser.parse_args()
    spent: Counter[str] = Counter()
    for label, owner, name, _ in PHASES:
        setattr(owner, name, _timed(label, getattr(owner, name), spent))
    runs: dict[str, list[float]] = {label: [] for label, *_ in PHASES}
    runs["whole pull, process CPU"] = []
    with tempfile.TemporaryDirectory(prefix="claw-pull-phases-") as tmp:
        root = Path(tmp)
        source = Store(root / "source")
        generate(source, args.objects, args.size)
        remote = Remote("phases", str(root / "remote"))
        push(source, remote)
        for turn in range(max(1, args.pulls)):
            spent.clear()
            target = Store(root / f"target{turn}")
            cpu = _cpu()
            with collector_paused():  # as `claw pull` runs it
                pulling.pull(target, remote)
            runs["whole pull, process CPU"].append(_cpu() - cpu)
            for label, _, _, inner in PHASES:
                runs[label].append(spent[label] - sum(spent[part] for part in inner))
            shutil.rmtree(target.root)
    print(f"pull of {args.objects} results ({3 * args.objects} objects, {args.objects} entries), {len(runs[label])} "
          "pulls: ms of CPU, median (lowest)")
    for label, values in runs.items():
        print(f"  {label:52s} {1000 * statistics.median(values):7.1f} ({1000 * min(values):.1f})")


if __name__ == "__main__":
    main()
