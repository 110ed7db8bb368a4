"""Python hooks in real child processes: gate, calling convention, results, timeout, network."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.evaluate import evaluate_checks, network_isolation_prefix

from .helpers import artifact, final

ALLOW = {"allow_local_python_hooks": True}
ALLOW_NET = {"allow_local_python_hooks": True, "network_access": "allow"}


def write_case(tmp_path: Path, source: str, name: str = "hook.py") -> Path:
    case = tmp_path / "case"
    (case / "hooks").mkdir(parents=True, exist_ok=True)
    (case / "hooks" / name).write_text(source)
    (case / "test.yaml").write_text("schema_version: 1\n")
    return case / "test.yaml"


def run_hook(src: Path, callable_name: str, security: dict | None, art: dict | None = None, **kw) -> dict:
    check = {"check_id": "hook", "description": "custom", "dimensions": ["task"],
             "python_hook": {"path": "hooks/hook.py", "callable_name": callable_name}}
    res = evaluate_checks([check], art or artifact(trace=[final("answer 42")]), case_source_path=src,
                          security=security, **kw)
    return res["checks"][0]


HOOK_SOURCE = '''
import json, os

def no_args():
    return True

def one_arg(artifact):
    finals = [e["content"] for e in artifact["trace"] if e["event_type"] == "final_output"]
    return {"passed": "42" in finals[-1], "message": "looked for 42", "outputs": {"n": len(finals)},
            "metadata": {"runner": artifact["identity"]["runner_type"]}}

def two_args(artifact, context):
    print("noise on stdout must not break the reply")
    return {"passed": True, "outputs": {"context": context, "cwd": os.getcwd()}}

def returns_false(artifact):
    return False

def extra_keys(artifact):
    return {"passed": True, "score": 3}

def wrong_type(artifact):
    return 1

def raises(artifact):
    raise RuntimeError("boom")

def env_probe(artifact):
    return {"passed": True, "outputs": {"keys": sorted(k for k in os.environ if "API_KEY" in k)}}
'''


def test_hooks_are_disabled_by_default(tmp_path: Path) -> None:
    src = write_case(tmp_path, HOOK_SOURCE)
    res = run_hook(src, "no_args", None)
    assert res["outcome"] == "error"
    assert "security_policy.allow_local_python_hooks: true" in res["message"]
    # import_path hooks are gated too (the reference let them through)
    check = {"check_id": "imp", "python_hook": {"import_path": "json", "callable_name": "dumps"}}
    imp = evaluate_checks([check], artifact(), security={"allow_local_python_hooks": False})["checks"][0]
    assert imp["outcome"] == "error" and "allow_local_python_hooks" in imp["message"]


def test_calling_convention_and_results(tmp_path: Path) -> None:
    src = write_case(tmp_path, HOOK_SOURCE)
    assert run_hook(src, "no_args", ALLOW)["outcome"] == "passed"
    one = run_hook(src, "one_arg", ALLOW)
    assert one["outcome"] == "passed" and one["message"] == "looked for 42"
    assert one["outputs"]["n"] == 1 and one["metadata"] == {"runner": "llm_probe"}
    assert one["kind"] == "python_hook" and one["source"] == "python_hook" and one["dimensions"] == ["task"]
    two = run_hook(src, "two_args", ALLOW)
    assert two["outcome"] == "passed"
    assert two["outputs"]["context"] == {"check_id": "hook", "description": "custom", "case_source_path": str(src)}
    assert two["outputs"]["cwd"] == str(src.parent)
    assert run_hook(src, "returns_false", ALLOW)["outcome"] == "failed"


@pytest.mark.parametrize(
    ("name", "needle"),
    [("extra_keys", "unexpected key(s) score"), ("wrong_type", "returned int"), ("raises", "RuntimeError: boom"),
     ("missing_function", "no callable 'missing_function'")],
)
def test_bad_hooks_are_errors(tmp_path: Path, name: str, needle: str) -> None:
    src = write_case(tmp_path, HOOK_SOURCE)
    res = run_hook(src, name, ALLOW)
    assert res["outcome"] == "error" and needle in res["message"], res["message"]


def test_missing_hook_file_is_an_error(tmp_path: Path) -> None:
    src = write_case(tmp_path, HOOK_SOURCE, name="other.py")
    res = run_hook(src, "no_args", ALLOW)
    assert res["outcome"] == "error" and "does not exist" in res["message"]
    assert "file hooks/hook.py does" in res["message"] and str(tmp_path) not in res["message"]  # as the case names it


def test_import_path_hook_runs_when_allowed(tmp_path: Path) -> None:
    src = write_case(tmp_path, HOOK_SOURCE)
    pkg = src.parent / "casehooks"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "checks.py").write_text("def check(artifact, context):\n    return artifact['status'] == 'success'\n")
    check = {"check_id": "imp", "python_hook": {"import_path": "casehooks.checks", "callable_name": "check"}}
    ok = evaluate_checks([check], artifact(), case_source_path=src, security=ALLOW)["checks"][0]
    assert ok["outcome"] == "passed", ok["message"]
    bad = evaluate_checks([check], artifact(status="failed"), case_source_path=src, security=ALLOW)["checks"][0]
    assert bad["outcome"] == "failed"


def test_a_hook_in_a_symlinked_case_folder_runs(tmp_path: Path) -> None:
    """A case folder that is a symlink (to a folder of the workspace: validation lets it through) is bound in the hook's
    sandbox at its real path: the hook's file is looked for there. Before session 75 it was looked for under the
    symlink's name, which the sandbox does not have: every such hook ended `error` (FileNotFoundError for a file that
    exists), its checks' outcome in the result, whatever the run did."""
    src = write_case(tmp_path, HOOK_SOURCE)
    (tmp_path / "linked").symlink_to("case")
    res = run_hook(tmp_path / "linked" / "test.yaml", "two_args", ALLOW)
    assert res["outcome"] == "passed", res["message"]
    assert res["outputs"]["cwd"] == str(src.parent.resolve())


