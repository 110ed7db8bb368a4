"""Where a command's store is: a leading `~` in --store or $CLAW_STORE is the home directory, as a shell would
have made it (a quoted `CLAW_STORE="~/runs"` used to make a directory named `~` in the working directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.project.places import resolve_store_dir
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.workspace import Workspace


def test_a_tilde_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAW_STORE", "~/runs")
    assert resolve_store_dir(None) == tmp_path / "home" / "runs"
    assert resolve_store_dir(Path("~/other")) == tmp_path / "home" / "other"
    monkeypatch.delenv("CLAW_STORE")
    assert resolve_store_dir(None, tmp_path / "ws") == tmp_path / "ws" / "store"


def test_a_build_with_a_quoted_tilde_store_writes_under_home(ws: Workspace, claw: Claw, standin: StandIn,  # noqa: F811
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAW_STORE", "~/runs")
    code, out, err = claw.build()
    assert code == 0, err
    assert (tmp_path / "home" / "runs" / "packs").is_dir()
    assert not (ws.root / "~").exists()
    code, out, err = claw("status", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and "never" not in err, err  # the same store found again
