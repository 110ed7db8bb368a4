"""The llm_probe runner: one chat conversation with an optional, sandboxed tool loop.

Where it differs from the reference system on purpose: docs/runners.md (The llm_probe runner; Details by module)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clawstore.providers import (
    ChatResult,
    Endpoint,
    MissingApiKeyError,
    ProviderClient,
    ProviderError,
    Usage,
)
from clawstore.providers.usage import SENT_UNANSWERED, as_reported
from clawstore.runners.artifact import Clock, RunArtifact, RunError, Trace
from clawstore.runners.sandbox import WORKDIR, Sandbox
from clawstore.runners.tools import ToolBox, ToolOutcome, enabled_tools
from clawstore.values import jsontext
from clawstore.values.canonical import field_values
from clawstore.values.costs import KnownPart
from clawstore.values.earlier import earlier_attempts
from clawstore.values.prompt_cut import TRUNCATED_CODE, PromptGrowth, dense_warning

RUNNER_TYPE = "llm_probe"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 5
MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# How servers refuse a conversation longer than the model's context (HTTP 400, or 413 from a gateway): by their
# error's `code` or `type` (OpenAI's and llama-cpp-python's code, llama.cpp's llama-server's type), else by its
# message: "maximum context length is N tokens" (OpenAI, vLLM, OpenRouter), "exceeds the available context size"
# (llama-server), "exceed context window of N" (llama-cpp-python), "exceeds the context length" (Ollama), a message
# that begins "prompt is too long: N tokens > M" or "input length and `max_tokens` exceed context limit: N + M > L"
# (Anthropic's invalid_request_errors: anchored, as their words are plain). A refusal's words, not any mention of a
# context: a 400 whose message echoes the request (vLLM's validation errors) may quote anything the model read.
CONTEXT_LENGTH_CODE = "context_length_exceeded"
_CONTEXT_LENGTH_CODES = frozenset({CONTEXT_LENGTH_CODE, "exceed_context_size_error"})
_CONTEXT_LENGTH = re.compile(r"maximum context length is|exceeds? (the )?(available )?context (size|length|window)"
                             r"|^prompt is too long: \d+ tokens > \d+"
                             r"|^input length and `max_tokens` exceed context limit: \d+ \+ \d+ > \d+", re.IGNORECASE)
_REFUSAL_STATUSES = (400, 413)
# The reasoning a server sends beside a tool call (vLLM, llama.cpp, DeepSeek, Moonshot: reasoning_content; vLLM and
# Ollama: reasoning; OpenRouter: reasoning and reasoning_details), sent back with the call.
REASONING_ECHOED = ("reasoning_content", "reasoning", "reasoning_details")


@dataclass(frozen=True)
class LlmProbeSpec:
    """Everything one llm_probe run needs, already resolved by the config/graph layers.

    `settings` is the merged runner settings (temperature, top_p, max_tokens, seed, max_turns,
    timeout_seconds, retries, tool_choice; other keys are ignored). `messages` are
    `{role, content, name?, metadata?}` with sources expanded and attachments injected. `tools`
    is input.context.llm_probe.tools (unknown names are dropped), `tool_choice` its tool_choice.
    """

    case_id: str
    requested_model: str
    endpoint: Endpoint
    settings: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    network: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form (endpoint as its identity: base URL only, never a key)."""
        data = asdict(self)
        data["endpoint"] = self.endpoint.identity()
        return data


class SettingsError(ValueError):
    """A runner setting cannot be used (recorded as failed/runner_configuration_error)."""


class MaxTurnsExceeded(Exception):
    """The model kept calling tools past max_turns: its own outcome, recorded as
    incomplete/max_turns_exceeded (cached and scored like an answer, never re-sent)."""


class PromptTruncated(Exception):
    """A reply's prompt count shows the server cut the conversation (values/prompt_cut.py): the model's outcome on this
    server as configured, incomplete/prompt_truncated_by_server (asked again, it would cut it again)."""


@dataclass(frozen=True)
class ExecutionParameters:
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    seed: int | None
    max_turns: int
    timeout_seconds: float
    retries: int
    tool_choice: str | dict[str, Any] | None