SHARED_HOOK = """
import os
def check(artifact):
    here = os.path.dirname(__file__)
    with open(os.path.join(here, 'expected.txt')) as fh:
        expected = fh.read().strip()
    parent = os.path.dirname(here)
    return {'passed': True, 'message': expected, 'outputs': {'beside': sorted(os.listdir(here)),
            'above': sorted(os.listdir(parent)) if os.path.isdir(parent) else None}}
"""


def _shared(tmp_path: Path, folder: str) -> Path:
    """Two case folders (alpha, beta) under `tmp_path/cases`, the hook in `folder` (relative to tmp_path) with a data
    file beside it, a secret beside `cases`: alpha's test.yaml."""
    for case in ("alpha", "beta"):
        (tmp_path / "cases" / case).mkdir(parents=True)
        (tmp_path / "cases" / case / "test.yaml").write_text("schema_version: 1\n")
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    (tmp_path / folder / "check.py").write_text(SHARED_HOOK)
    (tmp_path / folder / "expected.txt").write_text("shared\n")
    (tmp_path / "secret.txt").write_text("not for hooks\n")
    return tmp_path / "cases" / "alpha" / "test.yaml"


def _run_path(src: Path, path: str) -> dict:
    check = {"check_id": "hook", "python_hook": {"path": path, "callable_name": "check"}}
    return evaluate_checks([check], artifact(), case_source_path=src, security=ALLOW)["checks"][0]


def test_a_hook_shared_beside_the_cases_runs_with_its_folder(tmp_path: Path) -> None:
    """A `path` hook outside its case directory (`../../shared/check.py`): its sandbox has the hook's folder too,
    read-only, and nothing more (the folder above it shows only what leads to the case directory and the hook's
    folder). Before session 75 it had the case directory alone: every such check ended `error`
    (FileNotFoundError for a file that exists)."""
    src = _shared(tmp_path, "shared")
    res = _run_path(src, "../../shared/check.py")
    assert (res["outcome"], res["message"]) == ("passed", "shared"), res
    seen = {"beside": res["outputs"]["beside"], "above": res["outputs"]["above"]}
    assert seen == {"beside": ["check.py", "expected.txt"], "above": ["cases", "shared"]}
    linked = src.parent / "hooks"
    linked.symlink_to("../../shared")  # through a symlink in the case directory: the same folder
    through = _run_path(src, "hooks/check.py")
    assert (through["outcome"], through["outputs"]["beside"]) == ("passed", ["check.py", "expected.txt"]), through


