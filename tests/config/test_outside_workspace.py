"""Outside a workspace every command says the same thing: what claw looked for (configs/, its store) and where."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main

CAMPAIGN = ["--suite", "s", "--run-profile", "r"]
COMMANDS = [["build", *CAMPAIGN], ["status", *CAMPAIGN], ["plan", *CAMPAIGN], ["validate"], ["query", "leaderboard"],
            ["report", *CAMPAIGN], ["view", *CAMPAIGN], ["gc", "--dry-run"], ["fsck"]]


def test_every_command_outside_a_workspace_gives_one_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    said = {}
    for args in COMMANDS:
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (2, 3), (args, result.output)
        said[args[0]] = result.stderr
    expected = (f"claw: error: no workspace found: claw looks for a configs/ directory in {tmp_path} and every "
                f"directory above it, and for its store at {tmp_path / 'store'} (found neither); run claw in a "
                "workspace (a checkout, or any directory holding configs/), or name an existing store with "
                "--store DIR or $CLAW_STORE\n")
    assert said == dict.fromkeys(said, expected)
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_a_store_without_configs_is_named_as_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()
    result = CliRunner().invoke(main, ["build", *CAMPAIGN])
    assert result.exit_code == 2 and "(found the store but no configs/)" in result.stderr
