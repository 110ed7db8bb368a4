"""`claw demo`: the main job end to end on the shipped example campaign, with no key and no network.

The packaged example configs (`clawstore/demo/configs`, checked against their list as shipped first:
demo/examples.py; a checkout's `configs/` is a copy of them that is the user's) are copied into a scratch
workspace; the stand-in provider (clawstore/testing/standin.py) answers on 127.0.0.1
with simulated replies; each step runs the real `claw` command line as a user would type it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clawstore.errors import ClawError, StoreError, UsageError, utf8_argument

CAMPAIGN = ("--suite", "llm_probe_smoke", "--run-profile", "standard", "--evaluation-profile", "default_judge")
EDITED_CASE = "configs/cases/arithmetic_plain/test.yaml"
PROMPT_BEFORE, PROMPT_AFTER = "What is 17 * 23?", "What is 17 * 24?"
QUERY = ("select model_id, case_id, round(final_score, 2) as score, passed from results "
         "where campaign_id = 'llm_probe_smoke__standard__default_judge' order by 1, 2")
# Variables of the caller that would send the demo elsewhere or into another store.
CLEARED_ENV = ("CLAW_STORE", "OPENROUTER_BASE_URL", "OPENROUTER_API_KEY")


class DemoError(ClawError):
    exit_code = 1


@dataclass
class Demo:
    workspace: Path
    env: dict[str, str]
    requests: Callable[[], int]
    echo: Callable[[str], None]

    def claw(self, *args: str, expect: int = 0) -> str:
        shown = " ".join(_quote(a) for a in args)
        self.echo(f"\n$ claw {shown}")
        proc = subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=self.workspace, env=self.env,
                              capture_output=True, text=True)
        if proc.stdout.strip():
            self.echo(proc.stdout.rstrip("\n"))
        # Per-node progress lines ("[runs 1/6] ...") are left out: the table says the same.
        notes = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("[")]
        if notes:
            self.echo("\n".join(notes))
        if proc.returncode != expect:
            raise DemoError(f"demo step `claw {shown}` exited {proc.returncode} (expected {expect})")
        return proc.stdout

    def build(self, promise: str) -> int:
        before = self.requests()
        self.claw("build", *CAMPAIGN)
        sent = self.requests() - before
        self.echo(f"# simulated provider requests during this build: {sent} ({promise})")
        return sent


def _quote(arg: str) -> str:
    return f'"{arg}"' if any(c in arg for c in " *'") else arg


def run_demo(workdir: Path | None, keep: bool, echo: Callable[[str], None]) -> None:
    """Build, rebuild (no request), edit + explain + rebuild, report and query; raise DemoError if a step fails."""
    from clawstore.demo import examples  # (here: `python3 -m clawstore.demo.examples` runs it as __main__)
    from clawstore.testing.simulated import script_simulated_provider
    from clawstore.testing.standin import StandIn

    started = time.monotonic()
    changed = examples.changes()
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise DemoError(f"the demo's packaged example configs under {examples.EXAMPLE_CONFIGS} are not as "
                        f"shipped ({shown}; the list: {examples.LISTING.name}); claw demo runs them as "
                        "shipped: restore them (git checkout clawstore/demo/configs, or reinstall claw) and "
                        "edit a workspace's own configs/ instead")
    if workdir is not None:  # (it built for seconds, then its query step failed: exit 1, before session 72)
        utf8_argument(str(workdir.absolute()), "--dir", "; the demo's `claw query` step opens the store with DuckDB, "
                      "which takes UTF-8 paths only")
    if workdir is not None and workdir.exists() and any(workdir.iterdir()):
        raise UsageError(f"--dir {workdir}: not an empty directory")  # (bad usage: exit 2, it was 1)
    workspace = (workdir or Path(tempfile.mkdtemp(prefix="claw-demo-"))).absolute()
    workspace.mkdir(parents=True, exist_ok=True)
    try:
        try:
            shutil.copytree(examples.EXAMPLE_CONFIGS, workspace / "configs")
        except shutil.Error as exc:  # (its text: every file's error in a list, 2,000 characters on a full disk)
            _source, target, why = exc.args[0][0]
            raise StoreError(f"cannot write the demo's configs into {workspace}: {target}: "
                             f"{why.split(': ', 1)[0].split('] ', 1)[-1]}") from None
        with StandIn() as server:
            script_simulated_provider(server)
            port, base_url = server.port, server.base_url
            env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
            env.update(OPENROUTER_BASE_URL=server.base_url)  # (a server other than OpenRouter: no key)
            echo(f"claw demo: the example campaign in a scratch workspace {workspace}")
            echo(f"The provider is the built-in stand-in on {server.base_url}: every reply, token count and cost "
                 "below is SIMULATED (no key, no network).")
            demo = Demo(workspace, env, lambda: len(server.requests), echo)
            _steps(demo)
        echo(f"\nclaw demo: done in {time.monotonic() - started:.1f}s.")
        if keep or workdir is not None:
            # The provider's URL is part of every run's key: the same port, and what the demo built is reused.
            echo(f"The workspace stays in {workspace}; to rerun a step there against the simulated provider "
                 "(on the demo's port, so what it built is reused):\n"
                 f"  claw standin --port {port} &\n"
                 f"  export OPENROUTER_BASE_URL={base_url}")
        else:
            echo(f"The scratch workspace {workspace} is removed now (--keep keeps it, --dir DIR builds in DIR).")
        echo("The same commands run in your own checkout: see the README's tour (`claw standin` starts this "
             "stand-in provider for it; with a real key, export OPENROUTER_API_KEY=...).")
    finally:
        if not keep and workdir is None:
            shutil.rmtree(workspace, ignore_errors=True)


def _steps(demo: Demo) -> None:
    demo.claw("validate")
    demo.build("the first build runs every node: 6 runs and 18 judgements")
    if demo.build("the same campaign again: everything is reused") != 0:
        raise DemoError("the no-op rebuild sent requests to the provider")
    case = demo.workspace / EDITED_CASE
    case.write_text(case.read_text(encoding="utf-8").replace(PROMPT_BEFORE, PROMPT_AFTER), encoding="utf-8")
    demo.echo(f"\n# edit {EDITED_CASE}: '{PROMPT_BEFORE}' -> '{PROMPT_AFTER}'")
    explained = demo.claw("explain", *CAMPAIGN)
    if "input.messages[1].content" not in explained:
        raise DemoError("claw explain did not name the edited prompt")
    demo.build("only the edited case's 2 runs and their 6 judgements")
    demo.claw("report", *CAMPAIGN, "--no-chart")
    demo.claw("query", QUERY)
