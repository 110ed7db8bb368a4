"""`claw --help` and each command group's help: every subcommand with its whole first sentence."""

from __future__ import annotations

import click
from click.testing import CliRunner

from clawstore.cli import main


def _help(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # (the summaries are wrapped: compare the words)


def test_every_summary_is_whole_on_an_80_column_terminal() -> None:
    """click cut each summary at the terminal's width with '...': `archive` read "verify, list..."."""
    groups: list[tuple[str, ...]] = [()]
    listed = 0
    while groups:
        path = groups.pop()
        text = _help(*path)
        group: click.Command | None = main
        for name in path:
            assert isinstance(group, click.Group)
            group = group.get_command(click.Context(group), name)
        assert isinstance(group, click.Group)
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # (claw's own lists the commands not yet loaded)
            command = group.get_command(ctx, name)
            assert command is not None, (path, name)
            summary = command.get_short_help_str(limit=1000)
            assert not summary.endswith("..."), (path, name, summary)
            assert f"{name} {summary}" in text, (path, name, summary)
            listed += 1
            if isinstance(command, click.Group):
                groups.append((*path, name))
    assert listed >= 40 and "verify, list and import such files." in _help()
