"""`claw view`'s helper (report/view_beside.py): a process forked at start makes the detail shards it reaches first
while the command makes the others. The page and every shard are the bytes the command makes alone (in-process: no
helper), whether the helper helps, never gets going (the command does not wait for it), or dies holding a shard it
took; it never outlives the command, nor a command that is killed."""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.view_bench import CAMPAIGN, FLAGS, write_campaign
from clawstore.cli import main
from clawstore.report.view_beside import HELPER_NAME, _Claims, _Order, _Rows, _Start
from clawstore.report.view_data import collect, row_index
from clawstore.report.view_page import page_token
from clawstore.store import Store
from tests.support.once import copied, made_once
from tests.support.reaped import reaped

RUNS = 800  # four shards of 256


def _make(made: Path) -> None:
    """The campaign's store, and the page and shards `claw view` writes from it in-process (a process running
    commands in itself forks no helper)."""
    write_campaign(Store(made / "store"), runs=RUNS, models=3)
    out = made / "alone" / "view.html"
    out.parent.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(out.parent)  # (as the subprocesses: no workspace, no tags)
        result = CliRunner(env={"CLAW_STORE": str(made / "store")}).invoke(main, ["view", *FLAGS, "--out", str(out)])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once in the run (tests/support/once.py), not once in each xdist worker."""
    return made_once(tmp_path_factory, "view-beside", _make)


@pytest.fixture(scope="module")
def store_dir(made: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("beside")
    copied(made, root, "store")  # (the module's own: the views here write in it)
    return root / "store"


@pytest.fixture(scope="module")
def alone(made: Path) -> dict[str, bytes]:
    """The page and shards `claw view` wrote in-process from the store the module's is a copy of."""
    return _written(made / "alone" / "view.html")

def _written(page: Path) -> dict[str, bytes]:
    found = {page.name: page.read_bytes()}
    found.update({f.name: f.read_bytes() for f in sorted(page.with_name(page.name + ".d").iterdir())})
    return found


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(found)


def _helpers(pid: int) -> list[int]:
    """Its children named as the helper names itself (a program it runs, or a child not yet past exec, is not)."""
    found = []
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == HELPER_NAME:
                found.append(child)
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    """Running, or dead and not reaped (a zombie outlives its command all the same)."""
    return Path(f"/proc/{pid}").exists()


def _until(test: Callable[[], object], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not test():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.002)