def _coerce(value: Any, kind: type, name: str) -> Any:
    """Loose coercion as configs write them: numeric strings parse, bools become ints."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        value = int(value)
    try:
        number = float(value) if isinstance(value, str) else value
        if kind is int:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            return int(number)
        return float(number)
    except (TypeError, ValueError):
        raise SettingsError(f"runner setting {name}={value!r} is not a valid {kind.__name__}") from None


def execution_parameters(spec: LlmProbeSpec) -> ExecutionParameters:
    """Effective settings with defaults (max_turns 8 with tools else 1, timeout 30 s, retries 5)."""
    s = spec.settings
    has_tools = bool(enabled_tools(spec.tools))
    max_turns = _coerce(s.get("max_turns"), int, "max_turns")
    max_turns = (8 if has_tools else 1) if max_turns is None else max_turns
    timeout = _coerce(s.get("timeout_seconds"), float, "timeout_seconds")
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    retries = _coerce(s.get("retries"), int, "retries")
    if max_turns < 1 or timeout <= 0 or (retries is not None and retries < 0):
        raise SettingsError("runner settings need max_turns >= 1, timeout_seconds > 0, retries >= 0")
    tool_choice = (spec.tool_choice or s.get("tool_choice") or "auto") if has_tools else None
    return ExecutionParameters(
        temperature=_coerce(s.get("temperature"), float, "temperature"),
        top_p=_coerce(s.get("top_p"), float, "top_p"),
        max_tokens=_coerce(s.get("max_tokens"), int, "max_tokens"),
        seed=_coerce(s.get("seed"), int, "seed"),
        max_turns=max_turns,
        timeout_seconds=timeout,
        retries=DEFAULT_RETRIES if retries is None else retries,
        tool_choice=tool_choice,
    )


def _request_message(message: dict[str, Any]) -> dict[str, Any]:
    """What the provider sees of an input message: role, content, name (metadata stays local)."""
    role, content = message.get("role"), message.get("content")
    if role not in MESSAGE_ROLES:
        raise _Invalid("invalid_messages", f"message role {role!r} is not one of {sorted(MESSAGE_ROLES)}")
    if not isinstance(content, str):
        raise _Invalid("invalid_messages", f"message content for role {role!r} must be a string")
    out = {"role": role, "content": content}
    if message.get("name"):
        out["name"] = str(message["name"])
    return out


def _text(content: Any) -> str | None:
    """Message content as text; list-of-parts content keeps its text parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


