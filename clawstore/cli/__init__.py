"""The `claw` command line. Thin: each command parses, asks the front (clawstore/project/front.py), prints.

One command (or command group) per module; each module exposes `register(group)` and is imported only when its
command runs or is listed (COMMAND_MODULES). Exit codes are set here and in the commands only: the library raises
typed errors (clawstore/errors.py).
"""

from __future__ import annotations

import _signal  # (built in, as sys and os are loaded already: no file is looked for before the guard is up)
import os
import sys


def _interrupted_while_loading(signum: int, frame: object) -> None:
    sys.stderr.write("claw: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


try:  # (first of all: the file lookups of the next import took milliseconds on a loaded machine, a traceback's window)
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupted_while_loading)
except ValueError:
    pass  # (not the main thread: claw does not own SIGINT there)

from clawstore.cli.loading import INTERRUPTED_EXIT, end_quiet_interrupts, quiet_interrupts

_loaded = quiet_interrupts(_interrupted_while_loading)  # (a Ctrl-C while the modules below load: one line, exit 130)

# ruff: noqa: E402 - the imports below come after the interrupt guard on purpose (cli/loading.py)
import atexit
import errno
import importlib
import select
from typing import Any

import click

from clawstore import __version__
from clawstore.cli.summaries import SummaryGroup
from clawstore.cli.unused_imports import skip_unused_imports
from clawstore.errors import ClawError, StoreError, UsageError, one_line
from clawstore.host import process_end

# Each top-level command's name and the module that registers it (`register(group)`): a command's module is imported
# only when that command runs or is listed (`claw --help`), not every command's at each start (~0.1 s).
# tests/test_cli_commands_table.py proves this matches what the modules register.
COMMAND_MODULES = {
    "validate": "clawstore.cli.validate_cmd",
    "store": "clawstore.cli.store_cmd",
    "put": "clawstore.cli.put_cmd",
    "cat": "clawstore.cli.cat_cmd",
    "ls-tree": "clawstore.cli.ls_tree_cmd",
    "checkout": "clawstore.cli.checkout_cmd",
    "fsck": "clawstore.cli.fsck_cmd",
    "build": "clawstore.cli.build_cmd",
    "status": "clawstore.cli.status_cmd",
    "explain": "clawstore.cli.explain_cmd",
    "plan": "clawstore.cli.plan_cmd",
    "compare": "clawstore.cli.compare_cmd",
    "import-pae": "clawstore.cli.import_pae_cmd",
    "query": "clawstore.cli.query_cmd",
    "report": "clawstore.cli.report_cmd",
    "gc": "clawstore.cli.gc_cmd",
    "pin": "clawstore.cli.pin_cmd",
    "unpin": "clawstore.cli.unpin_cmd",
    "refs": "clawstore.cli.refs_cmd",
    "archive": "clawstore.cli.archive_cmd",
    "demo": "clawstore.cli.demo_cmd",
    "standin": "clawstore.cli.standin_cmd",
    "remote": "clawstore.cli.remote_cmd",
    "push": "clawstore.cli.push_cmd",
    "pull": "clawstore.cli.pull_cmd",
    "view": "clawstore.cli.view_cmd",
    "trust": "clawstore.cli.trust_cmd",
    "key": "clawstore.cli.key_cmd",
    "batch": "clawstore.cli.batch_cmd",
}

# OSErrors that say a path given is wrong (exit 2, as bad usage); any other is the disk's (exit 3)
PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP}
SIGPIPE_EXIT = 128 + 13  # what a shell shows for a program ended by SIGPIPE (`git log | head`)


def _duckdb_interrupted(exc: BaseException) -> bool:
    """DuckDB's own look at Python's signals took a Ctrl-C (or SIGTERM) mid-query: its InterruptException, or the
    `RuntimeError: Query interrupted` it made of the KeyboardInterrupt, is the interrupt, whichever command's query it
    stopped (`claw query` says so itself; `view`'s and `report`'s reads of the manifest were a traceback, exit 1,
    before session 73). Told by name: duckdb is not imported for this."""
    kind = type(exc)
    return (kind.__name__ == "InterruptException" and kind.__module__.endswith("duckdb")) or \
        (kind is RuntimeError and str(exc) == "Query interrupted")


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


