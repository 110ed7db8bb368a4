"""`claw view`: one static HTML page of a campaign (or a comparison), its run details in a folder beside it."""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import sys
import webbrowser
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.cli.common import closed_with_command, require_built, store_option, workspace_store_dir

if TYPE_CHECKING:
    from clawstore.report.view_beside import DetailsBeside
    from clawstore.report.view_page import Written


def _case_tags(cwd: Path) -> dict[str, tuple[str, ...]]:
    """Tags are not part of any key, so the store does not hold them: read them from the case configs
    when they are here (their tags alone). A missing or broken workspace only means the page has no tag filter."""
    try:
        from clawstore.config import find_workspace_root
        from clawstore.config.workspace import case_tags

        return case_tags(find_workspace_root(cwd))
    except Exception:  # noqa: BLE001 - tags are a convenience, never a reason to fail
        return {}


def _case_tags_beside(cwd: Path) -> Mapping[str, tuple[str, ...]]:
    """`_case_tags`, read by a process forked before the store is opened (no thread yet to fork with) while this one
    reads the store: the YAML parse holds the interpreter lock, so in this process its time (1.5 s at 10,000 cases)
    would add to the page's. Linux only; elsewhere, and if the fork fails, read here.

    The reader is forked for that one read (not a process pool's worker, which waited for more work on a pipe it held
    both ends of: a killed command left it waiting for ever): it sends the tags and ends, and if this command is gone
    its write fails (EPIPE) and it ends all the same."""
    if sys.platform != "linux":
        return _case_tags(cwd)
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return _case_tags(cwd)
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return _case_tags(cwd)
    if pid == 0:  # the reader: read, send, end (os._exit: none of the command's exit handlers, buffers or files)
        code = 1
        try:
            os.close(read_end)
            with open(write_end, "wb") as sent:
                sent.write(pickle.dumps(_case_tags(cwd)))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return closed_with_command(_TagsLater(pid, read_end, cwd))


class _TagsLater(Mapping[str, tuple[str, ...]]):
    """The forked reader's tags, waited for when first looked at (the page's summary asks for them last)."""

    def __init__(self, pid: int, read_end: int, cwd: Path):
        self._pid, self._read_end, self._cwd = pid, read_end, cwd
        self._tags: dict[str, tuple[str, ...]] | None = None

    def _got(self) -> dict[str, tuple[str, ...]]:
        if self._tags is None:
            with open(self._read_end, "rb", closefd=False) as received:
                sent = received.read()
            self.close()
            try:
                self._tags = pickle.loads(sent)
            except Exception:  # noqa: BLE001 - the reader died (killed, out of memory): read them here
                self._tags = _case_tags(self._cwd)
        return self._tags

    def close(self) -> None:
        """Its pipe closed and the reader reaped (if never read: its write fails and it ends)."""
        if self._read_end >= 0:
            os.close(self._read_end)
            self._read_end = -1
            with contextlib.suppress(ChildProcessError):  # (reaped already: a caller that reaps every child)
                os.waitpid(self._pid, 0)

    def __getitem__(self, case: str) -> tuple[str, ...]:
        return self._got()[case]

    def __iter__(self) -> Iterator[str]:
        return iter(self._got())

    def __len__(self) -> int:
        return len(self._got())


@click.command("view")
@click.option("--suite", "suite", required=True, help="Suite ID or path to its YAML.")
@click.option("--run-profile", "run_profile", required=True, help="Run profile ID or path.")
@click.option("--evaluation-profile", "evaluation_profile", default=None, help="Evaluation profile ID or path.")
@click.option("--against", "against", default=None, metavar="CAMPAIGN_ID",
              help="Compare with this campaign (<suite>__<run profile>__<evaluation profile or none>).")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default outputs/view/<campaign>.html).")
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser.")
@store_option
def view_command(suite: str, run_profile: str, evaluation_profile: str | None, against: str | None,
                 out: Path | None, open_page: bool, store_dir: Path | None) -> None:
    """Write one static HTML page: leaderboard, score-vs-cost chart, models x cases matrix, every run (their
    details in a folder beside the page, loaded when a run is opened)."""
    from clawstore.host import process_end
    from clawstore.report.view_beside import DetailsBeside
    from clawstore.report.view_page import details_dir, remove_dead_temps
    from clawstore.store import Store  # noqa: F401 - imported before the fork: the helper reads the store too

    # First: forked before the tag reader's pool and the store start a thread.
    helper = DetailsBeside(fork=process_end.is_program())
    made: dict[Path, bool] = {}  # the details folder: whether this command makes it
    written_whole = False
    try:
        written, path = _view(suite, run_profile, evaluation_profile, against, out, store_dir, helper, made)
        written_whole = True
    finally:
        helper.close()  # (first: the helper writes no shard after)
        if not written_whole:  # a full disk, Ctrl-C: no folder of shards without its page (before session 72, left)
            for folder, new in made.items():
                if new:
                    shutil.rmtree(folder, ignore_errors=True)
                else:  # one there before: kept, without the shard the helper was writing when it died (session 73)
                    remove_dead_temps(folder)
    click.echo(f"wrote {path} ({size_text(written.page_bytes)}, {written.runs} runs; their details in "
               f"{details_dir(path)}/, {size_text(written.detail_bytes)})", err=True)
    if open_page and not webbrowser.open(path.absolute().as_uri()):
        click.echo(f"claw: note: no browser could be opened here (set $BROWSER to choose one); the page is "
                   f"{path.absolute()}", err=True)