def _view(store_dir: Path, out: Path) -> tuple[subprocess.Popen[str], int]:
    """`claw view` as the program, and its helper, stopped."""
    proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "view", *FLAGS, "--out", str(out)],
                            cwd=out.parent, env={**os.environ, "CLAW_STORE": str(store_dir)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    helper: list[int] = []
    _until(lambda: helper.extend(_helpers(proc.pid)[:1]) or helper or proc.poll() is not None, "the helper")
    assert helper, f"no helper forked: {proc.communicate()}"
    os.kill(helper[0], signal.SIGSTOP)
    return proc, helper[0]


def _shards(out: Path) -> set[str]:
    folder = out.with_name(out.name + ".d")
    return {f.name for f in folder.iterdir() if f.name.endswith(".js")} if folder.is_dir() else set()


ALL = {f"details-{number:05d}.js" for number in range(4)}


def _claims_of(pid: int) -> Path:
    """The shards' claims (a memory file) as the command `pid` holds them."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if "claw-view-claims" in os.readlink(fd):
                return fd
        except OSError:
            pass
    raise AssertionError("the command holds no claims")


@pytest.mark.skipif(sys.platform != "linux", reason="the helper is forked on Linux only")
@pytest.mark.parametrize("helper_ends", ["helps", "never gets going", "dies holding a shard"])
def test_the_page_and_shards_are_the_same_whoever_makes_them(
        store_dir: Path, alone: dict[str, bytes], tmp_path: Path, helper_ends: str) -> None:
    out = tmp_path / "view.html"
    proc, helper = _view(store_dir, out)
    if helper_ends == "helps":
        os.kill(helper, signal.SIGCONT)
    elif helper_ends == "dies holding a shard":
        # As if it had taken shard 1 (and stopped there): the command makes the others and waits for it...
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            with open(_claims_of(proc.pid), "r+b") as shared:
                shared.seek(1)
                assert shared.read(1) in (b"", b"\0")  # (the command not there yet: it is building the report)
                shared.seek(1)
                shared.write(_Claims.HELPER)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        _until(lambda: ALL - {"details-00001.js"} <= _shards(out), "the command's shards")
        time.sleep(0.3)
        assert "details-00001.js" not in _shards(out) and not out.exists()
        os.kill(helper, signal.SIGKILL)  # ... until the helper dies without saying it: then makes it
    # "never gets going": stopped before it took a shard, the command makes them all and ends without waiting for it.
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _written(out) == alone and _shards(out) == ALL
    assert not _alive(helper)


@pytest.mark.skipif(sys.platform != "linux", reason="the helper is forked on Linux only")
def test_a_helper_ends_with_a_killed_command(store_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    proc, helper = _view(store_dir, out)
    proc.kill()
    proc.wait()  # (not its output: the helper holds the pipes too)
    os.kill(helper, signal.SIGCONT)
    # No order comes (its pipe at EOF), or no one hears its answer (EPIPE): it ends, no page written.
    _until(lambda: not _alive(helper), "the helper's end", seconds=30)
    assert not out.exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the helper and the tags' reader are forked on Linux only")
def test_no_process_a_killed_command_forked_outlives_it(store_dir: Path, tmp_path: Path) -> None:
    # Its helper and the reader of its cases' tags (cli/view_cmd.py), which waited for more work for ever on a pipe
    # it held both ends of when the command was killed (session 71: found left by this module's runs).
    out = tmp_path / "view.html"
    proc, helper = _view(store_dir, out)
    forked: list[int] = []

    def both() -> bool:
        forked[:] = _children(proc.pid)
        return len(forked) >= 2 or proc.poll() is not None

    _until(both, "the tags' reader")
    assert helper in forked and len(forked) == 2, forked
    proc.kill()
    proc.wait()
    os.kill(helper, signal.SIGCONT)
    try:
        _until(lambda: not any(_alive(pid) for pid in forked), "the forked processes' end", seconds=30)
    finally:
        for pid in forked:  # (a failure here leaves none of them behind)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not out.exists()


def test_two_processes_never_take_the_same_shard() -> None:
    claims = _Claims.new()
    try:
        pid = os.fork()
        if pid == 0:  # (the child: takes what it can of 0..1999, writes nothing else)
            code = 0
            try:
                for number in range(2000):
                    claims.take(number, _Claims.HELPER)
            except BaseException:  # noqa: BLE001 - any failure is the test's
                code = 1
            os._exit(code)
        mine = {number for number in range(2000) if claims.take(number, _Claims.COMMAND)}
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        theirs = claims.taken(_Claims.HELPER, 2000)
        assert claims.taken(_Claims.COMMAND, 2000) == mine
        assert not mine & theirs and mine | theirs == set(range(2000))
    finally:
        claims.close()


def test_a_view_where_its_details_cannot_go_forks_nothing_left_behind(store_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "view.html.d").write_text("in the way")
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "view", *FLAGS, "--out", str(tmp_path / "view.html")],
                          cwd=tmp_path, env={**os.environ, "CLAW_STORE": str(store_dir)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "is in the way" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "view.html").exists()


def test_a_helper_that_met_a_run_the_report_left_out_gives_up_its_shards() -> None:
    rows = _Rows()
    assert (0, "m", "a") in rows and (0, "m", "b") in rows  # (before the keys are known: every run has a row)
    assert not rows.known(frozenset({(0, "m", "a")}))
    rows = _Rows()
    assert (0, "m", "a") in rows
    assert rows.known(frozenset({(0, "m", "a")}))
    assert (0, "m", "a") in rows and (0, "m", "b") not in rows  # (then the keys themselves)


def _helper_alone() -> tuple[subprocess.Popen[bytes], int, int, _Claims]:
    """The helper run alone (a process of its own): it, the ends of its pipes (to it, from it), the shards' claims."""
    requests, to_helper = os.pipe()
    from_helper, answers = os.pipe()
    claims = _Claims.new()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from clawstore.report.view_beside import _helper; "
                             "_helper(int(sys.argv[1]), int(sys.argv[2]))", str(requests), str(answers)],
                            pass_fds=(requests, answers, claims.fd))
    os.close(requests)
    os.close(answers)
    return proc, to_helper, from_helper, claims


def _helper_told(store_dir: Path, out: Path, told: list[str], read: list[str], taken: tuple[int, ...] = ()
                 ) -> tuple[int, bytes]:
    """The helper run alone (a process of its own), told the heads `told` and then that the report read `read`, the
    shards `taken` taken by the command: its exit code and what it said."""
    store = Store(store_dir, create=False)
    data = collect(store, [str(CAMPAIGN["id"])])
    proc, to_helper, from_helper, claims = _helper_alone()
    with reaped(proc):  # (it waits on its pipe for as long as the pipe is open)
        for number in taken:
            assert claims.take(number, _Claims.COMMAND)
        try:
            with os.fdopen(to_helper, "wb") as send:
                pickle.dump(_Start(store_dir, told, None, claims.fd), send)
                pickle.dump(_Order(read, frozenset(row_index(data)), out, page_token(read)), send)
            with os.fdopen(from_helper, "rb") as said:
                return proc.wait(timeout=120), said.read()
        finally:
            claims.close()


