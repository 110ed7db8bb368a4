"""Every runnable command block of README.md and docs/ runs verbatim and keeps its promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.testing.simulated import script_simulated_provider
from clawstore.testing.standin import StandIn
from tests.docs.doc_blocks import REPO, Block, all_blocks, parse, run_block

BLOCKS = all_blocks()


def _run(block: Block, tmp_path: Path) -> list[str]:
    with StandIn() as server:
        script_simulated_provider(server)
        outcomes = run_block(block, tmp_path, server.base_url)
    return [o.describe() + "\n  output:\n" + o.output[-2000:] for o in outcomes if not o.ok]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_documented_commands_run_as_written(block: Block, tmp_path: Path) -> None:
    failures = _run(block, tmp_path)
    assert not failures, f"{block.name}: {len(failures)} of {len(block.commands)} commands broke their promise:\n" + \
        "\n".join(failures)


def test_the_readme_tour_and_the_docs_are_covered() -> None:
    tour = [b for b in BLOCKS if b.source == REPO / "README.md"]
    assert len(tour) == 1 and len(tour[0].commands) >= 15
    assert {b.source.name for b in BLOCKS} >= {"building.md", "gc-and-archives.md"}
    assert sum(len(b.commands) for b in BLOCKS) >= 30


def test_a_renamed_flag_breaks_the_tour(tmp_path: Path) -> None:
    """What happens when code and docs drift: the tour names --dry-run, the command calls it --plan-only."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "--dry-run" in readme
    [tour] = parse(REPO / "README.md", readme.replace("--dry-run", "--plan-only"))
    failures = _run(tour.upto("--plan-only"), tmp_path)
    assert failures and all("--plan-only" in f for f in failures)
    assert "No such option '--plan-only'" in failures[0]


def test_a_broken_promise_breaks_the_tour(tmp_path: Path) -> None:
    """A promised line that the command no longer prints fails even when the exit code is 0."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "→ 0 executed" in readme
    [tour] = parse(REPO / "README.md", readme.replace("→ 0 executed", "→ 0 requests sent"))
    failures = _run(tour.upto("0 requests sent"), tmp_path)
    assert len(failures) == 1 and "0 requests sent" in failures[0]