class _Invalid(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class _ToolCall:
    call_id: str
    name: str
    raw_arguments: Any
    parsed: Any
    metadata: dict[str, Any]

    def as_request(self) -> dict[str, Any]:
        raw = self.raw_arguments
        if not isinstance(raw, str):
            raw = json.dumps(raw if raw is not None else {}, ensure_ascii=False)
        return {"id": self.call_id, "type": "function", "function": {"name": self.name, "arguments": raw}}


def _tool_calls(message: dict[str, Any]) -> list[_ToolCall]:
    calls = []
    raw_calls = message.get("tool_calls")
    for index, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        raw = function.get("arguments")
        parsed: Any = raw if isinstance(raw, dict) else None
        if isinstance(raw, str):
            try:
                parsed = jsontext.loads_reply(raw) if raw.strip() else {}
            except ValueError:
                parsed = None
        calls.append(_ToolCall(
            call_id=str(call.get("id") or f"tool_call_{index}"),
            name=str(function.get("name") or "unknown"),
            raw_arguments=raw,
            parsed=parsed,
            metadata={k: v for k, v in call.items() if k not in ("id", "function", "type")},
        ))
    return calls


class _Run:
    """State of one run: the conversation, trace, usage and provider metadata so far."""

    def __init__(self, spec: LlmProbeSpec, client: ProviderClient, sandbox_dir: Path | None):
        self.spec = spec
        self.client = client
        self.sandbox_dir = sandbox_dir
        self.trace = Trace()
        self.usage = Usage.unsent()  # (no call made yet)
        self.answered = KnownPart()  # its answers' usage, those believed: what it spent at least (known_part)
        self.raw_usage: list[dict[str, Any]] = []
        self.provider_meta: dict[str, Any] = {}
        self.attempts = 0
        self.calls = 0
        self.growth = PromptGrowth()  # the calls' prompt counts, which only grow as the conversation does
        self.warnings: list[str] = []

    def chat(self, params: ExecutionParameters, body: dict[str, Any]) -> ChatResult:
        self.calls += 1
        try:
            result = self.client.chat(self.spec.endpoint, body, timeout=params.timeout_seconds,
                                      retries=params.retries)
        except ProviderError as exc:
            self.usage = self.usage + exc.usage
            self.attempts += exc.attempts
            self._log_retries(exc.attempt_log[:-1])
            self.trace.runner("provider_error", exc.message, {
                "code": exc.code, "status_code": exc.status_code, "attempts": exc.attempts})
            raise
        except MissingApiKeyError as exc:  # (raised before its own request left: only earlier ones count)
            self._earlier(exc)
            raise
        except Exception as exc:
            # Anything else the client raised may have come after the request left: its usage is unknown, never the
            # known 0 of a run none of whose calls was made (the client alone says `nothing_sent`).
            self._earlier(exc)
            self.usage = self.usage + Usage.not_believed(SENT_UNANSWERED)
            raise
        self.usage = self.usage + as_reported(result.usage, result.raw_usage)
        if result.own_usage is not None:  # (the answer's own usage: `result.usage` holds its failed attempts' too)
            self.answered.add(as_reported(result.own_usage, result.raw_usage).to_json())
        self.attempts += result.attempts
        self._log_retries(result.attempt_log)
        if result.raw_usage is not None:
            self.raw_usage.append(result.raw_usage)
        self.provider_meta = result.provider_meta
        return result

    def _earlier(self, exc: BaseException) -> None:
        """Count the attempts an error other than a ProviderError carries from before it (a Ray worker lost under them,
        their usage unknown: values/earlier.py), as a ProviderError's own are counted."""
        earlier = earlier_attempts(exc)
        if earlier is not None:
            self.usage = self.usage + earlier.usage
            self.attempts += earlier.count
            self._log_retries(list(earlier.log))

    def known_part(self) -> dict[str, Any]:
        """What a run whose cost is unknown (an attempt timed out, a reply's usage not believed, one that counted tokens
        and no cost) spent at least: its believed answers' cost when they reported one (else priced from their tokens,
        builder/run_exec.py), and their tokens when the run's are unknown. Empty when its cost is known, or none of its
        answers was believed. docs/building.md ("Costs")."""
        return self.answered.of(self.usage.to_json())

    def _log_retries(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            self.trace.runner("provider_retry", f"attempt {entry['attempt']} failed: {entry['code']}",
                              dict(entry))

    def execute(self, params: ExecutionParameters) -> tuple[str, RunError | None]:
        """The tool loop; returns (status, error)."""
        conversation = [_request_message(m) for m in self.spec.messages]
        if not conversation:
            raise _Invalid("invalid_messages", "the case has no input messages")
        for message in self.spec.messages:
            self.trace.message(message["role"], message["content"], message.get("name"),
                               message.get("metadata") or {})
        sandbox = Sandbox(self.sandbox_dir) if self.sandbox_dir is not None else None
        toolbox = ToolBox(sandbox, self.spec.tools, network=self.spec.network)
        body: dict[str, Any] = {"model": self.spec.requested_model}
        for key in ("temperature", "top_p", "max_tokens", "seed"):
            if getattr(params, key) is not None:
                body[key] = getattr(params, key)
        if toolbox.enabled:
            body["tools"] = toolbox.specs()
            body["tool_choice"] = params.tool_choice
        for _turn in range(params.max_turns):
            result = self.chat(params, {**body, "messages": conversation})
            cut = self._prompt_signs(conversation, result)
            message = result.message
            content = _text(message.get("content"))
            calls = _tool_calls(message)
            metadata = {k: v for k, v in message.items() if k not in ("role", "content", "name", "tool_calls")}
            self.trace.message(str(message.get("role") or "assistant"), content, message.get("name"), metadata)
            for call in calls:
                self.trace.tool_call(call.call_id, call.name, call.raw_arguments, call.parsed, call.metadata)
            if cut is not None:  # (its reply recorded above; no tool of it runs, no further turn is paid for)
                raise PromptTruncated(cut)
            if not calls or not toolbox.enabled:
                return self._finish(content, bool(calls))
            # No text beside the calls: `content` left out (optional there), not null, which some servers refuse.
            assistant: dict[str, Any] = {"role": "assistant", **({"content": content} if content is not None else {}),
                                         "tool_calls": [c.as_request() for c in calls]}
            if message.get("name"):
                assistant["name"] = message["name"]
            # A thinking model's reasoning goes back with its calls, as the server sent it: Moonshot's and DeepSeek's
            # thinking modes refuse the next turn without `reasoning_content`, OpenRouter asks for `reasoning_details`
            # (Gemini's thought signatures). Dropped, every such loop failed at its second turn.
            assistant.update((k, message[k]) for k in REASONING_ECHOED if message.get(k) is not None)
            conversation.append(assistant)
            for call in calls:
                conversation.append(self._run_tool(toolbox, call))
            # A forced choice ("required", a named function) is obeyed: forced again, the model could only
            # call tools until max_turns ran out, a failed run every build pays for again. It chooses now.
            if body.get("tool_choice") not in (None, "auto", "none"):
                body["tool_choice"] = "auto"
        raise MaxTurnsExceeded(f"no final answer within max_turns={params.max_turns} provider calls")

    def _prompt_signs(self, conversation: list[dict[str, Any]], result: ChatResult) -> str | None:
        """What the reply's prompt count says of the request it answered: a cut (returned) when the count fell as
        the conversation grew; a warning in the trace when the first call's is implausibly small (a heuristic)."""
        served_by = (result.provider_meta.get("provider_name"), result.provider_meta.get("provider_model_id"))
        cut = self.growth.observe(self.calls, conversation, result.raw_usage, served_by)
        if self.calls == 1 and (warning := dense_warning(conversation, result.raw_usage)) is not None:
            self.warnings.append(warning)
            self.trace.runner("prompt_tokens_implausible", warning, {"call": self.calls})
        return cut

    def _run_tool(self, toolbox: ToolBox, call: _ToolCall) -> dict[str, Any]:
        if call.parsed is None or not isinstance(call.parsed, dict):
            outcome = ToolOutcome.error("tool arguments are not a JSON object", "invalid_arguments")
        else:
            outcome = toolbox.run(call.name, call.parsed)
        self.trace.tool_result(call.call_id, outcome.status, outcome.output, {"tool_name": call.name})
        content = json.dumps({"status": outcome.status, "output": outcome.output}, ensure_ascii=False)
        self.trace.message("tool", content, call.name, {"tool_call_id": call.call_id})
        return {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": content}

    def _finish(self, content: str | None, had_tool_calls: bool) -> tuple[str, RunError | None]:
        if content and content.strip():
            self.trace.final_output(content)
            return "success", None
        if had_tool_calls:
            return "invalid", RunError("tool_calls_not_supported",
                                       "the model asked for tools but this case enables none",
                                       "output_error")
        return "invalid", RunError("empty_output", "the final assistant message is empty", "output_error")


def _outgrew_context(exc: ProviderError, calls: int) -> bool:
    """A request refused as longer than the model's context after at least one answered turn: the conversation the
    model's own tool calls grew outgrew it. As a loop past max_turns, the model's outcome (incomplete, kept): asked
    again, the same turns would be paid for and refused again (tests/realserver/test_tool_loop_budget.py). A first
    request over the context stays a provider error: the prompt alone does not fit, nothing was answered."""
    if calls < 2 or exc.status_code not in _REFUSAL_STATUSES:
        return False
    error = _error_object(str(exc.metadata.get("body_excerpt") or ""))
    codes = {exc.provider_code, error.get("type"), error.get("code")}
    message = error.get("message")
    return bool(_CONTEXT_LENGTH_CODES & codes) or (isinstance(message, str) and bool(_CONTEXT_LENGTH.search(message)))


def _error_object(body: str) -> dict[str, Any]:
    """The error object of a refusal's body: OpenAI's `{"error": {...}}`, vLLM's the body itself; {} if not JSON."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else data if isinstance(data, dict) else {}


def run_llm_probe(spec: LlmProbeSpec, client: ProviderClient, sandbox_dir: Path | None, *,
                  run_id: str | None = None) -> RunArtifact:
    """Run one llm_probe case against one model; tools act in `sandbox_dir` (left for the caller),
    which may be None only when the case enables no tool (nothing could act in it)."""
    if sandbox_dir is None and enabled_tools(spec.tools):
        raise ValueError("a case with tools needs a sandbox directory")
    clock = Clock()
    run = _Run(spec, client, Path(sandbox_dir) if sandbox_dir is not None else None)
    params: ExecutionParameters | None = None
    try:
        params = execution_parameters(spec)
        status, error = run.execute(params)
    except _Invalid as exc:
        status, error = "invalid", RunError(exc.code, str(exc), "input_error")
    except MissingApiKeyError as exc:
        status, error = "failed", RunError("runner_configuration_error", str(exc), "configuration_error")
    except ProviderError as exc:
        if _outgrew_context(exc, run.calls):
            status, error = "incomplete", RunError(CONTEXT_LENGTH_CODE, exc.message, "output_error")
        else:
            status = "timed_out" if exc.timed_out else "provider_error"
            error = RunError(exc.code, exc.message, "provider_error", exc.retryable, exc.provider_code,
                             {"status_code": exc.status_code, "attempts": exc.attempts, **exc.metadata})
    except SettingsError as exc:
        status, error = "failed", RunError("runner_configuration_error", str(exc), "configuration_error")
    except MaxTurnsExceeded as exc:
        status, error = "incomplete", RunError("max_turns_exceeded", str(exc), "output_error")
    except PromptTruncated as exc:
        status, error = "incomplete", RunError(TRUNCATED_CODE, str(exc), "output_error")
    except Exception as exc:  # noqa: BLE001 - any other failure is recorded, never raised
        status, error = "failed", RunError("runner_execution_failed", f"{type(exc).__name__}: {exc}",
                                           "execution_error")
    if error is not None:
        run.trace.runner("run_failed", error.message, {"code": error.code})
    clock.stop()
    return RunArtifact(
        run_id=run_id or f"run_{uuid.uuid4().hex}",
        case_id=spec.case_id,
        runner_type=RUNNER_TYPE,
        status=status,
        started_at=clock.started_at,
        completed_at=clock.completed_at or clock.started_at,
        duration_seconds=clock.duration_seconds,
        request=_request_section(spec, params),
        provider=_provider_section(spec, run.provider_meta),
        usage=run.usage,
        raw_provider_usage=run.raw_usage,
        trace=run.trace.events,
        error=error,
        known_part=run.known_part(),
        runner_metadata={
            "attempt_count": run.attempts,
            "provider_calls": run.calls,
            "tool_capable": bool(enabled_tools(spec.tools)),
            "tool_names": enabled_tools(spec.tools),
            "retry_policy": "per_request",
            "sandbox": {"root": "/", "workdir": WORKDIR, "shell": "bubblewrap", "network": spec.network},
            **({"warnings": run.warnings} if run.warnings else {}),
        },
    )


def _request_section(spec: LlmProbeSpec, params: ExecutionParameters | None) -> dict[str, Any]:
    return {
        "requested_model": spec.requested_model,
        "gateway": spec.endpoint.gateway,
        "endpoint": spec.endpoint.identity(),
        "execution_parameters": field_values(params) if params else {},  # (asdict deep-copies)
        "metadata": {
            "resolved_messages": [
                {k: m.get(k) for k in ("role", "content", "name")} for m in spec.messages
            ],
            "resolved_tools": enabled_tools(spec.tools),
            "requested_tools": list(spec.tools),
            "input_tool_choice": spec.tool_choice,
            "network": spec.network,
        },
    }


def _provider_section(spec: LlmProbeSpec, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "gateway": spec.endpoint.gateway,
        "provider_name": meta.get("provider_name"),
        "provider_model_id": meta.get("provider_model_id"),
        "request_id": meta.get("request_id"),
        "response_id": meta.get("response_id"),
        "finish_reason": meta.get("finish_reason"),
        "native_finish_reason": meta.get("native_finish_reason"),
        "metadata": {"status_code": meta.get("status_code"), "created": meta.get("created")},
    }