def test_a_helper_told_other_heads_than_the_report_read_writes_nothing(store_dir: Path, tmp_path: Path) -> None:
    head = str(Store(store_dir, create=False).get_ref(f"campaigns/{CAMPAIGN['id']}"))
    out = tmp_path / "view.html"
    code, said = _helper_told(store_dir, out, [head], [head], taken=(1,))
    assert code == 0 and [line.split()[0] for line in said.splitlines()] == [b"0", b"2", b"3"]
    assert _shards(out) == {"details-00000.js", "details-00002.js", "details-00003.js"}  # (not the one taken)
    # A build advanced the campaign between the helper's start and the report: its shards are another head's.
    elsewhere = tmp_path / "elsewhere" / "view.html"
    elsewhere.parent.mkdir()
    assert _helper_told(store_dir, elsewhere, [head], ["blake3:" + "0" * 64]) == (0, b"")
    assert _shards(elsewhere) == set()


def test_a_helper_makes_shards_while_the_report_is_built_and_writes_them_when_told_where(
        store_dir: Path, tmp_path: Path) -> None:
    head = str(Store(store_dir, create=False).get_ref(f"campaigns/{CAMPAIGN['id']}"))
    data = collect(Store(store_dir, create=False), [str(CAMPAIGN["id"])])
    out = tmp_path / "view.html"
    proc, to_helper, from_helper, claims = _helper_alone()
    try:
        with os.fdopen(to_helper, "wb") as send:
            pickle.dump(_Start(store_dir, [head], None, claims.fd), send)
            send.flush()
            # No order yet (the command builds the report): it takes and makes every shard (4, fewer than AHEAD),
            # holding them, and writes none until it is told where they go.
            _until(lambda: claims.taken(_Claims.HELPER, 4) == {0, 1, 2, 3}, "the helper's shards made ahead")
            time.sleep(0.2)
            assert _shards(out) == set() and proc.poll() is None
            pickle.dump(_Order([head], frozenset(row_index(data)), out, page_token([head])), send)
        with os.fdopen(from_helper, "rb") as said:
            assert proc.wait(timeout=120) == 0
            assert [line.split()[0] for line in said.read().splitlines()] == [b"0", b"1", b"2", b"3"]
        assert _shards(out) == ALL
    finally:
        claims.close()
        proc.kill()
        proc.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="the helper is forked on Linux only")
def test_a_view_allowed_one_cpu_forks_no_helper(store_dir: Path, alone: dict[str, bytes], tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "view", *FLAGS, "--out", str(out)], cwd=tmp_path,
                            env={**os.environ, "CLAW_STORE": str(store_dir)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    seen: set[int] = set()
    while proc.poll() is None:  # (a helper lives from the start to the last shard: seen if there)
        seen.update(_helpers(proc.pid))
        time.sleep(0.002)
    assert proc.returncode == 0 and not seen
    assert _written(out) == alone


def _killed(pid: int) -> bool:
    """SIGKILL sent to `pid` (pending, as strace holds it), or `pid` gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    pending = [int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(mask & (1 << (signal.SIGKILL - 1)) for mask in pending) or "State:\tZ" in status


def _temps(folder: Path) -> list[str]:
    return [f.name for f in folder.iterdir() if f.name.endswith(".tmp")]


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("strace") is None,
                    reason="the helper is forked on Linux only; strace holds it mid-write")
def test_an_interrupted_view_leaves_no_shard_half_written_in_a_folder_it_did_not_make(
        store_dir: Path, tmp_path: Path) -> None:
    # Ctrl-C while the helper wrote a shard into a details folder that was there before (an earlier view's): its
    # `<pid>-….tmp` stayed there (the folder is not the command's to remove), until session 73.
    out = tmp_path / "view.html"
    folder = out.with_name(out.name + ".d")
    folder.mkdir()
    proc, helper = _view(store_dir, out)
    # The helper held at its shard's rename (its temp file written, not yet renamed) until it is killed.
    tracer = subprocess.Popen(["strace", "-qq", "-o", os.devnull, "-p", str(helper), "-e", "trace=rename",
                               "-e", "inject=rename:delay_enter=60000000"], stderr=subprocess.PIPE, text=True)
    try:
        _until(lambda: "TracerPid:\t0\n" not in Path(f"/proc/{helper}/status").read_text() or tracer.poll() is not None,
               "strace")
        if tracer.poll() is not None:
            pytest.skip(f"strace cannot trace here: {tracer.stderr.read() if tracer.stderr else ''}")
        os.kill(helper, signal.SIGCONT)
        _until(lambda: _temps(folder) or proc.poll() is not None, "the helper's shard written, not yet renamed")
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGINT)  # (the command waits for the helper's shards: Ctrl-C)
        # The command ends its helper (SIGKILL); strace, holding it, is ended then (it does not let a tracee it delays
        # die: "delayed wait data set already"), and the helper dies before its rename.
        _until(lambda: _killed(helper), "the command's SIGKILL of its helper")
    finally:
        tracer.kill()
        tracer.wait()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, "claw: interrupted\n"), err
    assert not _alive(helper) and folder.is_dir() and _temps(folder) == [], _temps(folder)
