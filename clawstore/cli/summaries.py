"""Command groups whose --help gives each subcommand's whole first sentence, wrapped to the terminal, and whose
usage errors name the subcommand they are about (the group's one line is cli/__init__.py's _usage_line).

click cuts each summary at the terminal's width with '...' ("Export a campaign into one reproducible file;
verify, list..."): the list a newcomer reads first lost what most commands do.
"""

from __future__ import annotations

from typing import Any

import click


class SummaryGroup(click.Group):
    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))  # (its first sentence, whole)
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # (click's parser raises "Option '--store' requires an argument." without its
            if exc.ctx is None and ctx.invoked_subcommand:  # command's context: said of the subcommand run)
                command = self.get_command(ctx, ctx.invoked_subcommand)
                if command is not None:
                    exc.ctx = click.Context(command, info_name=ctx.invoked_subcommand, parent=ctx)
            raise
