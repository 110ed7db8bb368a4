"""Command groups whose --help gives each subcommand's whole first sentence, wrapped to the terminal.

click cuts each summary at the terminal's width with '...' ("Export a campaign into one reproducible file;
verify, list..."): the list a newcomer reads first lost what most commands do.
"""

from __future__ import annotations

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
