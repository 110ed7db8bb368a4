"""Every test file in the repository is collected: pytest silently skips folders named like `build`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def uncollected(root: Path) -> list[str]:
    """Test files under root/tests that `python -m pytest --collect-only` (the README's command) misses."""
    listing = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                             cwd=root, capture_output=True, text=True, timeout=120).stdout
    collected = {line.split("::")[0].split(":")[0] for line in listing.splitlines()}
    files = sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py"))
    return [f for f in files if f not in collected]


def test_every_test_file_is_collected() -> None:
    assert uncollected(REPO) == []


def test_a_test_file_in_a_folder_pytest_ignores_is_reported(tmp_path: Path) -> None:
    (tmp_path / "tests" / "build").mkdir(parents=True)
    (tmp_path / "tests" / "fine").mkdir()
    for folder in ("build", "fine"):
        (tmp_path / "tests" / folder / "test_x.py").write_text("def test_x() -> None:\n    assert True\n")
    assert uncollected(tmp_path) == ["tests/build/test_x.py"]