def test_a_hook_above_the_case_folders_sees_every_case(tmp_path: Path) -> None:
    """A hook in the folder that holds the case folders (`../check.py`): that folder is bound, so every case folder
    in it is readable by the hook (docs/evaluation.md, What a hook may read); the folder above it is not."""
    src = _shared(tmp_path, "cases")
    res = _run_path(src, "../check.py")
    assert res["outcome"] == "passed", res
    seen = {"beside": res["outputs"]["beside"], "above": res["outputs"]["above"]}
    assert seen == {"beside": ["alpha", "beta", "check.py", "expected.txt"], "above": ["cases"]}


def test_a_path_hook_folder_is_not_on_its_import_path(tmp_path: Path) -> None:
    """The `path` runner loads the hook file by its path: its folder is not on `sys.path` (in the case directory as
    outside it), so `from helper import x` needs the hook to put its folder there itself."""
    src = _shared(tmp_path, "shared")
    (tmp_path / "shared" / "helper.py").write_text("X = 1\n")
    (tmp_path / "shared" / "check.py").write_text("from helper import X\ndef check(artifact):\n    return True\n")
    res = _run_path(src, "../../shared/check.py")
    assert res["outcome"] == "error" and "ModuleNotFoundError: No module named 'helper'" in res["message"], res


def test_hook_does_not_see_secret_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-" + "0" * 40)
    src = write_case(tmp_path, HOOK_SOURCE)
    res = run_hook(src, "env_probe", ALLOW)
    assert res["outcome"] == "passed" and res["outputs"]["keys"] == []


