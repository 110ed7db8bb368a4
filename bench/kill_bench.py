"""SIGKILL at random instants (issue 51): nothing a build reported finished is lost or paid for again.

A runs-only campaign (`--cases` cases x `--models` models) against the stand-in provider (`--latency`
per request, `--concurrency` at once) is built again and again, each build SIGKILLed at a random
instant (uniform in `--window` seconds after it started; `--kills` times), then built to the end.
Every build prints its progress as JSON lines; a node is *reported finished* once its `finished`
event is printed. After each kill the store is opened as the next command would open it, and the
table counts:

- lost: nodes reported finished whose record the store does not hold after that open;
- paid twice: requests for a node that an earlier build had reported finished;
- re-sent in flight: requests for nodes that were running, unreported, when the kill came (the only
  requests a kill may cost again: paid for, never answered to claw).

The baseline is the campaign's own size: the requests an uninterrupted build sends. Exit 1 if a node
was lost or paid twice.

Usage: python bench/kill_bench.py [--kills 20 --cases 800 --models 2 --latency 0.05 --concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import generate  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.testing.standin import StandIn, text  # noqa: E402

CAMPAIGN = ("--suite", "bench", "--run-profile", "bench")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cases", type=int, default=800)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--window", type=float, nargs=2, default=(0.8, 2.5), metavar=("FROM", "TO"))
    parser.add_argument("--seed", type=int, default=51)
    args = parser.parse_args()
    if args.kills < 1 or args.cases < 1 or args.models < 1:
        parser.error("--kills, --cases and --models: at least 1")
    rnd = random.Random(args.seed)
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-kill-") as tmp:
        root, store_dir = Path(tmp) / "ws", Path(tmp) / "store"
        generate(root, args.cases, args.models, concurrency=args.concurrency)
        env = {**os.environ, "OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(store_dir)}
        server.set_default(text("forty-two", latency=args.latency))
        reported: set[str] = set()
        lost = twice = in_flight = kills = 0
        started = time.monotonic()
        for _ in range(args.kills):
            before = len(server.requests)
            finished, killed = _build(root, env, rnd.uniform(*args.window))
            kills += killed
            sent = _nodes(server.requests[before:])
            twice += sum(1 for node in sent if node in reported)
            reported |= finished
            stored = _stored_runs(store_dir)
            lost += len(finished - stored)
            in_flight += sum(1 for node in sent if node not in finished and node not in stored)
        before = len(server.requests)
        _build(root, env, None)
        sent = _nodes(server.requests[before:])
        twice += sum(1 for node in sent if node in reported)
        nodes = args.cases * args.models
        per_node = Counter(_nodes(server.requests))
        elapsed = time.monotonic() - started
    print(f"{kills} SIGKILLs at random instants ({args.cases} cases x {args.models} models, "
          f"{args.latency:g} s latency, concurrency {args.concurrency}; {elapsed:.0f} s)")
    print("| fault | tried | reported finished | lost | paid twice | re-sent in flight | requests / baseline |")
    print("|---|---|---|---|---|---|---|")
    print(f"| SIGKILL mid-build | {kills} | {len(reported)} | {lost} | {twice} | {in_flight} | "
          f"{sum(per_node.values())} / {nodes} |")
    if len(per_node) != nodes:
        raise SystemExit(f"the last build left {nodes - len(per_node)} node(s) never requested")
    if lost or twice:
        raise SystemExit(f"broken promise: {lost} reported node(s) lost, {twice} request(s) paid twice")


def _build(root: Path, env: dict[str, str], kill_after: float | None) -> tuple[set[str], int]:
    """One `claw build`, SIGKILLed after `kill_after` s (None: to the end); the nodes it reported finished
    and whether the kill landed before it ended by itself."""
    proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", *CAMPAIGN, "--progress", "json",
                             "--output", "json"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    finished: set[str] = set()
    said: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "finished" and event.get("kind") == "run":
                    finished.add(event["node"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    killed = 0
    try:
        proc.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = 1
    reader.join()
    if not killed and proc.returncode != 0:
        raise SystemExit(f"claw build exited {proc.returncode}: {''.join(said[-5:])}")
    return finished, killed


def _nodes(requests: list[dict[str, Any]]) -> list[str]:
    """The run node each chat request to the stand-in was for (the bench's prompts name their case)."""
    nodes = []
    for request in requests:
        body = request.get("body")
        if isinstance(body, dict) and body.get("messages"):
            question = body["messages"][-1]["content"]
            case = int(question.split("Question number ", 1)[1].split(":", 1)[0])
            nodes.append(f"run/{body['model'].split('/', 1)[1]}/case_{case:05d}/0")
    return nodes


def _stored_runs(store_dir: Path) -> set[str]:
    """The run nodes the store holds a record of, opened as the next claw command opens it."""
    if not (store_dir / "CLAWSTORE").exists():
        return set()  # killed before it made the store
    store = Store(store_dir, create=False)
    store.adopt_orphans()
    found = set()
    for _, record_id in store.iter_actions():
        record = store.get_json(record_id) if record_id else None
        if isinstance(record, dict) and record.get("kind") == "run" and record.get("cacheable"):
            address = record.get("address") or {}
            found.add(f"run/{address.get('model_id')}/{address.get('case_id')}/{address.get('repetition')}")
    return found


if __name__ == "__main__":
    main()
