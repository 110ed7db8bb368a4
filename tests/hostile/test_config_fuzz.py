"""Seeded random mutations of a workspace that uses every field of the schema: whatever a file says,
loading the workspace gives a workspace or config issues, each one bounded line; never an exception.

(A longer run of the same mutations over the compat corpora found the unhashable-kind traceback and
the forged lines that tests/config/test_broken_corpus.py now keeps.)"""

from __future__ import annotations

import copy
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from clawstore.config import load_workspace
from clawstore.errors import ClawError
from tests.config.workspace_builder import COMPAT

VALUES: list[Any] = [None, 0, -1, 10**30, 1.5, float("inf"), float("nan"), True, "", "x" * 3000, [], {}, [1, 2],
                     {"a": 1}, [None], [{}], "../../etc/passwd", "/etc/passwd", "a\nb", "é\u2028", 2**63, [[[[]]]]]
KEYS: list[Any] = ["zz_unknown", "a\nb", "k" * 3000, 12, None, True, "", "[0]"]
ROUNDS = 250


def _places(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _places(value, (*at, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += _places(value, (*at, index))
    return found


def _mutated(doc: Any, rng: random.Random) -> Any:
    at = rng.choice(_places(doc))
    if not at:
        return copy.deepcopy(rng.choice(VALUES))
    parent = doc
    for part in at[:-1]:
        parent = parent[part]
    roll = rng.random()
    if roll < 0.55:
        parent[at[-1]] = copy.deepcopy(rng.choice(VALUES))
    elif roll < 0.75:
        del parent[at[-1]]
    elif isinstance(parent, dict):
        parent[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES))
    else:
        parent.append(copy.deepcopy(parent[at[-1]]))
    return doc


@pytest.mark.parametrize("seed", range(2))
def test_mutated_configs_give_issues_never_exceptions(seed: int, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(COMPAT, root)
    files = sorted((root / "configs").rglob("*.y*ml"))
    originals = {path: path.read_bytes() for path in files}
    rng = random.Random(seed)
    reported = 0
    for _ in range(ROUNDS):
        path = rng.choice(files)
        doc = yaml.safe_load(originals[path])
        for _ in range(rng.randint(1, 3)):
            doc = _mutated(doc, rng)
        path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
        try:
            issues = load_workspace(root).issues
        except ClawError:  # (a workspace-wide refusal is a one-line error too)
            issues = []
        finally:
            path.write_bytes(originals[path])
        for issue in issues:
            assert "\n" not in str(issue) and len(str(issue)) < 2000, str(issue)[:300]
        reported += bool(issues)
    assert reported > ROUNDS // 2  # (the mutations do break configs: this test sees the error paths)
