"""A read command given a store that is not there (a mistyped --store or $CLAW_STORE) answers as for an empty store
and makes nothing on disk: no directory, no lock file (it used to create an empty store at the typo). A build still
creates its store."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp")
READS = [("status",), ("status", "--output", "json"), ("plan",), ("plan", "--output", "json"), ("explain",),
         ("build", "--dry-run"), ("build", "--dry-run", "--output", "json")]


def _answer(claw: Claw, command: tuple[str, ...], store: Path) -> tuple[int, str, str]:  # noqa: F811
    code, out, err = claw(*command, *CAMPAIGN, "--store", str(store))
    return code, out.replace(str(store), "STORE"), err.replace(str(store), "STORE")


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_command_answers_an_absent_store_as_empty_and_makes_nothing(
        ws: Workspace, claw: Claw, tmp_path: Path, command: tuple[str, ...],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    empty = tmp_path / "empty"
    Store(empty).close()
    typo = tmp_path / "typo" / "stor"
    answer = _answer(claw, command, typo)
    assert not (tmp_path / "typo").exists()
    assert not any(p.name.startswith(".typo") for p in tmp_path.iterdir())  # (no staging sibling either)
    assert answer == _answer(claw, command, empty)
    assert answer[0] == 0, answer
    assert not any(scratch.iterdir())  # (the empty store standing in is gone with the command)


def test_claw_store_naming_an_absent_store_is_read_as_empty(ws: Workspace, claw: Claw, tmp_path: Path,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "typo"))
    code, out, err = claw("status", *CAMPAIGN)
    assert code == 0, err
    assert "never" in out.lower() + err.lower()
    assert str(tmp_path / "typo") in err  # the note names the store the user gave, not a stand-in's
    assert not (tmp_path / "typo").exists()


def test_a_build_still_creates_its_store(ws: Workspace, claw: Claw, standin: StandIn,  # noqa: F811
                                         tmp_path: Path) -> None:
    store = tmp_path / "new" / "store"
    code, out, err = claw.build("--store", str(store))
    assert code == 0, err
    assert (store / "packs").is_dir()
    code, out, err = claw("status", *CAMPAIGN, "--store", str(store))
    assert code == 0 and "never" not in err, err
