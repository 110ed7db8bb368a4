"""What verifying an import costs: an archive of N runs imported with and without the trust checks.

    python bench/verify_bench.py [--runs 10000] [--repeat 3] [--dir /path/on/the/store/fs]

A campaign of `--runs` runs is written through the real store API (each run: input document, answer,
sandbox tree, artifact, record, action-cache entry; a campaign head; the shapes of
bench/archive_bench.py) and exported (signed with this user's key). Then, interleaved `--repeat`
times, `import_archive` into an empty store:
- checked: what every import does — every object's frame decompressed and hashed, every action-cache
  entry verified against its input document (record key, named input, the document present and
  verified), and the manifest's ed25519 signature checked against the trust list;
- baseline: the same import with the entry verification and the signature check switched off (every
  object is still hashed: that is the archive format's own check).
Prints the medians and their ratio (target: checked <= 1.2x baseline).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.archive_bench import CAMPAIGN, write_head, write_run  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.reach import head_closure  # noqa: E402
from clawstore.store.services import archive, archive_import  # noqa: E402


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """The baseline: no entry verification, no signature check (everything else as in a real import)."""
    saved = archive_import._check_entries, archive_import._signer
    archive_import._check_entries = lambda *args: None  # type: ignore[assignment]
    archive_import._signer = lambda *args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        archive_import._check_entries, archive_import._signer = saved  # type: ignore[assignment]


def timed_import(base: Path, path: Path, checked: bool) -> float:
    target = base / "target"
    shutil.rmtree(target, ignore_errors=True)
    store = Store(target)
    began = time.perf_counter()
    if checked:
        report = archive_import.import_archive(store, path)
    else:
        with unchecked():
            report = archive_import.import_archive(store, path, trusts=lambda signer: True)
    elapsed = time.perf_counter() - began
    assert report.actions_written > 0 and report.kept_apart is None
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="verify-bench-") as tmp:
        base = Path(tmp)
        origin = Store(base / "origin")
        began = time.perf_counter()
        with origin.batch():
            runs = [write_run(origin, i, None, None) for i in range(args.runs)]
        head = write_head(origin, runs)
        objects = head_closure(origin, head).objects
        path = base / "campaign.claw"
        summary = archive.write_archive(origin, path, {"refs": {f"campaigns/{CAMPAIGN}": head}, "head": head,
                                                       "actions": {k: r for k, r, _ in runs}}, objects)
        print(f"setup: {args.runs} runs, {summary.objects} objects, {summary.size / 2**20:.1f} MiB archive "
              f"({time.perf_counter() - began:.1f} s)")
        checked, baseline = [], []
        for _ in range(args.repeat):
            baseline.append(timed_import(base, path, checked=False))
            checked.append(timed_import(base, path, checked=True))
        plain, full = statistics.median(baseline), statistics.median(checked)
        print(f"import without entry and signature checks: {plain:.3f} s (median of {args.repeat})")
        print(f"import with every check:                   {full:.3f} s (median of {args.repeat})")
        print(f"verification cost: {full / plain:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
