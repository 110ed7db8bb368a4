"""How the commands that move a whole store grow with it (issue 54, flat memory): the same campaign built at two sizes
against the stand-in, then for each size the peak memory and wall time of `claw archive export`, `claw archive import`
(into a new store), `claw push` and `claw pull` (a new store) to a directory remote, and the first `claw query
leaderboard` after the build (the manifest refresh); then the ratios of the larger to the smaller.

Usage: python bench/transfer_bench.py [--small 400 --large 2000 --models 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import generate  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402
from bench.growth_bench import CAMPAIGN, Measured, measure  # noqa: E402
from clawstore.testing.standin import StandIn  # noqa: E402

COMMANDS = ("query leaderboard (first)", "archive export", "archive import", "push", "pull (new store)")


def one_size(server: StandIn, tmp: Path, cases: int, models: int) -> dict[str, Measured]:
    """Build the campaign, then run each command once on its store (a copy where the command changes it)."""
    root, store = tmp / f"ws-{cases}", tmp / f"store-{cases}"
    generate(root, cases, models, evaluation=True, judge_repetitions=1)
    # The key an export signs with and a pull trusts: the bench's own, never the user's.
    env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
           "CLAW_STORE": str(store), "XDG_CONFIG_HOME": str(tmp / "config"), "CLAW_PROGRESS": "none"}
    measure(root, ("build", *CAMPAIGN), env)
    found = {}
    fresh = tmp / "fresh"  # a store without its manifest: the query refreshes it as after a build
    shutil.copytree(store, fresh, symlinks=True)
    shutil.rmtree(fresh / "manifest", ignore_errors=True)
    found["query leaderboard (first)"] = measure(root, ("query", "leaderboard"), {**env, "CLAW_STORE": str(fresh)})
    shutil.rmtree(fresh)
    archive = tmp / "campaign.claw"
    found["archive export"] = measure(root, ("archive", "export", *CAMPAIGN, "-o", str(archive)), env)
    found["archive import"] = measure(root, ("archive", "import", str(archive), "--store", str(tmp / "imported")), env)
    shutil.rmtree(tmp / "imported")
    archive.unlink()
    remote = tmp / "remote"
    remote.mkdir()
    measure(root, ("remote", "add", "team", str(remote)), env)
    found["push"] = measure(root, ("push", "team"), env)
    found["pull (new store)"] = measure(root, ("pull", "team"), {**env, "CLAW_STORE": str(tmp / "pulled")})
    for path in (remote, tmp / "pulled", root / "claw.yaml"):
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    print(f"{cases} x {models}: measured")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=400, help="cases of the smaller campaign")
    parser.add_argument("--large", type=int, default=2000, help="cases of the larger campaign")
    parser.add_argument("--models", type=int, default=5)
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-transfer-growth-") as scratch:
        server.script("judge/j", judge_reply(7))
        small = one_size(server, Path(scratch), args.small, args.models)
        large = one_size(server, Path(scratch), args.large, args.models)
    print(f"{'command':28} {'small wall':>10} {'large wall':>10} {'small RSS':>10} {'large RSS':>10} {'ratio':>6}")
    for name in COMMANDS:
        a, b = small[name], large[name]
        print(f"{name:28} {a.wall:>9.2f}s {b.wall:>9.2f}s {a.max_rss / 2**20:>7.0f} MB {b.max_rss / 2**20:>7.0f} MB "
              f"{b.max_rss / a.max_rss:>6.2f}")


if __name__ == "__main__":
    main()
