"""Remake the screenshots in docs/img/ with the tests that check what they show.

    python -m tests.view.screenshots [--out docs/img]

The browser tests save the leaderboard, matrix and run page, and the intervals, paired comparison and
judge reliability of two campaigns (stats-*.png), from headless Chromium; the terminal test
saves what the live build display showed in tmux (with its colours), which is drawn here as SVG by
rich and photographed by the same Chromium.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.browser import start_chromium

REPO = Path(__file__).resolve().parents[2]
TESTS = ["tests/view/test_view_browser.py::test_leaderboard_run_page_and_filters_in_chromium",
         "tests/stats/test_stats_cli.py::test_view_shows_intervals_the_paired_comparison_and_the_judge",
         "tests/builder/test_progress.py::test_live_display_in_a_terminal"]


def ansi_to_png(ansi: Path, png: Path, title: str) -> None:
    from rich.console import Console
    from rich.text import Text

    lines = ansi.read_text().rstrip("\n").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    width = max(len(Text.from_ansi(line).plain) for line in lines) + 2
    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=width, file=sink)
        console.print(Text.from_ansi("\n".join(lines)))
    svg = png.with_suffix(".svg")
    svg.write_text(console.export_svg(title=title))
    profile = Path(tempfile.mkdtemp(prefix="claw-shot-"))
    driver = start_chromium(profile, width=1100, height=420)
    try:
        driver.get(svg.absolute().as_uri())
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        svg.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CLAW_SCREENSHOTS": str(args.out.absolute())}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=REPO, env=env,
                   check=True)
    ansi = args.out / "progress-live.ansi"
    ansi_to_png(ansi, args.out / "progress-live.png", "claw build")
    ansi.unlink()
    for name in sorted(p.name for p in args.out.glob("*.png")):
        print(args.out / name)


if __name__ == "__main__":
    main()
