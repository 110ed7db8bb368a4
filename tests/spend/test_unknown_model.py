"""A model the provider no longer knows (HTTP 404, no usage) under `claw build --max-cost`: the run's cost is unknown
(`?`, never 0), so the limit cannot be kept and the build starts nothing more. Its stop says which run's cost is
unknown and why: before session 78 it said only "a cost spent is unknown", the run and the 404 left for the user to
find among the failures. A real `claw build` against the stand-in on 127.0.0.1 (the build before it, which prepares,
and the query reading what it left, in the test's own process)."""

from __future__ import annotations

import json
import re

from clawstore.testing.standin import StandIn, error
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.prepared import run_here
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")


def test_a_404_for_a_model_stops_a_max_cost_build_naming_the_run_the_endpoint_and_the_model(
        ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    ws.run_profile(concurrency=1)
    # (prepares, in this process: m2's costs reported, its plan has a price from them)
    assert run_here(ws.root, "build", *CAMPAIGN).code == 0
    ws.case("gamma", "Name a shape.")
    ws.case("delta", "Name a tree.")
    standin.script("vendor/m2", error(404, "No endpoints found for vendor/m2."))  # (retired: no usage in the reply)
    asked = len(standin.requests)
    built = run_claw(ws.root, *("build", *CAMPAIGN, "--max-cost", "0.5", "--output", "json"))
    assert built.code == 1 and "Traceback" not in built.stderr, built
    stopped = json.loads(built.stdout)["stopped"]
    assert stopped.startswith("--max-cost 0.5 USD cannot be kept: a cost spent is unknown (spent ≥"), stopped
    first = re.search(r"the rest was not started: nothing was sent for it; the first unknown: run/m2/(\w+)/0 "
                      r"\(model vendor/m2\), http_error: HTTP 404 from (\S+): No endpoints found for vendor/m2\.$",
                      stopped)
    assert first is not None, stopped
    assert first[2] == f"{standin.base_url}/chat/completions", stopped
    sent = [r["model"] for r in standin.requests[asked:]]
    assert sent.count("vendor/m2") == 1, sent  # (its other new run never asked: nothing more was sent)
    runs = run_here(ws.root, "query", "select model_id, case_id, status, cost_usd, cost_source from runs "
                                      "where model_id = 'm2' and case_id in ('gamma', 'delta')", "--format", "json")
    assert json.loads(runs.stdout) == [{"model_id": "m2", "case_id": first[1], "status": "provider_error",
                                        "cost_usd": None, "cost_source": "unknown"}], runs.stdout
    text = run_claw(ws.root, "build", *CAMPAIGN, "--max-cost", "0.5")  # (the text summary: the 404 is not "priced")
    line = next(line for line in text.stdout.splitlines() if line.startswith("build "))
    assert "priced" not in line and "unknown" in line, line
