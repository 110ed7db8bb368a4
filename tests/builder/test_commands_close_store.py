"""Commands run in one process that goes on (here, in-process) close the store they opened: none of its files stays
open after a build, a status, a report or a gc."""

from __future__ import annotations

import os

from tests.support.claw import Claw
from tests.support.workspace import Workspace


def store_files_open(store: str) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(store):
            found.append(target)
    return found


def test_in_process_commands_leave_no_store_file_open(ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    store = env["CLAW_STORE"]
    for args in (("build",), ("build", "--force"), ("status",), ("report",), ("explain",)):
        code, out, err = claw(args[0], "--suite", "main", "--run-profile", "rp", *args[1:])
        assert code == 0, err
        assert store_files_open(store) == [], args
    for args in (("gc", "--dry-run"), ("fsck",), ("refs",)):
        code, out, err = claw(*args)
        assert code == 0, err
        assert store_files_open(store) == [], args
