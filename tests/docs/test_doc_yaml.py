"""Every ```yaml block of README.md and docs/ is config claw takes: each is a part of a config (a suite's `models:`, an
evaluation profile's `judges:`, a case's `rubric:`, the workspace's `remotes:`), so it is put where its part goes in a
copy of the example workspace and that workspace validates (`claw validate`, in-process: exit 0); `remotes:` is read
by `claw remote list`. A block with a part of no kind listed here fails the test, so a new block is looked at."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from clawstore.cli import main
from tests.docs.doc_blocks import EXAMPLES, REPO
from tests.docs.test_doc_names import documents

# Where each part a block may hold goes: (file under configs/, how it replaces that file's part)
SUITE, PROFILE, CASE = "suites/llm_probe_smoke.yaml", "evaluation_profiles/default_judge.yaml", \
    "cases/arithmetic_plain/test.yaml"


def blocks() -> list[tuple[str, str]]:
    """(where, text) of every ```yaml block, indented ones (in a list item) included."""
    found = []
    for doc in documents():
        lines = doc.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.strip() == "```yaml":
                indent = len(line) - len(line.lstrip())
                end = next(i for i in range(n + 1, len(lines)) if lines[i].strip() == "```")
                found.append((f"{doc.relative_to(REPO)}:{n + 1}", "\n".join(x[indent:] for x in lines[n + 1:end])))
    return found


BLOCKS = blocks()


def _edit(configs: Path, relative: str, change: Any) -> None:
    path = configs / relative
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _judges(data: dict[str, Any], judges: list[dict[str, Any]]) -> None:
    data["judges"] = judges
    data["judge_runs"] = [{"judge_run_id": "main", "judge_id": judges[0]["judge_id"], "repetitions": 1}]


def claw_takes(text: str, workspace: Path) -> tuple[int, str]:
    """The block put in place in a copy of the example workspace at `workspace` (the current directory meanwhile):
    `claw validate`'s exit code and output, then, for `remotes:`, `claw remote list`'s."""
    parts = yaml.safe_load(text)
    assert isinstance(parts, dict) and parts
    assert set(parts) <= {"models", "judges", "rubric", "remotes"}, f"a part of no known kind: {set(parts)}"
    shutil.copytree(EXAMPLES, workspace / "configs")
    configs = workspace / "configs"
    if "models" in parts:
        _edit(configs, SUITE, lambda d: d.update(models=parts["models"]))
    if "judges" in parts:
        _edit(configs, PROFILE, lambda d: _judges(d, parts["judges"]))
    if "rubric" in parts:
        _edit(configs, CASE, lambda d: d.update(rubric=parts["rubric"]))
    runner = CliRunner()
    result = runner.invoke(main, ["validate"])
    if result.exit_code or "remotes" not in parts:
        return result.exit_code, result.output
    (workspace / "claw.yaml").write_text(text, encoding="utf-8")
    listed = runner.invoke(main, ["remote", "list"])
    names = set(listed.output.split())
    return (listed.exit_code or (0 if set(parts["remotes"]) <= names else 1)), listed.output


@pytest.mark.parametrize(("where", "text"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_every_yaml_block_is_config_claw_takes(where: str, text: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = claw_takes(text, tmp_path)
    assert code == 0, f"{where}: {output}"


def test_a_block_claw_refuses_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = claw_takes("models:\n  - {model_id: m1, requested_model: vendor/m1, pricing: {input: '0.15'}}\n",
                              tmp_path)
    assert code == 2 and "configs/suites/llm_probe_smoke.yaml: models[0].pricing" in output, output


def test_the_blocks_are_found() -> None:
    assert {where.split(":")[0] for where, _ in BLOCKS} >= {"docs/configuration.md", "docs/plan.md",
                                                             "docs/runners.md", "docs/remote.md", "docs/batch.md"}