def _view(suite: str, run_profile: str, evaluation_profile: str | None, against: str | None, out: Path | None,
          store_dir: Path | None, helper: DetailsBeside, made: dict[Path, bool]) -> tuple[Written, Path]:
    """The page and its details written (`helper` making its share of the shards); where. The details folder is
    put in `made`, with whether it was not there yet."""
    from clawstore.builder.cyclic_gc import collector_paused
    from clawstore.cli.build_view import note, pending_note
    from clawstore.cli.report_cmd import _indexed
    from clawstore.config.names import campaign_ids
    from clawstore.errors import UsageError
    from clawstore.report.data import _head_ref
    from clawstore.report.view_beside import write_view
    from clawstore.report.view_data import collect
    from clawstore.report.view_page import details_dir
    from clawstore.spend.killed import killed_note
    from clawstore.store import Store
    from clawstore.store.services.migrate import open_layout

    tags = _case_tags_beside(Path.cwd())  # before the store starts a thread
    ids = campaign_ids(Path.cwd(), suite, run_profile, evaluation_profile)
    root = workspace_store_dir(store_dir, must_exist=True)
    open_layout(root, create=False)  # "no store at ..." (exit 3); never creates one
    campaigns = [ids.campaign_id] + ([against] if against else [])
    store = closed_with_command(Store(root, create=False))
    for campaign in campaigns:  # (as `claw report`: what a killed build spent is in no figure of the page)
        note(killed_note(store, campaign))
    for campaign in campaigns:  # (as `claw report` says it: one killed before its head is named, never "no build")
        require_built(store, campaign, kept_apart_ok=True)
    manifest = None
    for campaign in campaigns:  # the report's rows from the manifest, as `claw report` reads them
        manifest = _indexed(store, root, campaign)
        if manifest is None:
            break
    # The heads read under leases naming them, until the page and its details are written (the helper beside reads
    # them too): a build beside moving a ref on, then a gc, would delete a head mid-read (tests/gc/test_head_readers).
    # The report's rows and every batch of records are acyclic: the collector walking them (the report's hundreds of
    # MB, again at every batch) cost more than reading the records.
    with contextlib.ExitStack() as leases, collector_paused():
        read = {campaign: leases.enter_context(store.reading_ref(f"campaigns/{campaign}")) for campaign in campaigns}
        try:  # (the heads the report is about to read; write_view tells the helper which it read)
            helper.begin(root, [_head_ref(store, campaign, read[campaign])[0] for campaign in campaigns], manifest)
        except UsageError:
            pass  # (no build of a campaign: collect says so)
        title = "claw view: " + " vs ".join(campaigns)
        path = out or Path("outputs") / "view" / f"{ids.campaign_id}{'__vs__' + against if against else ''}.html"
        data = collect(store, campaigns, tags, manifest, read)
        for campaign in campaigns:  # (what its figures leave out: never read as 0 spent on them)
            note(pending_note(store, campaign))
        if out is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        made[details_dir(path)] = not os.path.lexists(details_dir(path))
        return write_view(store, data, title, path, helper), path


def size_text(size: int) -> str:
    """Bytes in the unit that fits: 512 bytes, 48 KB, 1.2 MB (decimal units)."""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    return f"{size / 1e6:.1f} MB"


def register(group: click.Group) -> None:
    group.add_command(view_command)
