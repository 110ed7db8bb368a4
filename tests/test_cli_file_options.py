"""Every command that writes one file the user names takes it as `-o FILE` / `--out FILE`
(`--output` names a format elsewhere: `--output json`)."""

from __future__ import annotations

import click
import pytest

from clawstore.cli import main

WRITERS = [("query",), ("view",), ("archive", "export")]


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)  # (claw's loads the command's module)
        assert found is not None, path
        command = found
    return command


@pytest.mark.parametrize("path", WRITERS, ids=" ".join)
def test_the_file_a_command_writes_is_named_by_o_or_out(path: tuple[str, ...]) -> None:
    files = [param for param in _command(path).params
             if isinstance(param, click.Option) and isinstance(param.type, click.Path) and not param.type.dir_okay]
    assert len(files) == 1, files
    assert {"-o", "--out"} <= set(files[0].opts), files[0].opts


def test_output_names_a_format_wherever_it_is_not_the_archive_file() -> None:
    """`archive export --output FILE` still works (scripts use it); nowhere else is --output a path."""
    def walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Option]]:
        found = [(path, p) for p in command.params if isinstance(p, click.Option) and "--output" in p.opts]
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, (path, name)
                found += walk(sub, (*path, name))
        return found

    for path, option in walk(main, ()):
        if path == ("archive", "export"):
            assert isinstance(option.type, click.Path)
        else:
            assert isinstance(option.type, click.Choice), (path, option.opts)
