"""What session 72's attack on the commands' error paths found (every command fed wrong input, a full disk and a
reader that leaves): each case one line and its exit code, nothing left half-written."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.claw import Claw, claw, env, ws  # noqa: F401
from tests.support.prepared import claw_here
from tests.support.tmpfs import mounted_tmpfs


def _with_stdout_closed(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`claw ARGS` writing into a pipe whose reader is gone (`claw ls-tree ID | head -1`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=cwd, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def _files(folder: Path, count: int, size: int) -> Path:
    folder.mkdir()
    for number in range(count):
        (folder / f"f{number}").write_bytes(os.urandom(size))
    return folder


def test_the_store_plumbing_into_a_reader_that_left_ends_quietly(tmp_path: Path) -> None:
    # They said "claw: error: Broken pipe", exit 2 (cli/store_access.os_errors took it for a bad path), where every
    # other command ends as `git log | head` does: exit 141, nothing said (docs/building.md, Exit codes).
    store = str(tmp_path / "store")
    files = _files(tmp_path / "files", 3, 10)
    code, out, err = claw_here("put", str(files), "--store", store, cwd=tmp_path)
    assert code == 0, err
    tree = out.split()[0]
    for args in (("ls-tree", tree), ("put", *map(str, files.iterdir())), ("store", "stats")):
        done = _with_stdout_closed(tmp_path, *args, "--store", store)
        assert (done.returncode, done.stderr) == (141, ""), (args, done.returncode, done.stderr)


@pytest.fixture
def full_disk(tmp_path: Path) -> Path:
    """A 512 KiB tmpfs, nearly full."""
    with mounted_tmpfs(tmp_path / "mnt", "512k") as mount:
        (mount / "filler").write_bytes(b"\0" * 400_000)
        yield mount


def test_a_checkout_onto_a_full_disk_is_a_disk_error_and_leaves_nothing(tmp_path: Path, full_disk: Path) -> None:
    # It was exit 2 (bad usage) and left DIR half written, which the retry then refused as not empty.
    store = str(tmp_path / "store")
    code, out, err = claw_here("put", str(_files(tmp_path / "files", 3, 100_000)), "--store", store, cwd=tmp_path)
    assert code == 0, err
    tree = out.strip()
    (full_disk / "empty").mkdir()
    for dest in (full_disk / "new" / "deeper", full_disk / "empty"):
        code, _, err = claw_here("checkout", tree, str(dest), "--store", store, cwd=tmp_path)
        assert code == 3 and err.count("\n") == 1 and "No space left on device" in err, (dest, code, err)
    assert sorted(p.name for p in full_disk.iterdir()) == ["empty", "filler"]  # new/ made by it: removed
    assert list((full_disk / "empty").iterdir()) == []  # there before it, empty: emptied again
    (full_disk / "filler").unlink()  # room again: the same checkout succeeds into the same DIR
    code, _, err = claw_here("checkout", tree, str(full_disk / "empty"), "--store", store, cwd=tmp_path)
    assert code == 0 and len(list((full_disk / "empty").iterdir())) == 3, err


def test_a_signing_key_the_full_disk_refuses_leaves_no_part_of_it(tmp_path: Path, full_disk: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Its temp file, with part of the private key in it, was left in $XDG_CONFIG_HOME/claw/ at each try.
    (full_disk / "filler").write_bytes(b"\0" * (512 * 1024))  # (the filler cut short: the disk is full)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(full_disk / "config"))
    code, out, err = claw_here("key", "show", cwd=tmp_path)
    assert code == 3 and out == "" and "No space left on device" in err, (code, err)
    assert os.listdir(full_disk / "config" / "claw") == []



def test_a_parquet_file_the_full_disk_refuses_is_said_as_any_other_format(claw: Claw,  # noqa: F811
                                                                           full_disk: Path) -> None:
    # Its one line was DuckDB's JSON (`query failed: IO Error: Async write failed for range [offset=0, size=27]:
    # {"exception_type":"IO",...,"errno":"28"}`), where a .csv's is `--out FILE: No space left on device`.
    assert claw("put", __file__)[0] == 0  # (a store)
    (full_disk / "filler").write_bytes(b"\0" * (512 * 1024))  # (the filler cut short: the disk is full)
    big = "select range, repeat('x', 100) as text from range(100000)"
    for name in ("out.csv", "out.parquet"):
        code, _, err = claw("query", "-o", str(full_disk / name), big)
        assert (code, err) == (2, f"claw: error: --out {full_disk / name}: No space left on device\n"), (name, err)
        assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # (nor DuckDB's tmp_out.parquet)


def test_batch_status_of_a_store_that_is_not_there_makes_none(claw: Claw, env: dict[str, str]) -> None:  # noqa: F811
    # `claw batch status --store /mistyped` made an empty store there (exit 0), where `claw status` makes none.
    for command in (("status",), ("batch", "status")):
        code, out, err = claw(*command, "--suite", "main", "--run-profile", "rp")
        assert code == 0 and "Traceback" not in err, (command, code, err)
        assert not Path(env["CLAW_STORE"]).exists(), command


def test_a_demo_the_full_disk_refuses_says_it_in_a_short_line(tmp_path: Path, full_disk: Path) -> None:
    # Its line was shutil.Error's list, every file's (source, target, error) as a repr, cut at 2,000 characters.
    (full_disk / "filler").write_bytes(b"\0" * (512 * 1024))  # (the filler cut short: the disk is full)
    code, _, err = claw_here("demo", "--dir", str(full_disk / "demo"), cwd=tmp_path)
    assert code == 3 and err.count("\n") == 1 and len(err) < 300, (code, err)
    assert err.startswith(f"claw: error: cannot write the demo's configs into {full_disk / 'demo'}: ")
    assert err.endswith(": No space left on device\n"), err


def test_a_view_the_full_disk_refuses_leaves_no_folder_of_details(claw: Claw, full_disk: Path) -> None:  # noqa: F811
    # Its folder of run details (`view.html.d/`) stayed without the page; one that was there before stays.
    assert claw.build()[0] == 0
    (full_disk / "filler").write_bytes(b"\0" * (512 * 1024))  # (the filler cut short: the disk is full)
    code, _, err = claw("view", "--suite", "main", "--run-profile", "rp", "-o", str(full_disk / "view.html"))
    assert (code, err) == (2, f"claw: error: --out {full_disk / 'view.html'}: No space left on device\n")
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]
    (full_disk / "view.html.d").mkdir()  # (an earlier view's folder: kept)
    assert claw("view", "--suite", "main", "--run-profile", "rp", "-o", str(full_disk / "view.html"))[0] == 2
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "view.html.d"]


def test_a_demo_dir_that_is_not_utf8_is_refused_before_it_builds(tmp_path: Path) -> None:
    # It built for seconds, then its `claw query` step failed (DuckDB opens UTF-8 paths only): exit 1.
    code, _, err = claw_here("demo", "--dir", os.fsdecode(bytes(tmp_path) + b"/caf\xe9"), cwd=tmp_path)
    assert code == 2 and err.startswith("claw: error: --dir: not UTF-8 text") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_trust_list_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path, own_config_dir: Path) -> None:
    # `claw trust list|add|remove`, `archive import` and `pull` read it: a UnicodeDecodeError's traceback.
    listed = own_config_dir / "claw" / "trusted_keys"
    listed.parent.mkdir(parents=True)
    listed.write_bytes(b"\xff\xfe")
    key = "claw-ed25519:" + base64.b64encode(bytes(32)).decode()
    for args in (("trust", "list"), ("trust", "add", key), ("trust", "remove", key)):
        code, _, err = claw_here(*args, cwd=tmp_path)
        assert code == 2 and err.startswith(f"claw: error: {listed}: not UTF-8 text (byte 1)"), (args, err)
        assert err.count("\n") == 1 and listed.read_bytes() == b"\xff\xfe"


def test_cat_into_a_closed_stdout_is_one_line(tmp_path: Path) -> None:
    # `claw cat ID >&-`: click's "Was not able to determine binary stream for sys.stdout." in a traceback, exit 1.
    store = str(tmp_path / "store")
    code, out, err = claw_here("put", __file__, "--store", store, cwd=tmp_path)
    assert code == 0, err
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "cat", out.strip(), "--store", store], cwd=tmp_path,
                          stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (2, "claw: error: stdout is closed: nowhere to write the object's bytes\n")


def test_an_archive_the_full_disk_refuses_is_named(claw: Claw, full_disk: Path) -> None:  # noqa: F811
    # It said `claw: error: No space left on device`: the store's disk or the archive's? (exit 3 either way)
    assert claw.build()[0] == 0
    (full_disk / "filler").write_bytes(b"\0" * (512 * 1024))  # (the filler cut short: the disk is full)
    out = full_disk / "a.claw"
    code, _, err = claw("archive", "export", "--suite", "main", "--run-profile", "rp", "-o", str(out))
    assert (code, err) == (3, f"claw: error: {out}: No space left on device\n")
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


def test_trust_remove_of_your_own_key_says_it_stays_trusted(tmp_path: Path, own_config_dir: Path) -> None:
    # `claw trust list` shows it "(yours)"; removing it said "is not in your trust list (claw trust list)", which
    # lists it (session 77).
    own = claw_here("key", "show", cwd=tmp_path)[1].strip()
    code, _, err = claw_here("trust", "remove", own, cwd=tmp_path)
    assert code == 2 and err == (f"claw: error: {own} is your own key: always trusted (it signs what you push and "
                                 "export), so it cannot be removed\n"), err
    assert f"{own}  (yours)" in claw_here("trust", "list", cwd=tmp_path)[1]
