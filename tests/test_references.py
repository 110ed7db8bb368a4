"""The repository explains itself: every document it points at is in the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Documents that live outside this repository (spelled in pieces so this file does not name them).
OUTSIDE = re.compile("|".join([r"\bARCHITECTURE" + r"(\.md)?\s*§", r"\bREFERENCE" + r"(\.md)?\s*§",
                               r"\.\./" + r"shared/(design|reference|seeds|compat|bench|hooks)\b",
                               "/work/" + "shared"]))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def tracked(*patterns: str) -> list[Path]:
    names = subprocess.run(["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / name for name in names if (REPO / name).is_file()]


def test_no_file_points_at_documents_outside_the_repository() -> None:
    offenders = [f"{path.relative_to(REPO)}:{n}" for path in tracked()
                 if path.suffix in {".py", ".md", ".sql", ".toml", ".sh", ".yaml", ".yml", ""}
                 for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                 if OUTSIDE.search(line)]
    assert offenders == []


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = [f"{doc.relative_to(REPO)} → {target}" for doc in tracked("*.md")
              for target in LINK.findall(doc.read_text())
              if "://" not in target and not target.startswith("mailto:")
              and not (doc.parent / target).exists()]
    assert broken == []
