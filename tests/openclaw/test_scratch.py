"""Where the real-engine tests put the engine's data and the image's second build (engine.scratch_dir)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.openclaw import engine


@pytest.fixture
def ram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /dev/shm, so the test neither needs nor touches the machine's."""
    monkeypatch.setattr(engine, "RAM", tmp_path / "shm")
    monkeypatch.setattr(engine, "RAM_NEEDED", 1)
    (tmp_path / "shm").mkdir()
    return tmp_path / "shm"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_scratch_dir_is_in_ram_and_named_by_its_process(ram: Path, tmp_path: Path) -> None:
    made = engine.scratch_dir(tmp_path / "fallback", "dockerd")
    assert made.parent == ram and made.name.startswith(f"claw-test-{os.getpid()}-dockerd-")
    assert not (tmp_path / "fallback").exists()


def test_without_room_in_ram_the_fallback_is_used(ram: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RAM_NEEDED", 2**62)
    assert engine.scratch_dir(tmp_path / "fallback", "image") == tmp_path / "fallback"
    assert (tmp_path / "fallback").is_dir() and list(ram.iterdir()) == []


def test_what_a_killed_session_left_is_removed_unless_its_engine_still_runs(ram: Path, tmp_path: Path) -> None:
    gone = dead_pid()
    abandoned = ram / f"claw-test-{gone}-image-x"
    (abandoned / "again").mkdir(parents=True)
    (abandoned / "again" / "layer.tar").write_bytes(b"x" * 1000)
    engine_running = ram / f"claw-test-{gone}-dockerd-y"
    engine_running.mkdir()
    (engine_running / "dockerd.pid").write_text(str(os.getpid()))  # an orphaned engine: left alone
    engine_gone = ram / f"claw-test-{gone}-dockerd-z"
    engine_gone.mkdir()
    (engine_gone / "dockerd.pid").write_text(str(dead_pid()))
    ours = ram / f"claw-test-{os.getpid()}-image-w"
    ours.mkdir()
    made = engine.scratch_dir(tmp_path / "fallback", "image")
    assert sorted(p.name for p in ram.iterdir()) == sorted([engine_running.name, ours.name, made.name])
