"""Containment: chroot-style paths for the file tools, and the bubblewrap shell."""

from __future__ import annotations

import os
import re
import resource
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

from clawstore.runners import sandbox as sandbox_mod
from clawstore.runners.sandbox import Sandbox, SandboxError, resolve_path
from clawstore.runners.tools import READ_LIMIT, ToolBox


@pytest.fixture
def box(tmp_path: Path) -> ToolBox:
    return ToolBox(Sandbox(tmp_path / "sbx"), ["exec_shell", "read_file", "write_file"], shell_timeout=5)


@pytest.mark.parametrize("path,expected", [
    ("/tmp/x", "tmp/x"),
    ("notes/a.txt", "work/notes/a.txt"),
    ("~/a", "work/a"),
    ("~", "work"),
    ("../../../../etc/passwd", "etc/passwd"),
    ("/a/./b/../c", "a/c"),
    ("/", ""),
])
def test_paths_map_inside_the_root(tmp_path: Path, path: str, expected: str) -> None:
    assert resolve_path(tmp_path, path) == tmp_path.joinpath(*filter(None, expected.split("/")))


def test_symlinks_resolve_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    os.symlink("/etc", tmp_path / "work/etc-link")
    os.symlink("../../../../../..", tmp_path / "work/up")
    os.symlink("loop-b", tmp_path / "work/loop-a")
    os.symlink("loop-a", tmp_path / "work/loop-b")
    assert resolve_path(tmp_path, "etc-link/passwd") == tmp_path / "etc/passwd"
    assert resolve_path(tmp_path, "/work/up/etc/passwd") == tmp_path / "etc/passwd"
    with pytest.raises(SandboxError, match="symbolic links"):
        resolve_path(tmp_path, "loop-a")


def test_file_tools_cannot_reach_host_files_through_symlinks(box: ToolBox, tmp_path: Path) -> None:
    host_file = tmp_path / f"host-{uuid.uuid4().hex}.txt"
    host_file.write_text("host secret")
    root = box.sandbox.root
    (root / "work").mkdir()
    os.symlink(host_file, root / "work/link")
    read = box.run("read_file", {"path": "link"})
    assert read.status == "error" and "host secret" not in str(read.output)
    assert str(tmp_path) not in str(read.output)  # errors never show host paths
    wrote = box.run("write_file", {"path": "/work/link", "content": "overwritten"})
    assert wrote.status == "success"
    assert host_file.read_text() == "host secret"
    assert (root / str(host_file).lstrip("/")).read_text() == "overwritten"


def test_shell_and_file_tools_agree_on_paths(box: ToolBox) -> None:
    assert box.run("write_file", {"path": "/data/in.txt", "content": "from file tool"}).status == "success"
    shell = box.run("exec_shell", {"command": "cat /data/in.txt && echo from shell > out.txt && ls -a /"})
    assert shell.status == "success" and shell.output["stdout"].startswith("from file tool")
    assert box.run("read_file", {"path": "/work/out.txt"}).output["content"] == "from shell\n"
    assert box.run("read_file", {"path": "~/out.txt"}).output["content"] == "from shell\n"
    assert sorted(p.name for p in box.sandbox.root.iterdir()) == ["data", "work"]


def test_shell_cannot_write_host_system_dirs(box: ToolBox) -> None:
    marker = f"claw-{uuid.uuid4().hex}"
    command = (f"touch /usr/{marker} /etc/{marker}; echo touch=$?; "
               f"mount -o remount,bind,rw /usr; touch /usr/{marker}; echo remount=$?; "
               f"unshare -Urm sh -c 'mount -o remount,bind,rw /usr; touch /usr/{marker}'; echo nested=$?; "
               "grep CapEff /proc/self/status; id -u; "
               "test -w /proc/sys/kernel/core_pattern && echo SYSCTL-WRITABLE")
    out = box.run("exec_shell", {"command": command}).output["stdout"]
    assert "touch=0" not in out and "remount=0" not in out and "nested=0" not in out
    assert "CapEff:\t0000000000000000" in out and "SYSCTL-WRITABLE" not in out
    if os.geteuid() == 0:
        assert out.rstrip().splitlines()[-1] == "65534"  # a root harness runs the shell as nobody
    assert not Path(f"/usr/{marker}").exists() and not Path(f"/etc/{marker}").exists()


def test_shell_timeout_kills_the_whole_sandbox(tmp_path: Path) -> None:
    box = ToolBox(Sandbox(tmp_path / "sbx"), ["exec_shell"], shell_timeout=0.5)
    started = time.monotonic()
    result = box.run("exec_shell", {"command": "(sleep 1; echo late > /work/late) & sleep 30"})
    assert result.status == "error" and result.output["error_type"] == "timeout"
    assert time.monotonic() - started < 2
    time.sleep(1.2)
    assert not (tmp_path / "sbx/work/late").exists()  # the background job died with the sandbox


def test_shell_output_is_capped(box: ToolBox) -> None:
    result = box.run("exec_shell", {"command": "head -c 200000 /dev/zero | tr '\\0' a"})
    assert result.output["truncated"] is True
    assert len(result.output["stdout"]) < 70_000


def test_no_bwrap_means_no_shell(box: ToolBox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_mod, "_probe_result", {})
    monkeypatch.setattr(sandbox_mod.shutil, "which", lambda name: None)
    result = box.run("exec_shell", {"command": "touch /work/ran; echo ran"})
    assert result.status == "error" and "bubblewrap" in result.output["error"]
    assert "never runs unsandboxed" in result.output["error"]
    assert not (box.sandbox.root / "work/ran").exists()


