"""Where a push's CPU goes, phase by phase: the profile docs/remote.md ("Scale: transfers that overlap") keeps.

    python bench/push_phases_bench.py [--objects 20000] [--size 4096] [--pushes 7] [--sealed]

remote_bench's store (`--objects` JSON objects of about `--size` bytes, an action-cache entry each; as remote_bench
makes it, its pack still open in this process, so push makes packs of its objects; `--sealed`: the pack sealed
first, as a store a build has left, so push sends it as it is) is pushed `--pushes` times to a new directory remote,
in this process (as remote_bench pushes: no start-up or imports). Each phase is the thread CPU spent in the
functions that do it, in whichever thread runs them (the pushing thread or an upload's); the whole push is this
process's CPU. `first upload at` is the wall time from the push's start to its first pack's upload: the link is idle
until then. Medians, and the lowest: compare two trees taking turns, on a quiet machine if there is one.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pull_phases_bench import _cpu, _timed  # noqa: E402
from bench.remote_bench import generate  # noqa: E402
from clawstore.builder.cyclic_gc import collector_paused  # noqa: E402
from clawstore.remote import backends, listing  # noqa: E402
from clawstore.remote import push as pushing  # noqa: E402
from clawstore.remote.config import Remote  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.core import index  # noqa: E402
from clawstore.store.services import transfer  # noqa: E402

# (label, owner and name of the function timed, the phases it calls: subtracted from it), in the order a push runs
PHASES: list[tuple[str, Any, str, tuple[str, ...]]] = [
    ("the remote's listings", pushing, "remote_content", ()),
    ("what the store has (object and entry digests)", pushing, "_local_content", ()),
    ("index lookups of the objects to pack", index.Entries, "find_object", ()),
    ("index look-ups of a run of objects", index.Entries, "find_sorted", ("index lookups of the objects to pack",)),
    ("making packs (copying frames)", transfer, "make_pack", ("index lookups of the objects to pack",
                                                             "index look-ups of a run of objects")),
    ("each pack's name (BLAKE3 of the file)", pushing, "file_digest", ()),
    ("each pack's table read back", pushing, "pack_table", ()),
    ("listings encoded and signed", listing, "encode", ()),
    ("uploads (directory: copy, fsync, rename)", backends.DirectoryBackend, "upload", ()),
    ("listings published", backends.DirectoryBackend, "create", ()),
    ("tables kept in the listing cache", pushing, "remember_table", ()),
    ("refs moved", pushing, "_move_refs", ()),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--pushes", type=int, default=7)
    parser.add_argument("--sealed", action="store_true", help="seal the store's pack first (sent as it is)")
    args = parser.parse_args()
    spent: Counter[str] = Counter()
    lock = threading.Lock()
    present = set()
    for label, owner, name, _ in PHASES:
        if hasattr(owner, name):  # (a tree without it: the phase reads 0)
            setattr(owner, name, _timed(label, getattr(owner, name), spent))
            present.add(label)
    first: list[float] = []
    upload = backends.DirectoryBackend.upload

    def noted(*a: Any, **k: Any) -> None:
        with lock:
            first.append(time.perf_counter())
        upload(*a, **k)

    backends.DirectoryBackend.upload = noted  # type: ignore[method-assign]
    runs: dict[str, list[float]] = {label: [] for label, *_ in PHASES}
    runs["whole push, process CPU"], runs["first upload at (wall)"] = [], []
    with tempfile.TemporaryDirectory(prefix="claw-push-phases-") as tmp:
        root = Path(tmp)
        source = Store(root / "source")
        generate(source, args.objects, args.size)
        if args.sealed:
            source.close()
            source = Store(root / "source", create=False)
        for turn in range(max(1, args.pushes)):
            spent.clear()
            first.clear()
            remote = Remote(f"phases{turn}", str(root / f"remote{turn}"))
            cpu, start = _cpu(), time.perf_counter()
            with collector_paused():  # as `claw push` runs it
                pushing.push(source, remote)
            runs["whole push, process CPU"].append(_cpu() - cpu)
            runs["first upload at (wall)"].append(min(first) - start)
            for label, _, _, inner in PHASES:
                runs[label].append(spent[label] - sum(spent[part] for part in inner) if label in present else 0.0)
            shutil.rmtree(root / f"remote{turn}")
            shutil.rmtree(source.root / "remotes" / remote.name, ignore_errors=True)
    how = "sealed: sent as it is" if args.sealed else "open: push makes packs"
    print(f"push of {args.objects} results ({3 * args.objects} objects, {args.objects} entries; the store's pack "
          f"{how}), {args.pushes} pushes: ms, median (lowest)")
    for label, values in runs.items():
        print(f"  {label:52s} {1000 * statistics.median(values):7.1f} ({1000 * min(values):.1f})")


if __name__ == "__main__":
    main()
