"""Batch benchmark (issue 55): a judged campaign judged through the provider's Batch API (the stand-in's).

1. The same campaign (N cases x 3 judge repetitions) judged one by one and by batch, in two stores: the
   stand-in's counts (judge requests sent one by one, batch files, lines and bytes per file against the
   provider's limits), the judge spend by pricing (the batch's: priced with the declared `batch: 0.5`;
   one by one: the same tokens at full price), and the judgements compared by address (object ids).
2. SIGKILL of `build --batch --wait` at K random instants between submission and collection, each in a
   small store of its own, then a build again: lines sent twice, judgements committed more than once
   (build logs), fsck.
3. An expired batch: its unanswered lines are sent again once.
4. Two concurrent `build --batch --wait`: each judgement submitted once.

Usage: python bench/batch_bench.py [--cases 2000 --kills 10 --kill-cases 20]
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
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from bench._workspace import claw, generate  # noqa: E402
from clawstore.providers.batch_api import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE  # noqa: E402
from clawstore.store import RecordDoc, Store  # noqa: E402
from clawstore.store.buildlogs import builds_dir  # noqa: E402
from clawstore.store.services.fsck import fsck  # noqa: E402
from clawstore.testing.standin import StandIn, text  # noqa: E402

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
PRICES = {"input": 2.0, "output": 8.0, "batch": 0.5}  # USD per 1M tokens; batch: the provider's discount
JUDGED = ("build", "--suite", "bench", "--run-profile", "bench", "--evaluation-profile", "ev", "--output", "json")


def judge_reply(score: float) -> dict[str, Any]:
    reply = text(json.dumps({"summary": "ok", "overall": {"evidence": ["e"], "score": score},
                             "dimensions": {d: {"evidence": ["e"], "score": score} for d in DIMS}}))
    reply["usage"] = {"cost": None}  # as OpenAI's batch output: tokens, no cost (priced from `pricing`)
    return reply


def workspace(root: Path, cases: int) -> None:
    generate(root, cases, 1, evaluation=True, judge_repetitions=3)
    profile = root / "configs" / "evaluation_profiles" / "ev.yaml"
    doc = yaml.safe_load(profile.read_text())
    doc["judges"][0]["pricing"] = PRICES
    profile.write_text(yaml.safe_dump(doc))


def judge_records(store_dir: Path) -> dict[str, RecordDoc]:
    """{address as JSON: record} of every judgement in the store."""
    store = Store(store_dir, create=False)
    found = {}
    for key, _ in store.iter_actions():
        record = store.get_action(key)
        if record and record.kind == "judge":
            found[json.dumps(record.address, sort_keys=True)] = record
    return found


def scores(store_dir: Path, record: RecordDoc) -> bytes | None:
    """The canonical bytes of a judgement's scores (what the results aggregate)."""
    from clawstore.values.canonical import canonical_json

    judgement = Store(store_dir, create=False).get_json(record.outputs["judgement"])
    return None if judgement.get("scores") is None else canonical_json(judgement["scores"])


def full_price(record: RecordDoc) -> float:
    metrics = record.metrics
    return (metrics.input_tokens * PRICES["input"] + metrics.output_tokens * PRICES["output"]) / 1e6


def executed_twice(store_dir: Path) -> int:
    """Judgement keys more than one build log says it executed."""
    seen: Counter[str] = Counter()
    for path in builds_dir(store_dir).glob("*.json"):
        for node in json.loads(path.read_text()).get("nodes", []):
            if node.get("kind") == "judge" and node.get("action") == "exec":
                seen[node["key"]] += 1
    return sum(1 for n in seen.values() if n > 1)


def sync_judge_requests(server: StandIn) -> int:
    return sum(1 for r in server.requests if r["model"] == "judge/j")


