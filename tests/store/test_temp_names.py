"""A temp file's name costs no random draw (a getrandom call, and a hand-over of the interpreter lock to the build's
other threads and back, a claim each: docs/scale/building.md, Session 63): its process, and a count from a random
start drawn once. Names stay unique, and fsck still reads their writer out of them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clawstore.host import durable
from clawstore.host.durable import process_identity, temp_name, temp_owner


def _no_draw(size: int) -> bytes:
    raise AssertionError(f"os.urandom({size}) called for a temp name")


def test_names_draw_nothing_are_unique_and_name_their_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durable.os, "urandom", _no_draw)  # (the start was drawn when durable was imported)
    names = [temp_name(".claim") for _ in range(10_000)]
    assert len(set(names)) == len(names)
    assert {temp_owner(name) for name in names} == {process_identity()}
    assert all(name.endswith(".claim") and len(name.split("-")[2]) == 16 + len(".claim") for name in names)


def test_two_processes_never_share_a_name() -> None:
    code = "from clawstore.host.durable import temp_name; print(' '.join(temp_name() for _ in range(2000)))"
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=os.environ.copy()).stdout.split() for _ in range(2)]
    assert len(set(runs[0]) | set(runs[1])) == 4000