def test_read_errors_are_tool_errors(box: ToolBox) -> None:
    box.sandbox.root.joinpath("bin.dat").write_bytes(b"\xff\xfe\x00")
    assert box.run("read_file", {"path": "/bin.dat"}).output["error_type"] == "UnicodeDecodeError"


@pytest.mark.parametrize("cut", [1, 2, 3])  # the limit falls after 1, 2 or 3 bytes of a 4-byte character
def test_a_big_text_file_cut_inside_a_character_reads_up_to_it(box: ToolBox, cut: int) -> None:
    # (UTF-8 text longer than the read limit: where the limit falls must not make it "not UTF-8")
    head = "é" * ((READ_LIMIT - cut) // 2) + "a" * ((READ_LIMIT - cut) % 2)
    box.sandbox.root.joinpath("big.txt").write_text(head + "\U0001f600" + "tail" * 10, encoding="utf-8")
    output = box.run("read_file", {"path": "/big.txt"}).output
    assert output.get("content") == head and output.get("truncated") is True, output.get("error")
    box.sandbox.root.joinpath("bad.txt").write_bytes(b"ok \xff" + b"a" * READ_LIMIT)
    assert box.run("read_file", {"path": "/bad.txt"}).output["error_type"] == "UnicodeDecodeError"
    assert box.run("read_file", {"path": "/missing"}).output["error_type"] == "FileNotFoundError"
    assert box.run("read_file", {"path": "/"}).output["error_type"] == "IsADirectoryError"
    assert box.run("write_file", {"path": "/", "content": "x"}).status == "error"


def test_special_files_do_not_block_the_file_tools(box: ToolBox) -> None:
    assert box.run("exec_shell", {"command": "mkfifo /work/pipe && echo made"}).output["stdout"] == "made\n"
    assert box.run("read_file", {"path": "pipe"}).output["error_type"] == "NotARegularFile"
    assert box.run("write_file", {"path": "pipe", "content": "x"}).output["error_type"] == "NotARegularFile"


def test_a_shell_command_printing_hundreds_of_megabytes_costs_no_more_than_the_cap(tmp_path: Path) -> None:
    # communicate() kept everything until the command ended (or its timeout), then kept 64 KiB of it.
    # (A timeout of its own: 300 MB through the pipe took over the fixture's 5 s at load 25; memory is what is proved.)
    box = ToolBox(Sandbox(tmp_path / "sbx"), ["exec_shell"], shell_timeout=60)
    tracemalloc.start()
    try:
        result = box.run("exec_shell", {"command": "yes | head -c 300000000; echo done >&2"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "success" and result.output["returncode"] == 0, result.output
    assert result.output["truncated"] is True and result.output["stdout"].startswith("y\ny\n")
    assert len(result.output["stdout"]) < 70_000 and result.output["stderr"] == "done\n"
    assert peak < 16 << 20, f"{peak >> 20} MiB held for 300 MB of output"


def _limits(box: ToolBox) -> dict[str, str]:
    """The shell's own resource limits, {name: soft limit}, as /proc/self/limits shows them."""
    out = box.run("exec_shell", {"command": "cat /proc/self/limits"}).output["stdout"]
    rows = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()[1:]]
    return {row[0]: row[1] for row in rows}


def test_the_shell_runs_under_limits_of_file_size_memory_and_processes(box: ToolBox) -> None:
    # A model's command (`yes > f`, a huge allocation, a fork bomb) must not fill the host's disk or
    # memory before its timeout: those limits hold for the command and whatever it starts.
    limits = _limits(box)
    assert limits["Max file size"] == str(sandbox_mod.SHELL_FILE_BYTES) == str(1 << 30)
    assert limits["Max data size"] == str(sandbox_mod.SHELL_DATA_BYTES) == str(4 << 30)
    if os.geteuid() == 0:  # (counted per uid: only the shell's own uid, nobody, can be limited)
        assert limits["Max processes"] == str(sandbox_mod.SHELL_PROCESSES)
    raised = box.run("exec_shell", {"command": "ulimit -f unlimited; echo rc=$?"}).output["stdout"]
    assert raised == "rc=1\n"


def test_a_command_filling_the_disk_stops_at_the_file_size_limit(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_mod, "SHELL_FILE_BYTES", 1 << 20)
    box = ToolBox(Sandbox(tmp_path / "sbx"), ["exec_shell"], shell_timeout=10)
    result = box.run("exec_shell", {"command": "head -c 5000000 /dev/zero > /work/big; echo rc=$?"})
    assert result.output["stdout"] == "rc=153\n"  # killed by SIGXFSZ (128 + 25)
    assert (tmp_path / "sbx/work/big").stat().st_size == 1 << 20


def test_a_huge_allocation_fails_inside_the_shell(box: ToolBox) -> None:
    result = box.run("exec_shell", {"command": "python3 -c 'bytearray(6 << 30)'; echo rc=$?"})
    assert "MemoryError" in result.output["stderr"] and result.output["stdout"] == "rc=1\n"


def test_the_limits_never_exceed_the_harness_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A harness started under a lower hard limit (a CI runner, a cgroup'd job) still runs commands.
    monkeypatch.setattr(sandbox_mod.resource, "getrlimit",
                        lambda which: (8 << 20, 8 << 20) if which == resource.RLIMIT_FSIZE else (-1, -1))
    box = ToolBox(Sandbox(tmp_path / "sbx"), ["exec_shell"], shell_timeout=10)
    assert _limits(box)["Max file size"] == str(8 << 20)