def spend_and_scores(root: Path, env: dict[str, str], server: StandIn, tmp: Path) -> None:
    sync_store, batch_store = tmp / "sync", tmp / "batch"
    started = time.perf_counter()
    claw(root, *JUDGED, env={**env, "CLAW_STORE": str(sync_store)})
    sync_seconds = time.perf_counter() - started
    sync_sent = sync_judge_requests(server)
    server.reset()
    server.script("judge/j", judge_reply(7))
    started = time.perf_counter()
    claw(root, *JUDGED, "--batch", "--wait", env={**env, "CLAW_STORE": str(batch_store)})
    batch_seconds = time.perf_counter() - started
    stats = server.batch_stats()
    one_by_one, batched = judge_records(sync_store), judge_records(batch_store)
    assert one_by_one.keys() == batched.keys(), "the two stores judged different nodes"
    same = sum(1 for a, r in one_by_one.items()
               if scores(sync_store, r) == scores(batch_store, batched[a]) is not None)
    full = sum(full_price(r) for r in one_by_one.values())
    spent = sum(r.metrics.cost_usd for r in batched.values())
    sources = Counter(r.summary["batch"]["cost_source"] for r in batched.values())
    within = all(n <= MAX_REQUESTS_PER_FILE for n in stats["file_lines"]) and all(
        b <= MAX_BYTES_PER_FILE for b in stats["file_bytes"])
    print(f"one by one: {sync_sent} judge requests in {sync_seconds:.1f} s (runs included); "
          f"by batch: {sync_judge_requests(server)} judge requests one by one, {stats['files']} batch file(s) of "
          f"{max(stats['file_lines'])} lines / {max(stats['file_bytes']) / 1e6:.1f} MB at most "
          f"(within limits: {within}), {stats['lines']} lines, in {batch_seconds:.1f} s")
    print(f"judge spend by pricing: one by one {full:.6f} USD, by batch {spent:.6f} USD "
          f"(ratio {spent / full:.3f}, target <= 0.55; cost sources {dict(sources)})")
    print(f"judgements whose scores are byte-identical to the one-by-one path's: {same}/{len(one_by_one)} "
          "(their usage differs only by the priced cost)")
    assert sync_judge_requests(server) == 0 and within and spent <= 0.55 * full and same == len(one_by_one)


def kills(root: Path, env: dict[str, str], server: StandIn, tmp: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    resent = twice = unclean = missing = 0
    for index in range(count):
        store_dir = tmp / f"kill-{index}"
        run_env = {**os.environ, **env, "CLAW_STORE": str(store_dir)}
        claw(root, "build", "--suite", "bench", "--run-profile", "bench", env=run_env)  # the runs, first
        server.reset()
        server.script("judge/j", judge_reply(7))
        delay = 0.5
        server.batch_settings(delay=delay)
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", *JUDGED, "--batch", "--wait"], cwd=root,
                                env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.batch_stats()["batches"] == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, delay + 0.4))  # between submission and the end of collection
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        claw(root, *JUDGED, "--batch", "--wait", env=run_env)
        stats = server.batch_stats()
        judged = judge_records(store_dir)
        resent += stats["lines"] - len(set(stats["custom_ids"]))
        missing += len(set(stats["custom_ids"])) - len(judged)
        twice += executed_twice(store_dir)
        unclean += not fsck(Store(store_dir, create=False)).clean
    print(f"SIGKILL at {count} random instants between submission and collection: {resent} line(s) sent again, "
          f"{missing} judgement(s) lost, {twice} committed twice, {unclean} store(s) failing fsck")
    assert resent == missing == twice == unclean == 0


def expiry(root: Path, env: dict[str, str], server: StandIn, tmp: Path) -> None:
    store_dir = tmp / "expiry"
    run_env = {**env, "CLAW_STORE": str(store_dir)}
    claw(root, "build", "--suite", "bench", "--run-profile", "bench", env=run_env)
    server.reset()
    server.script("judge/j", judge_reply(7))
    server.batch_settings(expire_next=1, expire_keep=3)
    claw(root, *JUDGED, "--batch", "--wait", env=run_env)
    stats = server.batch_stats()
    sent = Counter(stats["custom_ids"])
    print(f"an expired batch: {stats['batches']} batches, {sum(1 for n in sent.values() if n == 2)} line(s) sent "
          f"again once, {sum(1 for n in sent.values() if n > 2)} more than once")
    assert all(n <= 2 for n in sent.values()) and len(judge_records(store_dir)) == len(sent)


def concurrent(root: Path, env: dict[str, str], server: StandIn, tmp: Path) -> None:
    store_dir = tmp / "concurrent"
    run_env = {**os.environ, **env, "CLAW_STORE": str(store_dir)}
    claw(root, "build", "--suite", "bench", "--run-profile", "bench", env=run_env)
    server.reset()
    server.script("judge/j", judge_reply(7))
    server.batch_settings(delay=0.3)
    procs = [subprocess.Popen([sys.executable, "-m", "clawstore.cli", *JUDGED, "--batch", "--wait"], cwd=root,
                              env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    codes = [p.wait(timeout=600) for p in procs]
    stats = server.batch_stats()
    print(f"two concurrent builds: exits {codes}, {stats['batches']} batch(es), {stats['lines']} lines for "
          f"{len(set(stats['custom_ids']))} judgements")
    assert codes == [0, 0] and stats["lines"] == len(set(stats["custom_ids"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--kill-cases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=55)
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-batch-bench-") as name:
        tmp = Path(name)
        server.script("judge/j", judge_reply(7))
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_BATCH_POLL_S": "0.2"}
        big, small = tmp / "ws", tmp / "ws-small"
        workspace(big, args.cases)
        workspace(small, args.kill_cases)
        spend_and_scores(big, env, server, tmp)
        kills(small, env, server, tmp, args.kills, args.seed)
        expiry(small, env, server, tmp)
        concurrent(small, env, server, tmp)


if __name__ == "__main__":
    main()
