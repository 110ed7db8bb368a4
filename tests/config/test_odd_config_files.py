"""A config path that is not a regular file: a directory named test.yaml, a named pipe, a dangling symlink, a symlink
loop. Each used to vanish from the workspace without a word (`claw validate` said OK with the case missing; a pipe was
skipped only because discovery looked for files) or, for the loop, stop validation as a whole. Now each is one error
naming the file, the rest of the workspace still checked; a pipe is never opened for reading (that waits for a
writer for ever)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.config.yamlio import YamlProblem, read_text
from tests.support.workspace import Workspace, standard


def _directory(path: Path) -> None:
    path.mkdir()


def _pipe(path: Path) -> None:
    os.mkfifo(path)


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "gone.yaml")


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


ODD: dict[str, Callable[[Path], None]] = {"directory": _directory, "pipe": _pipe, "dangling symlink": _dangling,
                                          "symlink loop": _loop}


def _validate(root: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "validate", str(root)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("odd", list(ODD))
def test_a_case_whose_test_yaml_is_not_a_file_is_an_error(tmp_path: Path, odd: str) -> None:
    ws = standard(tmp_path / "ws")
    case_dir = ws.configs / "cases" / "gamma"
    case_dir.mkdir()
    ODD[odd](case_dir / "test.yaml")
    code, out, err = _validate(ws.root)
    assert code == 2, out + err
    assert "Traceback" not in err and err == ""
    [line] = [line for line in out.splitlines() if "gamma" in line]
    assert line.startswith("configs/cases/gamma/test.yaml: "), line
    assert "2 cases" in out.splitlines()[-1]  # (the others still loaded)


@pytest.mark.parametrize("odd", ["directory", "pipe"])
def test_a_suite_file_that_is_not_a_file_is_an_error(tmp_path: Path, odd: str) -> None:
    ws = standard(tmp_path / "ws")
    ODD[odd](ws.configs / "suites" / "extra.yaml")
    code, out, err = _validate(ws.root)
    assert code == 2 and "Traceback" not in err, out + err
    assert out.startswith("configs/suites/extra.yaml: not a regular file"), out


def test_reading_a_pipe_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.yaml")
    with pytest.raises(YamlProblem, match="not a regular file"):
        read_text(tmp_path / "p.yaml")


def test_a_workspace_with_such_files_is_otherwise_valid_as_before(tmp_path: Path) -> None:
    ws: Workspace = standard(tmp_path / "ws")
    (ws.configs / "cases" / "alpha" / "notes.yaml").mkdir()  # (only test.yaml is a case's config)
    code, out, err = _validate(ws.root)
    assert code == 0 and out.startswith("OK: 2 cases"), out + err
