"""`claw query -o FILE` writes beside and renames into place (csv, json, markdown, parquet): a write cut short (a full
disk; here a real file-size limit, RLIMIT_FSIZE, on the claw process) leaves the old file whole and no temp file, and
exits 2 with one line. Before, the text formats were written over the file in place: a torn file was left (parquet:
DuckDB's COPY already wrote a temp file and renamed it). The path in the report line is shown as one line."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clawstore.cli import main
from clawstore.query.manifest import index_current
from clawstore.store import Store
from tests.query.campaigns import Spec, build

SQL = "select * from runs"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with Store(root) as opened:
        build(opened, Spec(models=["openai/gpt-a", "anthropic/claude-b"]))
        index_current(opened)  # (the heads a query of the runs reads made here: the limited run writes nothing else)
    return root


def _limited(size: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (a write past the limit is EFBIG, not the signal's kill)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def _claw(store: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clawstore.cli", "query", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=None if limit is None else (lambda: _limited(limit)))


def _here(store: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["query", "--store", str(store), *args])


@pytest.mark.parametrize("suffix", [".csv", ".json", ".md", ".parquet"])
def test_a_write_cut_short_leaves_the_old_file_whole(store: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / "out" / f"result{suffix}"
    out.parent.mkdir()
    # (the writes around the limited one in-process: the same command, no limit to set on a process)
    done = _here(store, SQL, "-o", str(out))
    assert done.exit_code == 0, done.stderr
    whole = out.read_bytes()
    assert len(whole) > 600
    out.write_bytes(b"old")
    done = _claw(store, SQL, "-o", str(out), limit=512)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "File too large" in done.stderr, done.stderr
    if suffix != ".parquet":  # (DuckDB's own message names its temp file)
        assert done.stderr == f"claw: error: --out {out}: File too large\n", done.stderr
    assert out.read_bytes() == b"old"
    assert os.listdir(out.parent) == [out.name]  # no temp file left
    done = _here(store, SQL, "-o", str(out))
    assert done.exit_code == 0 and out.read_bytes() == whole


def test_the_path_written_is_reported_on_one_line(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "two\nlines.csv"
    done = _claw(store, SQL, "-o", str(out))
    assert done.returncode == 0 and out.is_file()
    assert done.stderr == f"wrote 6 rows to {tmp_path}/two\\x0alines.csv\n", done.stderr


def test_an_output_below_a_file_names_the_file(store: Path, tmp_path: Path) -> None:
    """`-o afile/x.csv` where afile is a regular file: said so, not that a directory 'does not exist'."""
    (tmp_path / "afile").write_text("kept")
    out = tmp_path / "afile" / "x.csv"
    done = _claw(store, SQL, "-o", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"claw: error: --out {out}: {tmp_path / 'afile'} is a file, not a directory\n", done.stderr
    assert (tmp_path / "afile").read_text() == "kept"
