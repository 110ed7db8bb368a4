"""Where a push's CPU goes, phase by phase: the profile docs/scale/remote.md keeps.

    python bench/push_phases_bench.py [--objects 20000] [--size 4096] [--pushes 7] [--sealed] [--link-mib N]
                                      [--refs N] [--timeline]

remote_bench's store (`--objects` JSON objects of about `--size` bytes, an action-cache entry each; as remote_bench
makes it, its pack still open in this process, so push makes packs of its objects; `--sealed`: the pack sealed
first, as a store a build has left, so push sends it as it is) is pushed `--pushes` times to a new directory remote
(`--link-mib`: a new bucket of a loopback S3 server, through a link of N MiB/s as remote_bench relays it), in this
process (as remote_bench pushes: no start-up or imports); `--refs N`: the store also has N campaign refs, which each
push reads, signs and swaps on the remote (as a team's push moves its campaigns). Each phase is the thread CPU spent in
the functions that do it, in whichever thread runs them (the pushing thread or an upload's); the whole push is this
process's CPU. `first upload at` is the wall time from the push's start to its first pack's upload: the link is idle
until then. Medians, and the lowest: compare two trees taking turns, on a quiet machine if there is one.

`--timeline` (with `--link-mib`) then prints the wall clock of one more push, each phase's and each remote operation's
start and end (ms from the push's start) in the thread that ran it, after the same for a plain upload of the same packs
(boto3 upload_file, 8 threads): which waits are in series, and what the link and the S3 server cost on their own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._throttle import throttled  # noqa: E402
from bench.pull_phases_bench import _cpu, _timed  # noqa: E402
from bench.remote_bench import generate  # noqa: E402
from clawstore.builder.cyclic_gc import collector_paused  # noqa: E402
from clawstore.remote import backends, listing  # noqa: E402
from clawstore.remote import push as pushing  # noqa: E402
from clawstore.remote.config import Remote  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.core import index  # noqa: E402
from clawstore.store.services import transfer  # noqa: E402
from tests.support.s3server import FAKE_CREDENTIALS, make_bucket, s3_server  # noqa: E402

# (label, owner and name of the function timed, the phases it calls: subtracted from it), in the order a push runs
PHASES: list[tuple[str, Any, str, tuple[str, ...]]] = [
    ("the remote opened (an S3 client made)", pushing, "open_backend", ()),
    ("the remote's listings", pushing, "remote_content", ()),
    ("what the store has: its entries", Store, "entry_digests", ()),
    ("what the store has: its objects", Store, "object_digests", ()),
    ("index lookups of the objects to pack", index.Entries, "find_object", ()),
    ("index look-ups of a run of objects", index.Entries, "find_sorted", ("index lookups of the objects to pack",)),
    ("making packs (copying frames)", transfer, "make_pack", ("index lookups of the objects to pack",
                                                             "index look-ups of a run of objects")),
    ("each pack's name (BLAKE3 of the file)", pushing, "file_digest", ()),
    ("each pack's table read back", pushing, "pack_table", ()),
    ("listings encoded and signed", listing, "encode", ()),
    ("uploads (directory: copy, fsync, rename)", backends.DirectoryBackend, "upload", ()),
    ("listings published", backends.DirectoryBackend, "create", ()),
    ("uploads (S3: one PUT, or upload_file over 1 MiB)", backends.S3Backend, "upload", ()),
    ("listings published (S3: a conditional PUT)", backends.S3Backend, "create", ()),
    ("tables kept in the listing cache", pushing, "remember_table", ()),
    ("refs moved", pushing, "_move_refs", ()),
]


# What the timeline shows besides the phases: each remote operation, and the pushing thread waiting for an upload.
REMOTE_OPS = [(f"S3 {name}", backends.S3Backend, name) for name in ("list", "upload", "create", "read_ref", "swap_ref",
                                                                     "read_tail")]
WAITS = [("waits for an upload", pushing._Sender, "_settle"), ("the pack's name and listing", pushing, "_named")]


class Timeline:
    """Wall-clock spans (thread, label, start, end, what) of the functions it wraps, while `on`."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, float, float, str]] = []
        self.on, self.lock = False, threading.Lock()

    def wrap(self, label: str, owner: Any, name: str, shows_name: bool = False) -> None:
        """`shows_name`: the span also shows the name of the file moved (a remote operation's)."""
        inner = getattr(owner, name)

        def spanned(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                if self.on:
                    what = next((str(x) for x in a[1:3] if isinstance(x, str | Path)), "") if shows_name else ""
                    with self.lock:
                        self.spans.append((threading.current_thread().name, label, start, time.perf_counter(),
                                           Path(what).name[:24]))
        setattr(owner, name, spanned)

    def show(self, title: str, start: float) -> None:
        print(title)
        for thread, label, begin, end, what in sorted(self.spans, key=lambda span: span[2]):
            print(f"  {1000 * (begin - start):7.1f} {1000 * (end - start):7.1f}  {thread[-14:]:14s} {label:40s} {what}")
        self.spans.clear()


def timeline(spans: Timeline, source: Store, root: Path, endpoint: str) -> None:
    """One plain upload of the packs push sends, then one push, each into a new bucket: their timelines."""
    import boto3

    pushing.push(source, Remote("capture", str(root / "capture")))  # the packs push sends (as remote_bench)
    packs = sorted((root / "capture" / "packs").glob("*.pack"))
    client = boto3.client("s3", endpoint_url=endpoint)
    make_bucket(endpoint, "timeline-plain")
    make_bucket(endpoint, "timeline-push")
    spans.wrap("plain upload", client, "upload_file")  # (its name: the bucket)
    spans.on, start = True, time.perf_counter()
    with ThreadPoolExecutor(max_workers=pushing.WORKERS) as pool:
        list(pool.map(lambda f: client.upload_file(str(f), "timeline-plain", f"plain/{f.name}"), packs))
    sent = sum(f.stat().st_size for f in packs) + sum(f.stat().st_size for f in (root / "capture" / "packs").glob(
        "*.ids"))
    spans.show(f"plain upload of the {len(packs)} packs, 8 threads: {1000 * (time.perf_counter() - start):.0f} ms "
               f"(the push moves {sent} bytes with its listings)", start)
    cpu, start = _cpu(), time.perf_counter()
    with collector_paused():
        pushing.push(source, Remote("timeline", "s3://timeline-push/bench"))
    spans.on = False
    spans.show(f"push: {1000 * (time.perf_counter() - start):.0f} ms, {1000 * (_cpu() - cpu):.0f} ms CPU", start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--pushes", type=int, default=7)
    parser.add_argument("--sealed", action="store_true", help="seal the store's pack first (sent as it is)")
    parser.add_argument("--link-mib", type=float, default=None,
                        help="push to a loopback S3 server through a link of this many MiB/s (default: a directory)")
    parser.add_argument("--refs", type=int, default=0, help="campaign refs the push moves (default: none)")
    parser.add_argument("--timeline", action="store_true", help="then the wall clock of one push (needs --link-mib)")
    args = parser.parse_args()
    if args.timeline and args.link_mib is None:
        parser.error("--timeline: needs --link-mib (the plain upload it is shown beside goes to S3)")
    spent: Counter[str] = Counter()
    lock = threading.Lock()
    present = set()
    for label, owner, name, _ in PHASES:
        if hasattr(owner, name):  # (a tree without it: the phase reads 0)
            setattr(owner, name, _timed(label, getattr(owner, name), spent))
            present.add(label)
    first: list[float] = []

    def noting(upload: Callable[..., None]) -> Callable[..., None]:
        def noted(*a: Any, **k: Any) -> None:
            with lock:
                first.append(time.perf_counter())
            upload(*a, **k)
        return noted

    for backend in (backends.DirectoryBackend, backends.S3Backend):
        backend.upload = noting(backend.upload)  # type: ignore[method-assign]
    spans = Timeline()
    phases = [(label, owner, name) for label, owner, name, _ in PHASES if owner is not backends.S3Backend]
    for label, owner, name in phases + REMOTE_OPS + WAITS:
        if hasattr(owner, name):  # (a tree without it: not shown)
            spans.wrap(label, owner, name, shows_name=owner is backends.S3Backend)
    runs: dict[str, list[float]] = {label: [] for label, *_ in PHASES}
    runs["whole push, process CPU"], runs["whole push (wall)"], runs["first upload at (wall)"] = [], [], []
    with tempfile.TemporaryDirectory(prefix="claw-push-phases-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        endpoint = None
        if args.link_mib is not None:
            os.environ.update(FAKE_CREDENTIALS)
            endpoint = stack.enter_context(throttled(stack.enter_context(s3_server()), args.link_mib * (1 << 20)))
            os.environ["AWS_ENDPOINT_URL"] = endpoint
        source = Store(root / "source")
        generate(source, args.objects, args.size)
        with source.batch():
            for i in range(args.refs):
                source.set_ref(f"campaigns/bench{i}", source.put_json({"head": i}))
        if args.sealed:
            source.close()
            source = Store(root / "source", create=False)
        for turn in range(max(1, args.pushes)):
            spent.clear()
            first.clear()
            remote = Remote(f"phases{turn}", str(root / f"remote{turn}"))
            if endpoint is not None:
                make_bucket(endpoint, f"phases{turn}")
                remote = Remote(f"phases{turn}", f"s3://phases{turn}/bench")
            cpu, start = _cpu(), time.perf_counter()
            with collector_paused():  # as `claw push` runs it
                pushing.push(source, remote)
            runs["whole push, process CPU"].append(_cpu() - cpu)
            runs["whole push (wall)"].append(time.perf_counter() - start)
            runs["first upload at (wall)"].append(min(first) - start)
            for label, _, _, inner in PHASES:
                runs[label].append(spent[label] - sum(spent[part] for part in inner) if label in present else 0.0)
            shutil.rmtree(root / f"remote{turn}", ignore_errors=True)
            shutil.rmtree(source.root / "remotes" / remote.name, ignore_errors=True)
        if args.timeline and endpoint is not None:
            timeline(spans, source, root, endpoint)
    how = "sealed: sent as it is" if args.sealed else "open: push makes packs"
    print(f"push of {args.objects} results ({3 * args.objects} objects, {args.objects} entries; the store's pack "
          f"{how}), {args.pushes} pushes: ms, median (lowest)")
    for label, values in runs.items():
        print(f"  {label:52s} {1000 * statistics.median(values):7.1f} ({1000 * min(values):.1f})")


if __name__ == "__main__":
    main()