def test_hook_timeout_stops_the_process(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    src = write_case(tmp_path, f'''
import subprocess, sys, time
def slow(artifact):
    # a grandchild too: the whole process group must go
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5); open({str(marker)!r}, 'w').write('x')"])
    time.sleep(30)
    return True
''')
    started = time.monotonic()
    res = run_hook(src, "slow", ALLOW, hook_timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert res["outcome"] == "error" and "timed out after 0.5s" in res["message"]
    assert elapsed < 1.5, f"hook was not stopped promptly ({elapsed:.2f}s)"
    time.sleep(max(2.0 - (time.monotonic() - started), 0))
    assert not marker.exists(), "the hook's child process outlived the timeout"


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(b"hello")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


NET_HOOK = '''
import socket
def connect(artifact):
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=2) as s:
            return {{"passed": True, "outputs": {{"got": s.recv(5).decode()}}}}
    except OSError as exc:
        return {{"passed": False, "message": "connect failed: " + type(exc).__name__}}
'''


@pytest.mark.skipif(network_isolation_prefix() is None, reason="no bwrap/unshare network isolation here")
def test_network_denied_by_default_and_allowed_on_request(tmp_path: Path, listener: int) -> None:
    src = write_case(tmp_path, NET_HOOK.format(port=listener))
    denied = run_hook(src, "connect", ALLOW)
    assert denied["outcome"] == "failed" and "connect failed" in denied["message"], denied["message"]
    allowed = run_hook(src, "connect", ALLOW_NET)
    assert allowed["outcome"] == "passed" and allowed["outputs"]["got"] == "hello"


def test_no_isolation_available_means_the_hook_does_not_run(
    tmp_path: Path, listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PATH with python but neither bwrap nor unshare: the hook must be refused, not run with network.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bindir))
    marker = tmp_path / "ran"
    src = write_case(tmp_path, f"def connect(artifact):\n    open({str(marker)!r}, 'w').write('x')\n    return True\n")
    res = run_hook(src, "connect", ALLOW)
    assert res["outcome"] == "error" and "never run unconfined" in res["message"]
    assert not marker.exists()
    assert os.environ["PATH"] == str(bindir)


def test_a_hook_printing_hundreds_of_megabytes_keeps_only_a_tail(tmp_path: Path) -> None:
    src = write_case(tmp_path, '''
import sys
def chatty(artifact):
    line = "x" * 999 + "\\n"
    for _ in range(300_000):
        sys.stdout.write(line)  # (the hook's prints go to stderr)
    print("the last words")
    return False
''')
    tracemalloc.start()
    try:
        res = run_hook(src, "chatty", ALLOW, hook_timeout_s=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res["outcome"] == "failed", res
    assert peak < 16 << 20, f"{peak >> 20} MiB held for 300 MB of prints"


def test_a_hook_reply_over_the_limit_is_an_error(tmp_path: Path) -> None:
    src = write_case(tmp_path, '''
def huge(artifact):
    return {"passed": True, "message": "x" * (40 << 20)}
''')
    started = time.monotonic()
    res = run_hook(src, "huge", ALLOW, hook_timeout_s=60)
    assert res["outcome"] == "error" and res["message"] == "hook's reply is larger than 16 MiB; the hook was stopped"
    assert time.monotonic() - started < 30


NO_RESULT_HOOKS = '''
import os, signal
def killed(artifact):
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer (or anyone) would
def exits(artifact):
    os._exit(3)
def raises(artifact):
    raise RuntimeError("boom")
def too_much_memory(artifact):
    return bytearray(2 << 30) is not None  # past the hook's 1 GiB address space: MemoryError, its own outcome
def not_a_number(artifact):
    return {"passed": True, "score": float("nan")}  # (0/0 in numpy: a reply JSON cannot hold, the same every run)
'''


@pytest.mark.parametrize(("name", "message", "fault"), [
    ("killed", "hook process was killed by signal 9 (SIGKILL) before it gave a result", True),
    ("exits", "hook process exited with code 3 without a result", True),
    ("raises", "hook raised RuntimeError: boom", False),
    ("too_much_memory", "hook raised MemoryError: ", False),
    # (a reply given, that JSON does not read: the hook's outcome, kept; before the session 76 review marked a process
    # that gave no result, "exited with code 0", and every build ran the checks again and exited 1)
    ("not_a_number", "hook's reply is not valid JSON (NaN is not a JSON number)", False),
])
def test_a_hook_process_that_gives_no_result_is_marked_so(tmp_path: Path, name: str, message: str,
                                                          fault: bool) -> None:
    """A hook process that ended without a reply (killed, or gone before it replied) says nothing about the run: its
    outcome is marked `no_result` (the build retries it: builder/eval_layer.py `hook_fault`); a hook that raised
    (MemoryError at its memory limit too) gave its outcome, kept."""
    res = run_hook(write_case(tmp_path, NO_RESULT_HOOKS), name, ALLOW)
    assert res["outcome"] == "error" and res["message"] == message, res
    assert (res.get("metadata") or {}).get("no_result") is (True if fault else None), res


def test_bubblewrap_failing_after_its_probe_means_the_hook_was_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap that starts the probe (`true`) but fails to set up the hook's sandbox: the hook was not run, as when
    the probe fails (`not_run`), not an outcome."""
    from clawstore.host import confine

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "bwrap").write_text("#!/bin/sh\n"
                                  'for last; do :; done\nif [ \"$last\" = true ]; then exec '
                                  f"{confine.bwrap_exe()} \"$@\"; fi\n"
                                  "echo 'bwrap: Creating new namespace failed: No space left on device' >&2\nexit 1\n")
    (bindir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(confine, "_probe", {})
    res = run_hook(write_case(tmp_path, HOOK_SOURCE), "one_arg", ALLOW)
    assert res["outcome"] == "error", res
    assert res["message"] == ("bubblewrap failed to start the hook's sandbox (bwrap: Creating new namespace failed: "
                              "No space left on device); the hook was not run"), res
    assert res["metadata"]["not_run"] is True, res


def test_bubblewrap_that_cannot_be_started_after_its_probe_means_the_hook_was_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap that passed its probe and then cannot be executed at all (replaced meanwhile by a file whose
    interpreter is gone; fork failing with EAGAIN or ENOMEM is the same OSError): the hook was not run (`not_run`),
    not a traceback out of the checks (before session 76 the OSError left run_python_hook)."""
    from clawstore.host import confine

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "bwrap").write_text(f"#!/bin/sh\nexec {confine.bwrap_exe()} \"$@\"\n")
    (bindir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(confine, "_probe", {})
    assert confine.bwrap_unavailable_reason() is None  # (probed: it works)
    (bindir / "bwrap").write_text("#!/nonexistent/interpreter\n")  # (now it cannot be executed)
    res = run_hook(write_case(tmp_path, HOOK_SOURCE), "one_arg", ALLOW)
    assert res["outcome"] == "error" and res["metadata"]["not_run"] is True, res
    assert res["message"].startswith("bubblewrap could not be started (") and "the hook was not run" in res["message"]
