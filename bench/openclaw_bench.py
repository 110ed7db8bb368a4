"""openclaw runner benchmark (issue 8): the harness's own overhead per run.

For N single-turn runs with the real engine and the real OpenClaw CLI (against the stand-in model
server), reports per run: total wall time, time inside containers (the validate step and the turn,
each a `docker run` from CLI start to exit), and the harness overhead = total − container time
(workspace checkout, config, env-file, evidence capture into the store). Next to it: the start time
of a trivial container (`docker run --rm <image> true`, same flags), measured alone in the same run.

Usage: python bench/openclaw_bench.py [--runs 3]
Uses $CLAW_TEST_DOCKER_HOST when set, else starts a private dockerd (root, docker.io installed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.runners.openclaw import (  # noqa: E402
    OpenClawSpec,
    agent_workspace_tree,
    resolve_image_digest,
    run_openclaw,
)
from clawstore.runners.openclaw.container import EngineSettings, container_start_seconds  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.testing.standin import StandIn, text, tool_call  # noqa: E402
from tests.openclaw.engine import start_engine  # noqa: E402

MODEL = "bench/model"
KEY_ENV = "CLAW_BENCH_OPENCLAW_KEY"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claw-oc-bench-") as tmp:
        root = Path(tmp)
        engine, reason = start_engine(root / "dockerd")
        if engine is None:
            print(f"openclaw bench: no engine ({reason})", file=sys.stderr)
            return 1
        try:
            return measure(engine.host, engine.image, root, args.runs)
        finally:
            engine.stop()


def measure(host: str, image: str, root: Path, runs: int) -> int:
    os.environ.update({"DOCKER_HOST": host, "CLAW_OPENCLAW_NETWORK": "host", KEY_ENV: "bench-key-0123456789"})
    agent_dir = root / "agent"
    (agent_dir / "workspace").mkdir(parents=True)
    (agent_dir / "workspace" / "AGENTS.md").write_text("# Agents\n")
    store = Store(root / "store")
    settings = EngineSettings.from_env("docker")
    starts = [container_start_seconds(settings, image) for _ in range(3)]
    rows = []
    with StandIn() as standin:
        for index in range(runs):
            standin.script(MODEL, tool_call("write", {"path": "report.md", "content": f"# Report {index}\n"}),
                           text("done"))
            spec = OpenClawSpec(
                case_id=f"bench_{index}", agent_id="bench_agent", agent_dir=agent_dir,
                agent={"schema_version": 1, "agent_id": "bench_agent", "title": "Bench"},
                agent_tree=agent_workspace_tree(store, agent_dir), requested_model=MODEL, image=image,
                image_digest=resolve_image_digest(image), timeout_seconds=300,
                messages=[{"role": "user", "content": "Write report.md"}], provider_base_url=standin.base_url,
                api_key_env=KEY_ENV)
            began = time.monotonic()
            outcome = run_openclaw(spec, store, root)
            total = time.monotonic() - began
            metadata = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]
            inside, started = metadata["container_seconds"], len(metadata["invocations"])
            rows.append((outcome.status, total, inside, started))
            print(f"run {index + 1}: {outcome.status:9s} total {total:6.2f} s   in containers {inside:6.2f} s   "
                  f"harness overhead {total - inside:5.3f} s   containers {started}")
    start = statistics.median(starts)
    overhead = statistics.median(total - inside for _s, total, inside, _n in rows)
    # validate + one turn, or the turn alone when an identical config's validation is remembered (validated.py)
    invocations = statistics.median(n for *_r, n in rows)
    print(f"container start alone (docker run --rm true, median of 3): {start:.3f} s")
    print(f"harness overhead per run (median of {runs}): {overhead:.3f} s "
          f"= {overhead / start:.2f}x one container start; each run starts {invocations:g} containers "
          f"(median; {invocations * start:.2f} s of bare start time inside the container figure)")
    return 0 if all(status == "success" for status, *_r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
