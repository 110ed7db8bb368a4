"""Evaluation benchmark (issue 5): a no-op `claw build` with an evaluation profile over 2,000 runs x 3 judge
repetitions, next to the no-op build of the same runs without the evaluation profile (subprocesses, best of 3:
`--rounds`). Target: <= 2x.

Usage: python bench/eval_bench.py [--cases 500 --models 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import best_of, claw, generate  # noqa: E402
from clawstore.testing.standin import StandIn, text  # noqa: E402

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")


def judge_reply(score: float) -> dict:
    return text(json.dumps({"summary": "ok", "overall": {"evidence": ["e"], "score": score},
                            "dimensions": {d: {"evidence": ["e"], "score": score} for d in DIMS}}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="no-op builds of each kind (the best is printed)")
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-eval-bench-") as tmp:
        server.script("judge/j", judge_reply(7))
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(Path(tmp) / "store")}
        root = Path(tmp) / "ws"
        generate(root, args.cases, args.models, evaluation=True, judge_repetitions=3)
        runs = args.cases * args.models
        with_eval = ("build", "--suite", "bench", "--run-profile", "bench", "--evaluation-profile", "ev",
                     "--output", "json")
        without = ("build", "--suite", "bench", "--run-profile", "bench", "--output", "json")
        first = claw(root, *with_eval, env=env)
        claw(root, *without, env=env)  # same runs, its own campaign head
        sent = len(server.requests)
        print(f"initial build: {runs} runs + {runs * 3} judge requests + checks and results in {first:.1f} s")
        noop_eval = best_of(args.rounds, lambda: claw(root, *with_eval, env=env))
        noop_runs = best_of(args.rounds, lambda: claw(root, *without, env=env))
        assert len(server.requests) == sent, "a no-op build sent requests"
        print(f"no-op build with evaluation: {noop_eval:.2f} s   without: {noop_runs:.2f} s   "
              f"ratio {noop_eval / noop_runs:.2f} (target <= 2.0)")


if __name__ == "__main__":
    main()
