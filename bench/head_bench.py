"""Campaign heads in parts (clawstore/store/headdoc.py): what an edit costs to store and to push.

A campaign of CASES x MODELS runs is built against the stand-in and pushed to a directory remote; one
case is edited, the campaign built again and pushed again. Printed, each next to its baseline measured
in the same run:

- the bytes that second push sent, next to the campaign head as one compressed object (what every
  push after an edit sent before heads were stored in parts);
- writing and reading the head in parts, next to writing and reading the same nodes as one object.

Usage: python bench/head_bench.py [--cases 2500 --models 4]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zstandard  # noqa: E402

from bench._workspace import claw, generate  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.headdoc import read_head_doc, write_head  # noqa: E402
from clawstore.testing.standin import StandIn  # noqa: E402
from clawstore.values.canonical import canonical_json  # noqa: E402

BUILD = ("build", "--suite", "bench", "--run-profile", "bench", "--output", "json")


def _pushed_bytes(root: Path, remote: Path, env: dict[str, str]) -> int:
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "push", str(remote)], cwd=root,
                          env={**os.environ, **env}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"claw push exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    found = re.search(r"(\d+) bytes", proc.stdout)
    if found is None:
        raise SystemExit(f"claw push did not say what it sent: {proc.stdout.strip()[-300:]}")
    return int(found.group(1))


def _timed(work):  # noqa: ANN001, ANN202 - a thunk; (seconds, its result)
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=4)
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-bench-") as tmp:
        root, remote = Path(tmp) / "ws", Path(tmp) / "remote"
        generate(root, args.cases, args.models)
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(Path(tmp) / "store"), "XDG_CONFIG_HOME": str(Path(tmp) / "config")}
        claw(root, *BUILD, env=env)
        _pushed_bytes(root, remote, env)
        case = root / "configs" / "cases" / f"case_{args.cases // 2:05d}" / "test.yaml"
        case.write_text(case.read_text().replace("Question number", "Query number"))
        claw(root, *BUILD, env=env)
        sent = _pushed_bytes(root, remote, env)

        store = Store(Path(tmp) / "store", create=False)
        head_id = store.get_ref("campaigns/bench__bench__none")
        assert head_id is not None
        head = read_head_doc(store, head_id)
        one_object = len(zstandard.ZstdCompressor(level=store.level).compress(canonical_json(head)))
        print(f"{len(head['nodes'])} nodes; push after editing one case: {sent / 1e3:.1f} KB, the head as one "
              f"object {one_object / 1e3:.1f} KB: {sent / one_object:.3f}x")

        # Each layout written once into a store of its own (a second write would find its objects there).
        fields = {name: value for name, value in head.items() if name != "nodes"}
        in_parts, parted = _timed(lambda: write_head(Store(Path(tmp) / "parts"), fields, head["nodes"]))
        as_one, single = _timed(lambda: Store(Path(tmp) / "one").put_json(head))
        read_parts, _ = _timed(lambda: read_head_doc(Store(Path(tmp) / "parts"), parted))
        read_one, _ = _timed(lambda: Store(Path(tmp) / "one").get_json(single))
        print(f"write: in parts {in_parts:.3f} s, as one object {as_one:.3f} s: {in_parts / as_one:.2f}x; "
              f"read: in parts {read_parts:.3f} s, as one object {read_one:.3f} s: {read_parts / read_one:.2f}x")

if __name__ == "__main__":
    main()
