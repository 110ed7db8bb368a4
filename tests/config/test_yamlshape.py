"""The cheap textual depth bound never under-counts, so skipping the event scan is safe."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from clawstore.config.yamlio import YamlProblem, parse_yaml_text
from clawstore.config.yamlshape import _yaml_depth_bound

REPO = Path(__file__).resolve().parents[2]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _random_tree(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.15:
        return rng.choice(["plain", "a: b", "- x", "[y]", 3, None, "multi\nline"])
    if rng.random() < 0.5:
        return [_random_tree(rng, depth - 1) for _ in range(rng.choice([1, 1, 2]))]
    return {f"k{i}": _random_tree(rng, depth - 1) for i in range(rng.choice([1, 1, 2]))}


@pytest.mark.parametrize("seed", range(40))
def test_the_bound_is_never_below_the_real_depth(seed: int) -> None:
    rng = random.Random(seed)
    tree = _random_tree(rng, rng.randint(1, 25))
    for flow in (False, True, None):
        for indent in (2, 4):
            text = yaml.safe_dump(tree, default_flow_style=flow, indent=indent, width=rng.choice([20, 80]))
            bound = _yaml_depth_bound(text)
            assert bound is None or bound >= _depth(yaml.safe_load(text)), text


def test_the_bound_lets_the_example_configs_skip_the_scan() -> None:
    bounds = [_yaml_depth_bound(p.read_text()) for p in (REPO / "configs").rglob("*.y*ml")]
    assert bounds and sum(b is not None and b <= 100 for b in bounds) >= len(bounds) - 2


def test_hand_written_compact_forms_are_counted() -> None:
    for text in ("- - - - - x\n", "- &a\n  - &b\n    - c: [[d]]\n", "? a\n: - b\n  - - c\n",
                 "a:\n- b:\n  - c:\n    - d\n"):
        assert _yaml_depth_bound(text) >= _depth(yaml.safe_load(text))


def test_an_alias_bomb_fails_fast_even_when_shallow() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    with pytest.raises(YamlProblem, match="alias bomb"):
        parse_yaml_text(bomb)
    assert parse_yaml_text("a: &a [1, 2]\nb: *a\n") == {"a": [1, 2], "b": [1, 2]}
