"""A judge's request options that leave no verdict to read in a reply that is paid for: the schema passes any option
through (docs/configuration.md, Evaluation profile), so each is said in a warning, never refused. Found against
llama.cpp's server: a `tool_choice` naming a function, `max_tokens: 20` and `stop: ["}"]` each made every judgement
invalid after three paid attempts (tests/evaluate/test_judge_options_warned.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from clawstore.config.ids import DIMENSIONS
from clawstore.values.judge_options import JUDGE_OWN_FIELDS

# The verdict's top-level fields (evaluate/judge_contract.py), and the verdict as a judge may write it (compact,
# indented, in a ```json fence, which the contract reads): a stop sequence found in it ends the reply before its end.
VERDICT_FIELDS = ("summary", "dimensions", "overall")
_SCORED = {"evidence": ["seen"], "score": 5}
_VERDICT = {"summary": "s", "dimensions": {name: _SCORED for name in DIMENSIONS}, "overall": _SCORED}
_VERDICT_TEXTS = (json.dumps(_VERDICT), json.dumps(_VERDICT, separators=(",", ":")), json.dumps(_VERDICT, indent=2),
                  f"```json\n{json.dumps(_VERDICT, indent=2)}\n```")
# Fewer output tokens than a verdict (a summary, six dimensions with their evidence, the overall) takes: below this
# every reply is cut (finish_reason `length`). The smallest verdict the contract takes is about 80 tokens; one with
# its evidence written, a few hundred.
MIN_VERDICT_TOKENS = 256
_PAID = "no verdict: each judgement is paid for, found invalid and asked again, up to 3 times"
_FORCING = ("required", "any")


def judge_option_warnings(judge: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for each option of `judge` (its extra fields, then `request_options`) that leaves a reply
    without a verdict claw can read."""
    said: list[tuple[str, str]] = []
    passed = {key: value for key, value in judge.items() if key not in JUDGE_OWN_FIELDS}
    options = judge.get("request_options")
    for where, prefix in ((passed, ""), (options if isinstance(options, Mapping) else {}, "request_options.")):
        said += [(prefix + key, why) for key, why in _unreadable(where)]
    return said


def _unreadable(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    said = []
    tools = [options.get(key) for key in ("tools", "functions") if options.get(key)]
    choice = options.get("tool_choice", options.get("function_call"))
    choice_key = "tool_choice" if "tool_choice" in options else "function_call"
    if _forces_a_call(choice):
        said.append((choice_key, f"every reply is a tool call, with no text to read a verdict in: {_PAID}"))
    elif tools and not (choice == "none" or (isinstance(choice, Mapping) and choice.get("type") == "none")):
        key = "tools" if options.get("tools") else "functions"
        said.append((key, "the judge may answer with a tool call, which has no text to read a verdict in: "
                          f"{_PAID} (tool_choice: none sends the tools without that)"))
    for key in ("max_tokens", "max_completion_tokens"):
        value = options.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < MIN_VERDICT_TOKENS:
            said.append((key, f"a verdict takes a few hundred tokens (a summary, {len(DIMENSIONS)} dimensions with "
                              f"evidence, the overall): a reply cut at {value} tokens is {_PAID}"))
    stop = options.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    held = [text for text in stops if isinstance(text, str) and text and any(text in v for v in _VERDICT_TEXTS)]
    if held:
        said.append(("stop", f"every verdict holds {held[0]!r} and the reply ends there: {_PAID}"))
    n = options.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        said.append(("n", f"claw reads the first of the {n} choices: the other {n - 1} are paid for and never read "
                          "(a judge run's repetitions ask again, each read)"))
    missing = _schema_without_verdict(options.get("response_format"))
    if missing:
        said.append(("response_format", f"its schema has no {', '.join(missing)}: a reply that follows it is {_PAID}"))
    modalities = options.get("modalities")
    if isinstance(modalities, list) and modalities and "text" not in modalities:
        said.append(("modalities", f"a reply with no text holds {_PAID}"))
    return said


def _forces_a_call(choice: Any) -> bool:
    """A tool choice that makes the reply a call: `required` / `any`, OpenAI's `{type: function, function: …}` (or
    `allowed_tools` in mode `required`), Anthropic's `{type: tool | any}`, the legacy `function_call: {name: …}`."""
    if isinstance(choice, Mapping):
        return choice.get("type") in ("function", "tool", "any", "custom") or choice.get("mode") == "required" \
            or ("name" in choice and "type" not in choice)
    return choice in _FORCING


def _schema_without_verdict(response_format: Any) -> list[str]:
    """The verdict's fields a response format's JSON schema leaves out (OpenAI's `json_schema.schema`, llama.cpp's
    `schema` beside `json_object`); none for a format without a schema, or a schema that names no properties."""
    if not isinstance(response_format, Mapping):
        return []
    schema = response_format.get("schema")
    wrapped = response_format.get("json_schema")
    if schema is None and isinstance(wrapped, Mapping):
        schema = wrapped.get("schema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    return [name for name in VERDICT_FIELDS if name not in properties]
