"""The demo's packaged example configs are as shipped, and a changed copy stops `claw demo` with a clear
message before anything runs; a checkout's own configs/ is the user's (editing it changes no demo)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawstore.demo import DemoError, examples, run_demo

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_examples_are_as_shipped() -> None:
    assert examples.changes() == [], ("the demo's example configs differ from clawstore/demo/configs.blake3; "
                                      "after changing them on purpose: python3 -m clawstore.demo.examples --write")


def test_the_checkout_configs_are_a_directory_of_their_own() -> None:
    """Not a link into the package: the README's tour edits configs/, never what `claw demo` runs."""
    assert (REPO / "configs").is_dir() and not (REPO / "configs").is_symlink()
    assert not any(path.is_symlink() for path in (REPO / "configs").rglob("*"))


def test_a_changed_example_stops_the_demo_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "configs"
    shutil.copytree(examples.EXAMPLE_CONFIGS, copy)
    case = copy / "cases" / "arithmetic_plain" / "test.yaml"
    case.write_text(case.read_text().replace("17 * 23", "17 * 24"))  # what the README's tour edits
    (copy / "suites" / "extra.yaml").write_text("suite_id: extra\n")
    monkeypatch.setattr(examples, "EXAMPLE_CONFIGS", copy)
    lines: list[str] = []
    with pytest.raises(DemoError) as caught:
        run_demo(tmp_path / "ws", False, lines.append)
    message = str(caught.value)
    assert "changed: cases/arithmetic_plain/test.yaml" in message and "added: suites/extra.yaml" in message
    assert "git checkout clawstore/demo/configs" in message
    assert lines == [] and not (tmp_path / "ws").exists()  # refused before anything was made or run
