"""Every runnable command block of README.md and docs/ runs verbatim and keeps its promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.testing.simulated import script_simulated_provider
from clawstore.testing.standin import StandIn
from tests.docs.doc_blocks import REPO, Block, all_blocks, parse, run_block
from tests.support.once import made_once

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


def _drifted_tour(made: Path) -> None:
    """The tour with both drifts (a renamed flag, a broken promise) run once up to the renamed flag: each test below
    reads the failures it is about, and that no other line failed."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "--dry-run" in readme and "→ 0 executed" in readme
    [tour] = parse(REPO / "README.md", readme.replace("--dry-run", "--plan-only").replace("→ 0 executed",
                                                                                           "→ 0 requests sent"))
    (made / "failures.json").write_text(json.dumps(_run(tour.upto("--plan-only"), made / "run")))


@pytest.fixture
def drifted(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The drifted tour's failures, run once in the whole run (tests/support/once.py)."""
    failures = json.loads((made_once(tmp_path_factory, "drifted-tour", _drifted_tour) / "failures.json").read_text())
    assert failures and all("--plan-only" in f or "0 requests sent" in f for f in failures)  # (no other line broke)
    return failures


def test_a_renamed_flag_breaks_the_tour(drifted: list[str]) -> None:
    """What happens when code and docs drift: the tour names --dry-run, the command calls it --plan-only."""
    failures = [f for f in drifted if "0 requests sent" not in f]
    assert failures and all("--plan-only" in f for f in failures)
    assert "no such option '--plan-only'" in failures[0]


def test_a_broken_promise_breaks_the_tour(drifted: list[str]) -> None:
    """A promised line that the command no longer prints fails even when the exit code is 0."""
    failures = [f for f in drifted if "--plan-only" not in f]
    assert len(failures) == 1 and "0 requests sent" in failures[0]
    assert "promised exit 0, '0 requests sent'; got exit 0" in failures[0]
