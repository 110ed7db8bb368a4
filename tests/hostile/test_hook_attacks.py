"""Python hooks run confined: real hooks, run by a real `claw build`, try to read the API key (through
/proc, the environment, /root, /etc/shadow), write host files, reach the network or exhaust memory.
Every attempt fails and the key appears nowhere the build wrote (checked through `claw query`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from clawstore.testing.standin import StandIn
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.judging import eval_profile, judge_reply
from tests.support.workspace import SECRET, Workspace

HOOKS = '''
import os, socket

SECRET_PREFIX = "sk-or-v1-"


def _found(text):
    return SECRET_PREFIX in text or SECRET_PREFIX[::-1] in text


def proc_environ(artifact):
    """The harness's environment through /proc: the parent, and every process visible."""
    seen = []
    for pid in [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            seen.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
        except OSError:
            pass
    return {"passed": not any(_found(s) for s in seen), "message": f"{len(seen)} environ files readable"}


def own_environment(artifact):
    return {"passed": not any(_found(v) for v in os.environ.values()), "message": ",".join(sorted(os.environ))}


def root_home(artifact):
    return {"passed": False, "message": "listing " + repr(os.listdir("/root"))}


def shadow(artifact):
    return open("/etc/shadow").read()[:4] == "root"


def write_host(artifact):
    open(os.environ["CLAW_TEST_MARKER"] if "CLAW_TEST_MARKER" in os.environ else MARKER, "w").write("x")
    return False


def write_case_dir(artifact):
    open("written-by-hook.txt", "w").write("x")
    return False


def network(artifact):
    socket.create_connection(("127.0.0.1", PORT), timeout=2)
    return False


def memory(artifact):
    hog = bytearray(4 * 1024 ** 3)
    return len(hog) == 0
'''


def _checks() -> list[dict]:
    names = ("proc_environ", "own_environment", "root_home", "shadow", "write_host", "write_case_dir",
             "network", "memory")
    return [{"check_id": name.replace("_", "-"), "python_hook": {"path": "hooks.py", "callable_name": name}}
            for name in names]


def test_hooks_cannot_reach_secrets_or_host_files(ws: Workspace, standin: StandIn, tmp_path: Path) -> None:  # noqa: F811
    marker = tmp_path / "host-marker.txt"
    port = int(standin.base_url.rsplit(":", 1)[1].split("/")[0])
    case_dir = ws.configs / "cases" / "alpha"
    (case_dir / "hooks.py").write_text(HOOKS.replace("MARKER", repr(str(marker))).replace("PORT", str(port)))
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=_checks()))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})
    standin.script("judge/j1", judge_reply(5))
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                     "--case", "alpha")
    assert "Traceback" not in build.stdout + build.stderr, build
    done = run_claw(ws.root, "query", "select check_id, outcome, message from checks where model_id = 'm1'",
                    "--format", "json")
    assert done.code == 0, done
    outcomes = {row["check_id"]: (row["outcome"], row["message"]) for row in json.loads(done.stdout)}
    assert outcomes["proc-environ"][0] == "passed", outcomes  # /proc shows only the hook's own processes
    assert outcomes["own-environment"][0] == "passed", outcomes
    # /root holds nothing but the way to the Python runtime, when that lives there (pyenv)
    runtime = {Path(p).parts[2] for p in {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)}
               if Path(p).parts[1:2] == ("root",) and len(Path(p).parts) > 2}
    assert outcomes["root-home"][0] == "error" or outcomes["root-home"][1] == f"listing {sorted(runtime)!r}", \
        outcomes["root-home"]
    for check in ("shadow", "write-host", "write-case-dir", "network", "memory"):
        assert outcomes[check][0] == "error", (check, outcomes[check])
    assert "MemoryError" in outcomes["memory"][1]
    assert not marker.exists() and not (case_dir / "written-by-hook.txt").exists()
    everything = run_claw(ws.root, "query", "select * from checks", "--format", "json")
    assert SECRET not in everything.stdout and SECRET[::-1] not in everything.stdout
    # the judge saw the check results: nothing secret went to the provider either
    assert SECRET not in json.dumps([r["body"] for r in standin.requests])
