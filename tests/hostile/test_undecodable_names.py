"""A model's shell writes a file whose name is not UTF-8 (`caf\\xe9.txt` in Latin-1). Storing the run's
sandbox refused the name, and the run, already paid for, failed; every build paid for it again. The
file is kept, its name escaped (`caf\\\\xe9.txt`). Real `claw` processes, the stand-in server, bubblewrap."""

from __future__ import annotations

import json
from pathlib import Path

from clawstore.store import Store
from clawstore.testing.standin import StandIn, text, tool_call
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

BUILD = ("build", "--suite", "main", "--run-profile", "rp")


def test_a_sandbox_file_named_in_bytes_that_are_not_utf8_is_kept_and_the_run_too(
        ws: Workspace, standin: StandIn, env: dict[str, str]) -> None:  # noqa: F811
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(context={"llm_probe": {"tools": ["exec_shell"]}}))
    # m1's own script: a rule for every model hands its one tool call to whichever model asks first, and m2's run,
    # started beside m1's, asks first under load (m1's tree was then empty).
    shell = {"command": "printf 'latin-1 name' > \"caf$(printf '\\351').txt\""}
    standin.script("vendor/m1", tool_call("exec_shell", shell), text("done"), match="2 + 2")
    first = run_claw(ws.root, *BUILD)
    assert first.code == 0 and "0 failed" in first.stdout, first
    sent = len(standin.requests)
    query = run_claw(ws.root, "query", "select sandbox_id from runs where case_id = 'alpha' and model_id = 'm1'",
                     "--format", "json")
    [row] = json.loads(query.stdout)
    store = Store(Path(env["CLAW_STORE"]))
    files = {e.path: e for e in store.read_tree(row["sandbox_id"])}
    # (what the shell answered the model, so that a failure says whether the tool ran: it failed once under load)
    answered = [m.get("content") for r in standin.requests for m in r["messages"] or [] if m.get("role") == "tool"]
    assert "work/caf\\xe9.txt" in files, (sorted(files), answered)
    assert store.get_bytes(str(files["work/caf\\xe9.txt"].object)) == b"latin-1 name"
    again = run_claw(ws.root, *BUILD)
    assert again.code == 0 and len(standin.requests) == sent, again  # kept: not paid for again
