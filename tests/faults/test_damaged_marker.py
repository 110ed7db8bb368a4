"""A damaged `CLAWSTORE` marker: every command names it and the way out, `claw fsck` names the format the
layout says, and `claw fsck --repair` rewrites it when the layout says one format only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core.layout import read_format
from tests.faults.helpers import build_report
from tests.support.claw import Claw
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")
GARBAGE = {"text": b"garbage bytes", "not UTF-8": b"\x8f\x00\xff\xfe", "empty": b"",
           "no format": b'{"version": 2}\n', "a string": b'{"format": "2"}\n', "a boolean": b'{"format": true}\n',
           "deep": b"[" * 100_000, "long": b'{"format": 2, "x": "' + b"y" * 10_000 + b'"}'}


@pytest.mark.parametrize("damage", sorted(GARBAGE))
def test_every_command_names_the_damaged_marker_and_fsck_repair_rewrites_it(
        ws: Workspace, claw: Claw, env: dict[str, str], damage: str) -> None:
    assert build_report(claw, *RUNS)[0] == 0
    root = Path(env["CLAW_STORE"])
    (root / "CLAWSTORE").write_bytes(GARBAGE[damage])
    for command in (["build", *RUNS], ["query", "select count(*) from runs"], ["report", *RUNS],
                    ["archive", "export", *RUNS, "-o", str(ws.root / "c.clawarchive")], ["store", "stats"],
                    ["gc"]):
        code, out, err = claw(*command)
        assert code == 3 and err.count("\n") == 1, (command, out, err)
        assert "CLAWSTORE: damaged" in err and "claw fsck --repair" in err, (command, err)
    assert not (ws.root / "c.clawarchive").exists()

    code, out, err = claw("fsck")
    assert code == 1, out + err
    assert out.startswith("problem: CLAWSTORE: damaged") and "the layout says format 2" in out, out
    assert "claw fsck --repair rewrites it" in out and (root / "CLAWSTORE").read_bytes() == GARBAGE[damage]

    code, out, err = claw("fsck", "--repair")
    assert code == 0 and "repaired: rewrote CLAWSTORE as format 2" in out, out + err
    assert json.loads((root / "CLAWSTORE").read_bytes()) == {"format": 2}
    assert claw("fsck")[0] == 0
    code, report, err = build_report(claw, *RUNS)
    assert code == 0 and report["counts"]["reused"] == 4, err  # nothing was lost: all reused


def test_repair_refuses_when_both_formats_directories_are_there_and_says_why(
        ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    root = Path(env["CLAW_STORE"])
    Store(root)
    (root / "objects" / "ab").mkdir(parents=True)  # as a migration from format 1 interrupted leaves it
    (root / "CLAWSTORE").write_bytes(b"\x00" * 13)
    code, out, err = claw("fsck", "--repair")
    assert code == 1 and "fsck: 1 problem(s)" in err, out + err
    assert "--repair cannot rewrite it: both format-1 (objects/) and format-2 (packs/, index/)" in out, out
    assert (root / "CLAWSTORE").read_bytes() == b"\x00" * 13  # nothing guessed
    (root / "CLAWSTORE").write_text('{"format": 1}\n')  # the way out the message names
    assert claw("fsck")[0] == 0 and read_format(root) == 2 and not (root / "objects").exists()


def test_a_format1_layout_gets_a_format1_marker_and_is_migrated_by_the_next_command(
        tmp_path: Path, claw: Claw) -> None:
    root = tmp_path / "old"
    for name in ("objects", "ac", "refs", "tmp"):
        (root / name).mkdir(parents=True)
    (root / "CLAWSTORE").write_bytes(b"{")
    code, out, err = claw("fsck", "--repair", "--store", str(root))
    assert code == 0 and "rewrote CLAWSTORE as format 1" in out and "(format 1) present" in out, out + err
    assert read_format(root) == 2  # opening it for the rest of the check migrated it


def test_a_store_of_a_newer_claw_is_not_called_damaged(tmp_path: Path, claw: Claw) -> None:
    root = tmp_path / "newer"
    Store(root)
    (root / "CLAWSTORE").write_text('{"format": 3}\n')
    code, out, err = claw("fsck", "--repair", "--store", str(root))
    assert code == 3 and "unsupported store format 3" in err and "damaged" not in err, out + err
    assert (root / "CLAWSTORE").read_text() == '{"format": 3}\n'
