"""Results imported with --untrusted are kept apart, so a build pays for their nodes again: plan, status, explain and
build say so once, on stderr, with how many nodes and the command that would let the build reuse them instead."""

from __future__ import annotations

from pathlib import Path

from clawstore.testing.standin import StandIn, error
from tests.hostile.conftest import RUNS, User
from tests.support.workspace import standard

TRUST_ADD = "claw trust add"


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if TRUST_ADD in line]


def test_a_build_that_would_pay_for_untrusted_results_says_so_once_before_paying(
        alice: User, bob: User, tmp_path: Path, standin: StandIn) -> None:
    mine = standard(tmp_path / "alice")
    alice.here("build", *RUNS, "--case", "alpha", cwd=mine.root)  # beta's 2 runs not built: not in the archive
    archive = tmp_path / "alice.claw"
    alice.here("archive", "export", *RUNS, "-o", str(archive), cwd=mine.root)
    signer = alice.key(tmp_path)
    assert _notes(alice.claw("plan", *RUNS, cwd=mine.root).stderr) == []  # nothing kept apart: nothing said

    theirs = standard(tmp_path / "bob")
    bob.here("archive", "import", str(archive), "--untrusted", cwd=theirs.root)
    for command in (["plan"], ["status"], ["explain"], ["build", "--dry-run"]):
        done = bob.claw(*command, *RUNS, cwd=theirs.root)
        assert done.returncode == 0, done.stderr
        assert len(_notes(done.stderr)) == 1, (command, done.stderr)  # once
        [note] = _notes(done.stderr)
        assert note.startswith("claw: note: 2 nodes ") and f"{TRUST_ADD} {signer}" in note, (command, note)

    before = len(standin.requests)
    built = bob.claw("build", *RUNS, "--progress", "plain", cwd=theirs.root)
    assert built.returncode == 0, built.stderr
    assert len(standin.requests) - before == 4  # paid again: alpha's 2 kept apart and beta's 2
    assert _notes(built.stderr) == [built.stderr.splitlines()[0]], built.stderr  # said once, before any progress
    assert built.stderr.startswith("claw: note: 2 nodes "), built.stderr

    # every node now has bob's own result: nothing to run, nothing said
    assert _notes(bob.claw("plan", *RUNS, cwd=theirs.root).stderr) == []


def test_a_node_whose_own_record_is_a_failure_is_counted_the_build_pays_for_it_again(
        alice: User, bob: User, tmp_path: Path, standin: StandIn) -> None:
    mine = standard(tmp_path / "alice")
    alice.here("build", *RUNS, "--case", "alpha", cwd=mine.root)
    archive = tmp_path / "alice.claw"
    alice.here("archive", "export", *RUNS, "-o", str(archive), cwd=mine.root)

    theirs = standard(tmp_path / "bob")
    bob.here("archive", "import", str(archive), "--untrusted", cwd=theirs.root)
    standin.script("*", error(400, "refused"), match="What is 2 + 2?")  # alpha's runs fail here: retried next build
    assert bob.claw("build", *RUNS, "--case", "alpha", cwd=theirs.root).returncode == 1
    for command in (["plan"], ["status"], ["explain"]):
        [note] = _notes(bob.claw(*command, *RUNS, cwd=theirs.root).stderr)  # (before session 61: none for them)
        assert note.startswith("claw: note: 2 nodes "), (command, note)
    # a build that makes no plan of its own (no --max-cost, no live display) counts them as well, before paying
    before = len(standin.requests)
    built = bob.claw("build", *RUNS, "--case", "alpha", "--progress", "plain", cwd=theirs.root)
    assert len(standin.requests) - before == 2  # paid again
    assert built.stderr.startswith("claw: note: 2 nodes "), built.stderr


def test_an_untrusted_import_says_in_its_summary_how_many_entries_it_kept_apart(
        alice: User, bob: User, tmp_path: Path) -> None:
    """The summary said '0 action-cache entries written, 0 kept' while every entry was kept apart (session 77)."""
    mine = standard(tmp_path / "alice")
    alice.here("build", *RUNS, "--case", "alpha", cwd=mine.root)
    archive = tmp_path / "alice.claw"
    alice.here("archive", "export", *RUNS, "-o", str(archive), cwd=mine.root)

    theirs = standard(tmp_path / "bob")
    done = bob.claw("archive", "import", str(archive), "--untrusted", cwd=theirs.root)
    assert done.returncode == 0, done.stderr
    [summary] = [line for line in done.stdout.splitlines() if line.startswith("imported ")]
    assert "2 action-cache entries kept apart in untrusted/" in summary, summary
    assert "written" not in summary, summary  # (none is: saying '0 written, 0 kept' read as nothing in the archive)

    trusted = standard(tmp_path / "carol")  # a trusted import's summary is as before
    bob.here("trust", "add", alice.key(tmp_path), cwd=trusted.root)
    [summary] = [line for line in bob.here("archive", "import", str(archive), cwd=trusted.root).splitlines()
                 if line.startswith("imported ")]
    assert summary.endswith("; 2 action-cache entries written, 0 kept"), summary