def _usage_line(exc: click.UsageError) -> str:
    """click's usage error as claw's one line: the command, what was wrong and expected, where to look (`claw build:
    no such option '--nope' (claw build --help lists them)`), where click wrote `Usage: …`, `Try …`, a blank line and
    `Error: …`, naming the program as it was started (`python -m clawstore.cli`)."""
    names = []
    ctx = exc.ctx
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    command = " ".join(["claw", *reversed(names)])
    text = one_line(exc.format_message().strip())
    if ". (Did you mean" in text:  # (click's "No such option '--nope'. (Did you mean one of: …?)")
        text = text.replace(". (Did you mean", "; did you mean").removesuffix(")")
    text = text.replace(". Did you mean", "; did you mean")
    text = text.removesuffix(".")
    text = text[:1].lower() + text[1:]
    listed = isinstance(exc, (click.exceptions.NoSuchOption, click.exceptions.NoSuchCommand))
    return f"{command}: {text} ({command} --help{' lists them' if listed else ''})"


def _usage_exit(exc: click.UsageError) -> None:
    """A usage error's one line and exit 2; a group given no command still shows its help, as click does."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc
    click.echo(_usage_line(exc), err=True)
    sys.exit(UsageError.exit_code)


class ClawGroup(SummaryGroup):
    """Turns every expected error into one line on stderr and its exit code (never a traceback), and
    an interrupt (Ctrl-C or SIGTERM) into `claw: interrupted` and 130. Its commands' modules (`modules`: a command's
    name and its module) are imported when a command is asked for by name or all are listed."""

    def __init__(self, *args: Any, modules: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.modules = modules or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.modules})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # (a Ctrl-C while the module loads: before invoke, entry's guard holds; within it, invoke's own line and 130)
        if cmd_name not in self.commands and cmd_name in self.modules:
            importlib.import_module(self.modules[cmd_name]).register(self)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # (click's "Did you mean" looks among the loaded commands only)
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=self.list_commands(ctx),
                                                 ctx=ctx) from None

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        # `claw --help | head -1`: the help is written while the arguments are parsed, before invoke (click
        # itself ended it with exit 1)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # (`claw --nope`: the program's own options)
            _usage_exit(exc)
            raise
        except OSError as exc:
            _exit_if_reader_gone(exc)
            raise

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        restore = process_end.sigterm_interrupts()  # SIGTERM ends every command as Ctrl-C does (130)
        try:
            end_quiet_interrupts()  # (entry's: the arguments are read, the command's own handling starts)
            try:
                return super().invoke(ctx)
            finally:
                # The command is over: a Ctrl-C while its outcome is said (below) is one line and 130 too. Set only in
                # the outer `finally`, one landing while an error was printed escaped to click: "Aborted!", exit 1
                # (tests/test_cli_interrupt_loading.py's sweep, session 78's CI, at `status`'s usage error).
                if process_end.is_program():
                    quiet_interrupts()
        except click.UsageError as exc:  # a command's arguments (`claw build --nope`), an unknown command
            _usage_exit(exc)
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
        except Exception as exc:
            if not _duckdb_interrupted(exc):
                raise
            click.echo("claw: interrupted", err=True)
            sys.exit(130)
        finally:
            restore()
            if process_end.is_program():  # the command is over: a Ctrl-C before the process ends is one line and
                quiet_interrupts()  # 130 too (it was click's "Aborted!", exit 1); never so in a caller's process


@click.group(cls=ClawGroup, modules=COMMAND_MODULES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="claw")
def main() -> None:
    """claw: benchmark LLMs and OpenClaw agents with make-like rebuilds over a content-addressed store."""


def entry() -> None:
    """The `claw` program (its console script, and `python -m clawstore.cli`): main(), without the
    imports it never needs (cli/unused_imports.py), ending the process quickly when a command left
    teardown to its end (clawstore/host/process_end.py)."""
    quiet_interrupts()  # (again, until the command starts: a Ctrl-C while click reads the arguments said "Aborted!")
    atexit.register(process_end.ignore_late_interrupts)  # (first: the last to run, as the teardown starts)
    process_end.claim_program()
    skip_unused_imports()
    try:
        main()
    except SystemExit as exc:
        process_end.finish(exc.code)  # (teardown left to the end: claw's exit work, then os._exit, this code)
        if exc.code == INTERRUPTED_EXIT:  # (`claw: interrupted` said: 130, never the interpreter's end by SIGINT)
            process_end.end_interrupted()
        raise


_loaded()  # (loaded: Ctrl-C is Python's KeyboardInterrupt again, which each command turns into its own line)
