"""A number YAML 1.1 reads as text (`1e-1`, `1e3`, `1.0e0`: an exponent needs a dot and a sign there) is refused where
a number belongs, as the reference system's loader refuses it, with the reason said. Before session 72 the line read
"expected a number from 0 to 2, got '1e-1'", which names a number in the range: nothing told the user why."""

from __future__ import annotations

import pytest

from tests.support.claw import Claw
from tests.support.workspace import Workspace

HINT = "YAML 1.1 reads {} as text"


@pytest.mark.parametrize(("where", "field", "text"), [
    ("cases/alpha/test.yaml", "runner.temperature", "1e-1"),
    ("cases/alpha/test.yaml", "runner.max_tokens", "1e3"),
    ("cases/alpha/test.yaml", "expectations.hard_expectations[0].weight", "1.0e0"),
    ("run_profiles/rp.yaml", "runner_defaults.timeout_seconds", "6e1"),
    ("run_profiles/rp.yaml", "execution_policy.max_concurrency", "2E0"),
    ("suites/main.yaml", "models[0].pricing.input", "15e-2"),
])
def test_an_exponent_yaml_reads_as_text_is_explained(ws: Workspace, claw: Claw, where: str, field: str,
                                                     text: str) -> None:
    path = ws.configs / where
    doc = path.read_text(encoding="utf-8")
    key = field.rsplit(".", 1)[-1]
    if field.startswith("runner."):
        doc = doc.replace("  type: llm_probe\n", f"  type: llm_probe\n  {key}: {text}\n")
    elif field.startswith("expectations"):
        doc = doc.replace("  - text: Answers.\n", f"  - text: Answers.\n    weight: {text}\n")
    elif field.startswith("runner_defaults"):
        doc = doc.replace("  timeout_seconds: 5\n", f"  timeout_seconds: {text}\n")
    elif field.startswith("execution_policy"):
        doc = doc.replace("  max_concurrency: 2\n", f"  max_concurrency: {text}\n")
    else:
        model = "  requested_model: vendor/m1\n"
        doc = doc.replace(model, f"{model}  pricing: {{input: {text}}}\n")
    assert text in doc
    path.write_text(doc, encoding="utf-8")
    line = claw.one_config_error()
    assert line.startswith(f"configs/{where}: {field}: "), line
    assert HINT.format(text) in line, line


def test_the_forms_yaml_reads_as_numbers_validate(ws: Workspace, claw: Claw) -> None:
    path = ws.configs / "cases/alpha/test.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "  type: llm_probe\n", "  type: llm_probe\n  temperature: 1.0e-1\n  top_p: .5\n  max_tokens: 1_024\n"),
        encoding="utf-8")
    code, out, err = claw("validate")
    assert code == 0, out + err
