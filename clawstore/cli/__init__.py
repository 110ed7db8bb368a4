"""The `claw` command line. Thin: each command parses, asks the front (clawstore/project/front.py), prints.

One command (or command group) per module; each module exposes `register(group)`. Exit codes are set
here and in the commands only: the library raises typed errors (clawstore/errors.py).
"""

from __future__ import annotations

from clawstore.cli.loading import end_quiet_interrupts, quiet_interrupts

_loaded = quiet_interrupts()  # (first: a Ctrl-C while the modules below load is one line, exit 130)

# ruff: noqa: E402 - the imports below come after the interrupt guard on purpose (cli/loading.py)
import errno
import importlib
import os
import select
import sys
from typing import Any

import click

from clawstore import __version__
from clawstore.cli.summaries import SummaryGroup
from clawstore.cli.unused_imports import skip_unused_imports
from clawstore.errors import ClawError, StoreError, UsageError, one_line
from clawstore.host import process_end

COMMAND_MODULES = [
    "clawstore.cli.validate_cmd",
    "clawstore.cli.store_cmd",
    "clawstore.cli.put_cmd",
    "clawstore.cli.cat_cmd",
    "clawstore.cli.ls_tree_cmd",
    "clawstore.cli.checkout_cmd",
    "clawstore.cli.fsck_cmd",
    "clawstore.cli.build_cmd",
    "clawstore.cli.status_cmd",
    "clawstore.cli.explain_cmd",
    "clawstore.cli.plan_cmd",
    "clawstore.cli.compare_cmd",
    "clawstore.cli.import_pae_cmd",
    "clawstore.cli.query_cmd",
    "clawstore.cli.report_cmd",
    "clawstore.cli.gc_cmd",
    "clawstore.cli.pin_cmd",
    "clawstore.cli.unpin_cmd",
    "clawstore.cli.refs_cmd",
    "clawstore.cli.archive_cmd",
    "clawstore.cli.demo_cmd",
    "clawstore.cli.standin_cmd",
    "clawstore.cli.remote_cmd",
    "clawstore.cli.push_cmd",
    "clawstore.cli.pull_cmd",
    "clawstore.cli.view_cmd",
    "clawstore.cli.trust_cmd",
    "clawstore.cli.key_cmd",
    "clawstore.cli.batch_cmd",
]

# OSErrors that say a path given is wrong (exit 2, as bad usage); any other is the disk's (exit 3)
PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP}
SIGPIPE_EXIT = 128 + 13  # what a shell shows for a program ended by SIGPIPE (`git log | head`)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more (`claw explain … | head`); not a provider's socket reset, whose
    EPIPE is a BrokenPipeError too."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # (no poll, a stdout without a descriptor)
        return False


def _exit_if_reader_gone(exc: OSError) -> None:
    """Exit 141 when `exc` is stdout's reader having left: nothing is wrong, nothing more can be shown (it said
    "claw: error: Broken pipe", exit 3). Output still buffered goes nowhere, so the exit's flush cannot fail again."""
    if isinstance(exc, BrokenPipeError) and _stdout_reader_gone():
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(SIGPIPE_EXIT)


class ClawGroup(SummaryGroup):
    """Turns every expected error into one line on stderr and its exit code (never a traceback), and
    an interrupt (Ctrl-C or SIGTERM) into `claw: interrupted` and 130."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        # `claw --help | head -1`: the help is written while the arguments are parsed, before invoke (click
        # itself ended it with exit 1)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except OSError as exc:
            _exit_if_reader_gone(exc)
            raise

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        restore = process_end.sigterm_interrupts()  # SIGTERM ends every command as Ctrl-C does (130)
        try:
            end_quiet_interrupts()  # (entry's: the arguments are read, the command's own handling starts)
            return super().invoke(ctx)
        except ClawError as exc:
            click.echo(f"claw: error: {one_line(str(exc))}", err=True)
            sys.exit(exc.exit_code)
        except OSError as exc:  # a path no command checked for this (a name too long, say), or the disk
            _exit_if_reader_gone(exc)
            where = f"{one_line(str(exc.filename), 200)}: " if exc.filename is not None else ""
            click.echo(f"claw: error: {one_line(where + (exc.strerror or str(exc)))}", err=True)
            sys.exit(UsageError.exit_code if exc.errno in PATH_ERRNOS else StoreError.exit_code)
        except KeyboardInterrupt as exc:  # a build's interrupt says what it committed and what is left
            click.echo(f"claw: {exc}" if str(exc) else "claw: interrupted", err=True)
            sys.exit(130)
        finally:
            restore()
            if process_end.is_program():  # the command is over: a Ctrl-C before the process ends is one line and
                quiet_interrupts()  # 130 too (it was click's "Aborted!", exit 1); never so in a caller's process


@click.group(cls=ClawGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="claw")
def main() -> None:
    """claw: benchmark LLMs and OpenClaw agents with make-like rebuilds over a content-addressed store."""


def entry() -> None:
    """The `claw` program (its console script, and `python -m clawstore.cli`): main(), without the
    imports it never needs (cli/unused_imports.py), ending the process quickly when a command left
    teardown to its end (clawstore/host/process_end.py)."""
    quiet_interrupts()  # (again, until the command starts: a Ctrl-C while click reads the arguments said "Aborted!")
    process_end.claim_program()
    skip_unused_imports()
    try:
        main()
    except SystemExit as exc:
        process_end.finish(exc.code)
        raise


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(main)
_loaded()  # (loaded: Ctrl-C is Python's KeyboardInterrupt again, which each command turns into its own line)
