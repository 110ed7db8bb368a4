"""Small pure rules shared by campaign expansion, the runners and the judge.

Model resolution, the runner-settings merge order and judge system prompt resolution live here so
that every layer applies them identically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clawstore.config.containment import escapes, not_a_file, outside_message, real_root
from clawstore.config.models import EvaluationProfile, JudgeConfig, ModelConfig, RunProfile, TestCase
from clawstore.config.yamlio import YamlProblem, read_bytes

DEFAULT_JUDGE_PROMPT = "prompts/judge_system_default.md"


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def resolve_model(model: ModelConfig) -> str:
    """The provider model string: requested_model, then openrouter_model, then model_name, then model_id."""
    requested = _text(model.requested_model) or _text(model.extras.get("openrouter_model"))
    if requested:
        return requested
    name = _text(model.model_name)
    if name:
        if "/" in name:
            return name
        provider = _text(model.provider)
        return f"{provider}/{name}" if provider else name
    return model.model_id


def openclaw_model_ref(resolved_model: str) -> str:
    """OpenClaw routes every model through its openrouter provider."""
    return resolved_model if resolved_model.startswith("openrouter/") else f"openrouter/{resolved_model}"


def resolve_judge_model(judge: JudgeConfig) -> str:
    """A judge's model: `model`, then extras `judge_model` / `model_id`, then the judge_id."""
    extras = judge.extras
    for value in (judge.model, extras.get("judge_model"), extras.get("model_id")):
        if _text(value):
            return str(value).strip()
    return judge.judge_id


def merge_runner_settings(run_profile: RunProfile, model_id: str, case: TestCase) -> dict[str, Any]:
    """llm_probe settings: runner_defaults, then model_overrides[model_id], then the case's `runner` keys.

    The case wins: a case that needs temperature 0 keeps it whatever the profile says. OpenClaw
    cases get `{}` (their runtime is configured by the run profile's `openclaw` block only).
    """
    if case.runner.type != "llm_probe":
        return {}
    merged: dict[str, Any] = dict(run_profile.runner_defaults)
    override: Mapping[str, Any] = run_profile.model_overrides.get(model_id, {})
    merged.update(override)
    merged.update(case.runner.settings)
    return merged


class PromptProblem(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _join_lines(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def resolve_judge_prompt(profile: EvaluationProfile, profile_path: Path,
                         workspace_root: Path | None = None) -> tuple[str, str]:
    """(system prompt text, source label) for an evaluation profile.

    Inline text and non-Markdown files are folded into one line; a `.md` file is used verbatim
    (stripped, CRLF → LF). With neither setting, `prompts/judge_system_default.md` beside the profile.
    The file must resolve inside `workspace_root` (or the profile's own directory).
    """
    if profile.judge_system_prompt is not None:
        return _join_lines(profile.judge_system_prompt), "inline"
    if profile.judge_system_prompt_path is not None:
        written = profile.judge_system_prompt_path
        field = "judge_system_prompt_path"
        label = f"path:{written}"
    else:
        written = DEFAULT_JUDGE_PROMPT
        field = "judge_system_prompt_path"
        label = f"default:{DEFAULT_JUDGE_PROMPT}"
    expanded = os.path.expanduser(written)
    path = Path(expanded) if os.path.isabs(expanded) else profile_path.parent / expanded
    # Outside first: a path leading out is refused whether or not the file exists where it leads.
    roots = [real_root(profile_path.parent), *([real_root(workspace_root)] if workspace_root else [])]
    outside = [escapes(path, root) for root in roots]
    if all(outside):
        raise PromptProblem(field, outside_message(written, outside[-1]))  # type: ignore[arg-type]
    if (why := not_a_file(path, written, "relative to this file's directory")) is not None:
        if profile.judge_system_prompt_path is None:
            raise PromptProblem(field, f"no judge system prompt: set judge_system_prompt_path or "
                                       f"judge_system_prompt, or create {DEFAULT_JUDGE_PROMPT} beside this file")
        raise PromptProblem(field, why)
    try:
        raw = read_bytes(path).decode("utf-8")  # (bounded as a config file is: it is sent with every judgement)
    except YamlProblem as exc:
        raise PromptProblem(field, f"{written}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PromptProblem(field, f"cannot read {written}: {exc}") from None
    if path.suffix.lower() == ".md":
        text = raw.replace("\r\n", "\n").strip()
    else:
        text = _join_lines(raw)
    if not text:
        raise PromptProblem(field, f"{written} is empty")
    return text, label
