"""Canonical input documents of every node kind, and the keys derived from them.

A node's key is the object id of its input document (BLAKE3 of its canonical JSON), so the document
that explains a key is always one `claw cat` away. What each document covers, and what it must not
cover, is the table in docs/building.md (Keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawstore.config.ids import KNOWN_TOOLS
from clawstore.store.core.ids import oid_of
from clawstore.values.canonical import canonical_json

if TYPE_CHECKING:
    from clawstore.config.campaign import CampaignItem
    from clawstore.config.messages import ResolvedMessage

# Bump when a runner's behaviour changes in a way that makes old results incomparable.
RUN_DOC_VERSION = 1
CHECKS_DOC_VERSION = 1
JUDGE_DOC_VERSION = 1
RESULT_DOC_VERSION = 1

# Settings that only steer the harness, never what a run sends or receives: how long claw waits for an answer and how
# often it asks again. What they change is whether a run ends `timed_out` or `provider_error`, which is never reused
# (graph/records.py `kept_outcome`), so no reused record depends on them: in the key, raising `timeout_seconds` after a
# few timeouts ran, and paid for, every run of the campaign again. They were in every run's key before session 74: a
# store built then finds its runs under the key they had (graph/plan.py Node.earlier; docs/building.md, Keys).
_LLM_PROBE_SETTINGS_NOT_IN_KEY: frozenset[str] = frozenset({"timeout_seconds", "retries"})
# A judge's such settings, `api_key_env` (which variable holds its key) and its `base_url` as written (where it is
# asked is in the key by its endpoint's base URL as claw calls it: a trailing `/`, or the default written out, asked
# the same judge). A judgement that times out or fails is never reused either; in the key, raising a judge's timeout
# after a few judge timeouts asked, and paid for, every judgement of the campaign again. They were in every
# judgement's key before session 75: a store built then finds its judgements under the key they had (Node.earlier).
JUDGE_FIELDS_NOT_IN_KEY_75: frozenset[str] = frozenset({"timeout_seconds", "retries", "api_key_env", "base_url"})
# And its `type`: any text (docs/configuration.md), claw's own label, never sent nor read (every judge is an
# OpenAI-compatible chat model). In every judgement's key before session 76: its edit asked, and paid for, every
# judgement of the judge again.
JUDGE_FIELDS_NOT_IN_KEY: frozenset[str] = JUDGE_FIELDS_NOT_IN_KEY_75 | {"type"}
# The runner settings an llm_probe run's key keeps: those the runner reads (runners/llm_probe.py ExecutionParameters)
# but the harness's own. Any other key is taken unchecked and never sent; it was in the key before session 75, so
# setting, editing or removing one ran, and paid for, every run it applies to again.
LLM_PROBE_SETTINGS_IN_KEY: frozenset[str] = frozenset({"temperature", "top_p", "max_tokens", "seed", "max_turns",
                                                       "tool_choice"})
# Of those, the ones only a run with tools reads: without tools llm_probe sends one request and takes its answer,
# whatever `max_turns` says, and sends no `tool_choice` (in the key before session 75: raising `max_turns` after a tool
# loop ran out re-ran every run without tools too).
_TOOL_LOOP_SETTINGS: frozenset[str] = frozenset({"max_turns", "tool_choice"})


def object_id(data: bytes) -> str:
    """The id the store gives these bytes, computed without storing them (the store's one helper)."""
    return oid_of(data)


def document_key(document: dict[str, Any]) -> str:
    return object_id(canonical_json(document))


def keyed_document(document: dict[str, Any]) -> tuple[str, bytes]:
    """(key, the canonical bytes it is the id of): a node keeps the bytes to store as its input document."""
    data = canonical_json(document)
    return object_id(data), data


def _message_doc(message: ResolvedMessage, metadata: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name:
        doc["name"] = message.name
    if message.metadata and metadata:
        doc["metadata"] = message.metadata
    return doc


def _is_injected_attachment(message: ResolvedMessage) -> bool:
    return bool(message.metadata) and "attachment" in message.metadata


def harness_settings(item: CampaignItem) -> bool:
    """Does an llm_probe item set a setting its runs' key leaves out (so its runs had another key before session 74)?"""
    return item.runner_type == "llm_probe" and not _LLM_PROBE_SETTINGS_NOT_IN_KEY.isdisjoint(item.settings)


def unsent_input(item: CampaignItem) -> bool:
    """Does an llm_probe item have input its runs do not send, which their key leaves out since session 75 (so its runs
    had another key before): `turns` (the llm_probe runner sends `input.messages` alone), a message's metadata (the
    keys beside role, content and name of a `source:` file's mapping: kept in the run's trace, never sent), a runner
    setting the runner does not read (without tools, `max_turns` and `tool_choice` either), the case's `metadata` (not
    used by the framework), a part of `input.context` other than its own `llm_probe` one?"""
    case = item.case.case
    return item.runner_type == "llm_probe" and (bool(item.turns) or bool(case.metadata) or any(
        k != "llm_probe" for k in case.input.context) or any(
        m.metadata and not _is_injected_attachment(m) for m in item.messages) or any(
        k not in _settings_in_key(item) and k not in _LLM_PROBE_SETTINGS_NOT_IN_KEY for k in item.settings))


def _sent_context(context: dict[str, Any]) -> dict[str, Any]:
    """What an llm_probe run reads of its case's `input.context`: its own part (the tools), not another runner's hints
    (`openclaw`) nor keys no runner reads."""
    return {k: v for k, v in context.items() if k == "llm_probe"}


def _settings_in_key(item: CampaignItem) -> frozenset[str]:
    """The runner settings an llm_probe run reads: without tools, not the tool loop's."""
    tools = ((item.case.case.input.context or {}).get("llm_probe") or {}).get("tools")
    if isinstance(tools, list) and any(name in KNOWN_TOOLS for name in tools):
        return LLM_PROBE_SETTINGS_IN_KEY
    return LLM_PROBE_SETTINGS_IN_KEY - _TOOL_LOOP_SETTINGS


def run_document(item: CampaignItem, repetition: int, *, endpoint: dict[str, Any] | None,
                 attachments: dict[str, dict[str, Any]], runner_identity: dict[str, Any] | None = None,
                 every_setting: bool = False, unsent: bool = False) -> dict[str, Any]:
    """The run node's input document.

    Covers: runner type, resolved model and endpoint, execution settings, resolved messages and turns
    (sources expanded), attachment contents (by object id), context, case metadata, the case id and the
    repetition index; for openclaw the agent/image identity. Not covered: suite, titles, tags,
    expectations, rubric, checks, execution policy, profile ids, the harness's own settings (`timeout_seconds`,
    `retries`; `every_setting`: with them, the document before session 74), an llm_probe run's turns, its messages'
    metadata, the runner settings it does not read, its case's `metadata` and the context not its own, none of which
    it sends (`unsent`: with them, the document
    before session 75; the turns always `[]` without, so that a run without turns kept its key).
    """
    case = item.case.case
    probe = item.runner_type == "llm_probe"
    doc: dict[str, Any] = {
        "kind": "run",
        "version": RUN_DOC_VERSION,
        "runner_type": item.runner_type,
        "case_id": case.case_id,
        "model": {"requested_model": item.resolved_model},
        "input": {
            # Attachments appear once, by content, under "attachments" (their injected text is derived).
            "messages": [_message_doc(m, not probe or unsent) for m in item.messages if not _is_injected_attachment(m)],
            "turns": [] if probe and not unsent else [_message_doc(m) for m in item.turns],
            "context": _sent_context(case.input.context) if probe and not unsent else case.input.context,
        },
        "attachments": attachments,
        "metadata": {} if probe and not unsent else case.metadata,
        "repetition": repetition,
    }
    if endpoint is not None:
        doc["model"]["endpoint"] = endpoint
    if probe:
        settings = item.settings
        read = LLM_PROBE_SETTINGS_IN_KEY if unsent else _settings_in_key(item)
        doc["runner"] = dict(settings) if every_setting else {
            k: v for k, v in settings.items() if k not in _LLM_PROBE_SETTINGS_NOT_IN_KEY} if unsent else {
            k: v for k, v in settings.items() if k in read}
    if runner_identity is not None:
        doc["runner"] = runner_identity
    return doc


def attachments_document(item: CampaignItem) -> dict[str, dict[str, Any]]:
    """Attachments by name -> content id; a repeated basename gets a `#<n>` suffix to stay distinct."""
    doc: dict[str, dict[str, Any]] = {}
    for attachment in item.attachments:
        name = attachment.name
        n = 2
        while name in doc:
            name, n = f"{attachment.name}#{n}", n + 1
        doc[name] = {"object": object_id(attachment.data), "size": len(attachment.data)}
    return doc


def run_outputs_ref(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a run's record that its evaluation depends on: what the run produced."""
    outputs = record.get("outputs") or {}
    return {name: outputs.get(name) for name in ("artifact", "sandbox", "workspace") if outputs.get(name)}


# What no record under the key of checks with a python hook keeps (builder/eval_layer.py `hook_fault`): a hook the
# machine kept from running, whose process gave no result (killed by a signal), or stopped at its timeout. Sessions 75
# to 76 had `"retried"` (HOOK_FAULTS_S75): their records are reused unless a hook process gave them no result.
HOOK_FAULTS = ["not_run", "no_result", "timed_out"]
HOOK_FAULTS_S75 = "retried"


def checks_document(run_record: dict[str, Any], checks: list[dict[str, Any]], host_inputs: dict[str, Any],
                    policy: dict[str, Any], format_version: int, python_hooks: bool = False,
                    hook_faults: Any = HOOK_FAULTS) -> dict[str, Any]:
    """Covers the run's outputs, the check specs, the host and hook files they read, the hook policy. With a python
    hook (`python_hooks`) also `hook_faults` (HOOK_FAULTS): under such a key no record keeps a hook the machine kept
    from giving its outcome; records made before session 75 could, under the key without it, and are left behind;
    those of sessions 75 to 76 (`hook_faults: retried`) are reused as the key's earlier one (Node.earlier) unless a
    hook process gave them no result."""
    doc = {
        "kind": "checks",
        "version": CHECKS_DOC_VERSION,
        "format_version": format_version,
        "run": run_outputs_ref(run_record),
        "checks": checks,
        "host_inputs": host_inputs,
        "policy": policy,
    }
    if python_hooks:
        doc["hook_faults"] = hook_faults
    return doc


def judge_document(run_record: dict[str, Any], checks_output: str, *, target: str,
                   anchors: list[dict[str, Any]] | None, system_prompt_id: str, judge: dict[str, Any],
                   judge_run_id: str, repetition: int, prompt_format: int, redact_secrets: bool,
                   attempts: int) -> dict[str, Any]:
    """Covers everything the judge is shown and asked with: the run's outputs and check results, the
    evaluation target (messages, turns, expectations, rubric: by the id of its document, stored when
    the judge runs, so the case's target is hashed once, not once per judge node), anchors, system
    prompt, judge model and request options, repetition and prompt format. Not the aggregation."""
    return {
        "kind": "judge",
        "version": JUDGE_DOC_VERSION,
        "prompt_format": prompt_format,
        "run": run_outputs_ref(run_record),
        "checks": checks_output,
        "target": target,
        "anchors": anchors,
        "system_prompt": system_prompt_id,
        "judge": judge,
        "judge_run_id": judge_run_id,
        "repetition": repetition,
        "redact_secrets": redact_secrets,
        "attempts": attempts,
    }


def result_document(run_key: str, judgements: list[str], checks_output: str, aggregation: dict[str, Any],
                    sample_size: dict[str, Any], format_version: int) -> dict[str, Any]:
    """Covers the run it scores, the judge outputs used, the check results, the aggregation method,
    threshold and sample sizes. (The run key keeps two runs whose judgements happen to be identical
    from sharing one result.)"""
    return {
        "kind": "result",
        "version": RESULT_DOC_VERSION,
        "format_version": format_version,
        "run": run_key,
        "judgements": judgements,
        "checks": checks_output,
        "aggregation": aggregation,
        "sample_size": sample_size,
    }
