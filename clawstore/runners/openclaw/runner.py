"""One OpenClaw run: workspace checkout → openclaw.json → validate → one invocation per turn → evidence.

Differences from the reference system, on purpose: docs/openclaw.md (Details by module)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.host.run_limits import MAX_OUTPUT_BYTES, MAX_SESSION_FILE_BYTES, size_text, workspace_problem
from clawstore.host.scratch import remove_tree
from clawstore.providers.usage import Usage
from clawstore.runners.artifact import Clock, RunArtifact, RunError, Trace
from clawstore.runners.openclaw import config as oc_config
from clawstore.runners.openclaw import evidence as ev
from clawstore.runners.openclaw import transcript, validated
from clawstore.runners.openclaw.config import CONTAINER_KEY_ENV
from clawstore.runners.openclaw.container import (
    ContainerRunner,
    EngineSettings,
    Invocation,
    container_env,
    engine_env,
    engine_problem,
    engine_secrets,
    secret_values,
)
from clawstore.runners.openclaw.image import engine_name
from clawstore.runners.openclaw.loopback import ENDPOINT_UNREACHABLE, endpoint_problem
from clawstore.runners.openclaw.orphans import owner_labels
from clawstore.runners.openclaw.prompt import render_turns
from clawstore.runners.openclaw.workspace import (
    STANDARD_FILES,
    changed_paths,
    placeholder_text,
    prune_workspace,
    workspace_diff,
)
from clawstore.runners.pricing import pricing
from clawstore.store.core.ids import oid_of
from clawstore.values.canonical import strict_json
from clawstore.values.costs import PRICE_NAMES, PRICED, UNKNOWN
from clawstore.values.urls import named_variable, shown_url

if TYPE_CHECKING:
    from clawstore.store.store import Store

RUNNER_TYPE = "openclaw"
IDENTITY_VERSION = 1
VALIDATE_ARGV = ("openclaw", "config", "validate", "--json")
VALIDATE_TIMEOUT_S = 120.0  # `openclaw config validate` took > 30 s at load 14; the run timeout bounds it too
DEADLINE_SLACK_S = 1.0  # a turn that fails this close to the deadline was cut off by OpenClaw's timeout
MAX_MESSAGE_ARG = 100_000  # bytes; longer prompts go through a file (one argv string is capped at 128 KiB)
TURN_STEP = "turn"  # the invocations that run `openclaw agent`, the only ones that call the provider
AGENT_TIMEOUT = "openclaw_agent_timeout"  # the agent worked to the timeout, its model answering: its outcome, kept
OUT_OF_CREDIT = "openclaw_out_of_credit"  # the agent's model's last request refused with HTTP 402: a fault, retried


@dataclass(frozen=True)
class OpenClawSpec:
    """Everything one openclaw run needs, resolved by the config/graph layers."""

    case_id: str
    agent_id: str
    agent_dir: Path
    agent: Any  # the Agent model or its dict dump
    agent_tree: str  # agent_workspace_tree(store, agent_dir)
    requested_model: str
    model_extras: dict[str, Any] = field(default_factory=dict)  # suite model extras (primary_params, pricing)
    image: str = ""
    image_digest: str | None = None  # resolve_image_digest(image, docker_cli)
    docker_cli: str = "docker"
    timeout_seconds: int = 300
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[tuple[str, bytes]] = field(default_factory=list)
    hints: dict[str, Any] = field(default_factory=dict)  # input.context.openclaw
    provider_base_url: str = "https://openrouter.ai/api/v1"
    api_key_env: str | None = "OPENROUTER_API_KEY"


@dataclass
class OpenClawOutcome:
    """The artifact (RunArtifact JSON) and the ids of the evidence objects it references."""

    artifact: dict[str, Any]
    outputs: dict[str, str]

    @property
    def status(self) -> str:
        return str(self.artifact["status"])


def _agent_dump(agent: Any) -> dict[str, Any]:
    return agent.model_dump(mode="json") if hasattr(agent, "model_dump") else dict(agent or {})


def _object_id(data: bytes) -> str:
    return oid_of(data)


def openclaw_identity(spec: OpenClawSpec, priced: bool = False, cli_as_written: bool = False) -> dict[str, Any]:
    """What enters the run key for an openclaw run (never the timeout, never machine settings, never the model's
    prices: openclaw.json carries them for OpenClaw's own cost figure, which no request depends on and claw does not
    read; of the container CLI its engine's name, not where it is installed: `/usr/bin/docker` keys as `docker`).
    `priced`: the identity as it was before the prices left it (openclaw_legacy_identity); `cli_as_written`: with the
    CLI as the run profile writes it, as before session 77 (openclaw_earlier_identity)."""
    if not priced:
        spec = dataclasses.replace(spec, model_extras={k: v for k, v in spec.model_extras.items()
                                                       if k not in PRICE_NAMES})
    identity: dict[str, Any] = {
        "identity_version": IDENTITY_VERSION,
        "agent_id": spec.agent_id,
        "agent_tree": spec.agent_tree,
        "agent_config": _agent_dump(spec.agent),
        "image": spec.image,
        "image_digest": spec.image_digest,
        "docker_cli": spec.docker_cli if cli_as_written else engine_name(spec.docker_cli),
        "model_ref": oc_config.model_ref(spec.requested_model),
        "primary_params": oc_config.primary_params(spec.agent, spec.model_extras),
    }
    try:
        rendered = oc_config.render_config(spec.agent, spec.requested_model, spec.model_extras,
                                           spec.provider_base_url, spec.api_key_env)
        identity["openclaw_json"] = _object_id(oc_config.config_bytes(rendered))
    except oc_config.OpenClawConfigError as exc:
        identity["openclaw_json_error"] = str(exc)
    return identity


def openclaw_legacy_identity(spec: OpenClawSpec) -> dict[str, Any] | None:
    """The identity of a run built before its model's prices left the key (a store built then keeps its runs:
    graph/plan.py Node.legacy), the CLI as written as it was then; None when the prices change nothing (no price
    declared, or every price 0)."""
    priced = openclaw_identity(spec, priced=True, cli_as_written=True)
    return priced if priced != openclaw_identity(spec, cli_as_written=True) else None


def openclaw_earlier_identity(spec: OpenClawSpec) -> dict[str, Any] | None:
    """The identity of a run built before session 77, whose key held the container CLI as written (a store built then
    keeps its runs: graph/plan.py Node.earlier); None when it is the same (the CLI written as its engine's name)."""
    before = openclaw_identity(spec, cli_as_written=True)
    return before if before != openclaw_identity(spec) else None


def session_id(case_id: str, run_id: str, agent_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"clawstore:openclaw:{case_id}:{run_id}:{agent_id}"))


def placeholders_in_tree(store: Store, tree: str) -> list[str]:
    """Standard files of the template tree whose content is our placeholder."""
    wanted = {name: _object_id(placeholder_text(name).encode("utf-8")) for name in STANDARD_FILES}
    return sorted(e.path for e in store.read_tree(tree) if e.type == "file" and wanted.get(e.path) == e.object)


class _Failure(Exception):
    def __init__(self, status: str, error: RunError):
        super().__init__(error.message)
        self.status = status
        self.error = error


class _Run:
    def __init__(self, spec: OpenClawSpec, store: Store, root: Path, run_id: str, build_id: str | None = None,
                 labels: tuple[str, ...] = ()):
        self.spec, self.store, self.root, self.run_id = spec, store, root, run_id
        self.build_id, self.labels = build_id, labels
        self.trace = Trace()
        self.settings = EngineSettings.from_env(spec.docker_cli)
        self.cli_agent_id = oc_config.cli_agent_id(spec.agent)
        self.session = session_id(spec.case_id, run_id, spec.agent_id)
        self.run_tag = uuid.uuid4().hex[:12]
        self.workspace = root / "workspace"
        self.invocations: list[Invocation] = []
        self.turn_payloads: list[dict[str, Any] | None] = []
        self.secrets: list[str] = []
        self.outputs: dict[str, str] = {}
        self.config_doc: dict[str, Any] | None = None
        self.validated = False
        self.checked_out = False  # the template is in the workspace: from here a missing workspace is the agent's doing
        self.file_answers = transcript.Answers()  # what JSONL session transcripts say of the model's requests
        self.answers = transcript.Answers()  # what the transcript says of a run left unfinished (model_answers)

    # --- preparation ------------------------------------------------------------------------
    def prepare(self) -> list[str]:
        spec = self.spec
        self.trace.runner("openclaw_executor_selected", None, {
            "docker_cli": spec.docker_cli, "image": spec.image, "image_digest": spec.image_digest,
            "network": self.settings.network, "pull": self.settings.pull})
        # A template's link out of the workspace means that path of the image, inside the container; the
        # host side never follows one (stored as a link, redaction and limits skip links).
        self.store.checkout(spec.agent_tree, self.workspace, allow_external_links=True)
        self.checked_out = True
        for name in ("state", "home"):
            (self.root / name).mkdir()
        self.trace.runner("workspace_materialized", None, {
            "agent_tree": spec.agent_tree, "placeholder_files": placeholders_in_tree(self.store, spec.agent_tree)})
        try:
            self.config_doc = oc_config.render_config(spec.agent, spec.requested_model, spec.model_extras,
                                                      spec.provider_base_url, spec.api_key_env)
        except oc_config.OpenClawConfigError as exc:
            raise _Failure("invalid", RunError("openclaw_config_invalid", str(exc), "configuration_error")) from None
        data = oc_config.config_bytes(self.config_doc)
        (self.root / "openclaw.json").write_bytes(data)
        self.outputs["openclaw_config"] = self.store.put_bytes(data)
        texts = render_turns(spec.messages, spec.turns, spec.attachments, spec.hints)
        for message in spec.messages:
            self.trace.message(message.get("role", "user"), message.get("content"), message.get("name"),
                               {"openclaw_input_kind": "initial_message"})
        for index, turn in enumerate(spec.turns):
            self.trace.message(turn.get("role", "user"), turn.get("content"), turn.get("name"),
                               {"openclaw_input_kind": "turn", "turn_index": index})
        return texts

    def environment(self) -> dict[str, str]:
        spec = self.spec
        env = container_env(spec.api_key_env, self.settings.extra_env)
        if spec.api_key_env and not env.get(CONTAINER_KEY_ENV, "").strip():
            raise _Failure("failed", RunError(
                "runner_configuration_error",
                f"{named_variable(spec.api_key_env)} is not set (the model provider's API key)",
                "configuration_error"))
        # (and the credential the engine's address carries: the CLI quotes a DOCKER_HOST it cannot parse whole)
        self.secrets = sorted({*secret_values(env), *engine_secrets(engine_env())}, key=len, reverse=True)
        self.trace.runner("openclaw_container_env", None, {
            "mode": "allowlist", "variables": sorted(env), "api_key_set": bool(spec.api_key_env),
            "forwarded_count": len(env)})
        return env

    # --- execution --------------------------------------------------------------------------
    def execute(self, texts: list[str], env: dict[str, str]) -> None:
        spec = self.spec
        # (before the engine is asked: a provider no container could reach failed each turn after OpenClaw's retries)
        unreachable = endpoint_problem(spec.provider_base_url, self.settings.network)
        if unreachable:
            raise _Failure("failed", RunError(ENDPOINT_UNREACHABLE, f"{unreachable}; no container was started",
                                              "execution_error", retryable=True,
                                              metadata={"network": self.settings.network}))
        problem = engine_problem(self.settings, spec.image)
        if problem:
            raise _Failure("failed", RunError("openclaw_engine_unavailable", problem, "execution_error",
                                              retryable=True))
        deadline = time.monotonic() + spec.timeout_seconds
        owner = (*(owner_labels(self.store, self.build_id, self.settings) if self.build_id else ()), *self.labels)
        runner = ContainerRunner(self.settings, spec.image, self.root, env, self.run_tag,
                                 hidden_env=(spec.api_key_env,) if spec.api_key_env else (), owner_labels=owner)
        # Every long message is written before the first container: the agent owns the mounted root, and a link
        # it left at turns/turn_2.txt would have had the host write the prompt over the file it names.
        for index, text in enumerate(texts):
            if _through_file(text):
                (self.root / "turns").mkdir(exist_ok=True)
                (self.root / "turns" / _message_file(index)).write_text(text, encoding="utf-8")
        # A watchdog removes them if this process dies before the cleanup below (watchdog.py): the build's (one for
        # all its runs in flight), or on a Ray node the attempt's (`labels`: its label). (Imported here: the package's
        # import as the watchdog's `python -m` starts must not import it first, runpy's RuntimeWarning.)
        from clawstore.runners.openclaw.watchdog import watching

        sweep = ("build", str(self.store.root.resolve()), self.build_id) if self.build_id else \
            ("label", self.settings.docker_cli, self.labels[0]) if self.labels else None
        with watching(*sweep) if sweep else contextlib.nullcontext():
            try:
                self._validate(runner, deadline)
                for index, text in enumerate(texts):
                    self._turn(runner, index, len(texts), text, deadline)
            finally:
                self.invocations = runner.invocations
                leftovers = runner.cleanup()
                if leftovers:
                    self.trace.runner("containers_removed", None, {"names": leftovers})

    def _validate(self, runner: ContainerRunner, deadline: float) -> None:
        # An accepted validation of all this container would see is remembered (validated.py): none is run again.
        key = validated.validation_key(self.spec.image, self.spec.image_digest, self.settings, VALIDATE_ARGV,
                                       runner.env, self.root)
        remembered = validated.lookup(self.store, key) if key else None
        if remembered is not None:
            self.validated = True
            self.trace.runner("config_validated", None, {"cached": True, "validation": key,
                                                         "validated_duration_s": remembered.duration_s})
            return
        remaining = deadline - time.monotonic()
        inv = runner.run("validate", VALIDATE_ARGV, min(VALIDATE_TIMEOUT_S, remaining))
        self._check_engine(inv)
        self._check_output(inv)
        if inv.timed_out:
            raise _Failure("timed_out", RunError(
                "openclaw_timeout", f"config validation did not finish within the run's "
                f"{self.spec.timeout_seconds}s timeout", "timeout", retryable=True, metadata={"step": "validate"}))
        if inv.returncode != 0:
            # (redacted whole, then cut: a secret the cut crossed was no longer whole in the tail, its end kept)
            detail = ev.redact(inv.stdout.strip() or inv.stderr.strip(), self.secrets)[-2000:]
            raise _Failure("invalid", RunError(
                "openclaw_config_invalid", f"openclaw config validate exited {inv.returncode}: {detail}",
                "configuration_error", metadata={"returncode": inv.returncode}))
        self.validated = True
        if key:
            validated.remember(self.store, key, inv.duration_s)
        self.trace.runner("config_validated", None, {"cached": False, "duration_s": round(inv.duration_s, 3)})

    def _turn(self, runner: ContainerRunner, index: int, count: int, text: str, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        argv = ["openclaw", "agent", "--local", "--json", "--agent", self.cli_agent_id,
                "--session-id", self.session]
        if _through_file(text):
            argv += ["--message-file", f"/work/turns/{_message_file(index)}"]
        else:
            argv += ["--message", text]
        # OpenClaw's own limit ends the agent cleanly just before ours would remove the container.
        argv += ["--timeout", str(max(1, math.floor(remaining)))]
        self.trace.runner("agent_invoked", None, {
            "agent_id": self.cli_agent_id, "agent_directory_id": self.spec.agent_id,
            "session_id": self.session, "turn_index": index, "turn_count": count})
        inv = runner.run(f"{TURN_STEP}{index + 1}", argv, remaining)
        self._check_engine(inv)
        self._check_output(inv)
        payload = ev.find_payload(ev.redact(ev.payload_text(inv), self.secrets)) if not inv.timed_out else None
        self.turn_payloads.append(payload)
        # OpenClaw's own --timeout may end the turn a moment before ours does: same outcome.
        aborted = inv.returncode != 0 or bool(((payload or {}).get("meta") or {}).get("aborted"))
        if inv.timed_out or (aborted and time.monotonic() >= deadline - DEADLINE_SLACK_S):
            raise _Failure("timed_out", RunError(
                "openclaw_timeout", f"turn {index + 1} of {count} exceeded the run's "
                f"{self.spec.timeout_seconds}s timeout" + ("; its container was removed" if inv.timed_out else ""),
                "timeout", retryable=True, metadata={"turn_index": index}))
        if inv.returncode != 0:
            stderr = ev.redact(inv.stderr.strip(), self.secrets)[-2000:]  # (redacted whole, then cut: see _validate)
            killed = " (killed: past its memory limit, CLAW_OPENCLAW_MEMORY?)" \
                if inv.returncode == 137 and self.settings.memory else ""
            reason = ev.failure_reason(payload, stderr)
            raise _Failure("failed", RunError(
                "openclaw_execution_failed", f"turn {index + 1} of {count}: openclaw exited {inv.returncode}{killed}"
                + (f": {reason}" if reason else ""),
                "execution_error", metadata={"turn_index": index, "returncode": inv.returncode,
                                             "stderr": stderr}))
        self.trace.final_output(ev.redact(ev.visible_text(payload), self.secrets),
                                {"turn_index": index, "payload_found": payload is not None})

    def _check_engine(self, inv: Invocation) -> None:
        if inv.engine_error:
            raise _Failure("failed", RunError("openclaw_engine_unavailable",
                                              f"{inv.step}: {inv.engine_error}", "execution_error",
                                              retryable=True))

    def _check_output(self, inv: Invocation) -> None:
        if inv.output_overflow:
            raise _Failure("failed", RunError(
                "openclaw_output_limit", f"{inv.step}: the container wrote more than "
                f"{size_text(MAX_OUTPUT_BYTES)} to {inv.output_overflow}; it was stopped (the first "
                f"{size_text(MAX_OUTPUT_BYTES)} are kept in the logs)", "execution_error",
                metadata={"step": inv.step, "stream": inv.output_overflow}))

    # --- evidence ---------------------------------------------------------------------------
    def workspace_failure(self) -> RunError | None:
        """The run's failure when its final workspace is too big to keep (clawstore/host/run_limits.py) or is a link:
        the agent owns the mounted root, and a link there names a host path to every reader after it."""
        replaced = "a link" if self.workspace.is_symlink() else "a file" if (
            self.workspace.exists() and not self.workspace.is_dir()) else None
        if replaced:
            return RunError("openclaw_workspace_replaced", "the agent's final workspace was not kept: the agent "
                            f"replaced its workspace directory with {replaced}", "execution_error")
        problem = workspace_problem(self.workspace) if self.workspace.exists() else None
        if problem is None:
            return None
        return RunError("openclaw_workspace_too_large", f"the agent's final workspace was not kept: {problem}",
                        "execution_error")

    def capture(self, workspace_refused: RunError | None = None) -> dict[str, Any]:
        store, spec = self.store, self.spec
        if workspace_refused is not None:
            self._capture_logs()
            return {"workspace_kept": False, "workspace_problem": workspace_refused.message}
        # An agent that deleted its workspace left nothing: recorded as an empty tree, every template file deleted
        # (the template's tree in its place said the run changed nothing). No container runs any more.
        missing = self.checked_out and not self.workspace.exists()
        if missing:
            self.workspace.mkdir()
        kept = self.workspace.exists()  # (not, only when the checkout itself failed: the template stands for it)
        redacted = ev.redact_tree(self.workspace, self.secrets) if kept else []
        pruned = prune_workspace(self.workspace) if kept else []
        final_tree = store.put_tree(self.workspace, escape_names=True) if kept else spec.agent_tree
        self.outputs["workspace"] = final_tree
        self.outputs["workspace_diff"] = store.put_bytes(
            workspace_diff(store, spec.agent_tree, final_tree, pruned).encode("utf-8"))
        self._capture_logs()
        return {"redacted_files": redacted, "pruned_paths": pruned,
                "changed_paths": changed_paths(store, spec.agent_tree, final_tree, pruned),
                **({"workspace_missing": True} if missing else {})}

    def _capture_logs(self) -> None:
        """The containers' output, each turn's payload and OpenClaw's session files (all redacted)."""
        store = self.store
        logs = "".join(ev.log_block(inv) for inv in self.invocations)
        self.outputs["openclaw_logs"] = store.put_bytes(ev.redact(logs, self.secrets).encode("utf-8"))
        turns = []
        for inv in self.invocations:
            if not inv.step.startswith(TURN_STEP):
                continue
            raw = ev.redact(ev.payload_text(inv), self.secrets).encode("utf-8")
            turns.append({"turn_index": int(inv.step[4:]) - 1, "returncode": inv.returncode,
                          "timed_out": inv.timed_out, "duration_s": round(inv.duration_s, 3),
                          "payload": store.put_bytes(raw), "payload_bytes": len(raw)})
        self.outputs["openclaw_raw_trace"] = store.put_json({"session_id": self.session, "turns": turns})
        self.outputs.update(self._session_files())

    def _session_files(self) -> dict[str, str]:
        """OpenClaw's own session transcripts, when the release writes them as JSONL files."""
        found = {}
        for path in sorted((self.root / "state").glob("agents/*/sessions/*.jsonl")):
            # No link anywhere on its way (the agent owns state/: a linked directory names a host one).
            why = transcript.unsafe(path, self.root, MAX_SESSION_FILE_BYTES)
            if why is not None:
                self.trace.runner("session_file_skipped", None, {"name": path.name, "reason": why})
                continue
            text = ev.redact(path.read_text(encoding="utf-8", errors="replace"), self.secrets)
            self.file_answers += transcript.jsonl_answers(text)
            found[f"openclaw_session:{path.name}"] = self.store.put_bytes(text.encode("utf-8"))
        return found

    def model_answers(self) -> transcript.Answers:
        """Was the agent's model answering it, and what did the requests it answered count (transcript.py): a JSONL
        transcript read already says so, else the agent's SQLite database (OpenClaw 2026.9.6), read only for a run
        that needs to know."""
        found = transcript.Answers()
        found += self.file_answers
        if found.last_answered:
            return found
        for database in sorted((self.root / "state").glob(transcript.DATABASE_GLOB)):
            answers, why = transcript.database_answers(database, self.root)
            if why is not None:
                self.trace.runner("session_database_skipped", None, {"name": database.parent.parent.name,
                                                                     "reason": why})
            found += answers
        return found

    def turns_started(self) -> int:
        """The turns whose container started: only `openclaw agent` (a turn's container) calls the provider."""
        return sum(1 for inv in self.invocations if inv.step.startswith(TURN_STEP) and inv.started)

    def left_no_result(self) -> bool:
        """Did a turn's container start and leave no result (it crashed, was killed, timed out, flooded its output)
        after what it may have sent? Its run's spend is then unknown, at least what its transcript shows answered."""
        return sum(1 for payload in self.turn_payloads if payload) < self.turns_started()

    def key_outputs(self, status: str) -> list[dict[str, Any]]:
        if status == "invalid" or not self.validated:
            return []
        files = {e.path: e for e in self.store.read_tree(self.outputs["workspace"]) if e.type == "file"}
        refs = []
        for hint in ev.expected_artifacts(self.spec.hints):
            rel = ev.workspace_relative(hint)
            entry = files.get(rel) if rel else None
            if entry is None:
                continue
            refs.append({"artifact_id": f"openclaw_key_output_{len(refs) + 1}",
                         "artifact_type": "openclaw_key_output", "uri": f"workspace:{rel}",
                         "object": entry.object, "media_type": ev.media_type(rel), "byte_size": entry.size,
                         "metadata": {"workspace_relative_path": rel}})
        return refs


def _through_file(text: str) -> bool:
    return len(text.encode("utf-8")) > MAX_MESSAGE_ARG


def _message_file(index: int) -> str:
    return f"turn_{index + 1}.txt"


def _ref(artifact_id: str, artifact_type: str, oid: str | None, media_type: str | None) -> dict[str, Any] | None:
    if oid is None:
        return None
    return {"artifact_id": artifact_id, "artifact_type": artifact_type, "uri": None, "object": oid,
            "media_type": media_type}


def run_openclaw(spec: OpenClawSpec, store: Store, workdir: Path, *, run_id: str | None = None,
                 build_id: str | None = None, labels: tuple[str, ...] = ()) -> OpenClawOutcome:
    """Run one openclaw case against one model. Never raises for a run that fails: the failure is
    the artifact's status. `workdir` is a scratch directory; everything kept goes into `store`.
    `build_id`: the build running it, whose label its containers carry (orphans.py); `labels`: more
    `key=value` labels for them (the Ray attempt's, builder/ray_client.py)."""
    clock = Clock()
    run_id = run_id or f"run_{uuid.uuid4().hex}"
    root = Path(tempfile.mkdtemp(prefix="claw-oc-", dir=workdir))
    run = _Run(spec, store, root, run_id, build_id, labels)
    status, error = "success", None
    captured: dict[str, Any] = {}
    try:
        try:
            texts = run.prepare()
            env = run.environment()
            run.execute(texts, env)
        except _Failure as failure:
            status, error = failure.status, failure.error
        except Exception as exc:  # noqa: BLE001 - a harness bug is a failed run, recorded, not a crash
            status, error = "failed", RunError("runner_execution_failed", f"{type(exc).__name__}: {exc}",
                                               "execution_error")
        too_big = run.workspace_failure()
        if too_big is not None and error is None:
            status, error = "failed", too_big
        captured = run.capture(workspace_refused=too_big)
        timed_out = error is not None and _turn_timed_out(error)
        read = timed_out or run.left_no_result()
        if read:
            # Its answered requests: what it spent at least, kept or not (crashed, killed, flooded: a fault all the
            # same, retried; only the keeping below is the timeout's).
            run.answers = run.model_answers()
        if error is not None and timed_out and too_big is None and run.answers.last_answered:
            error = _agent_timeout(error, spec.timeout_seconds)
        refused = _out_of_credit(run, error, read)
        if refused is not None:
            status, error = "failed", refused
    finally:
        remove_tree(root)
    if error is not None:
        run.trace.runner("run_failed", error.message, {"code": error.code})
    clock.stop()
    return OpenClawOutcome(_artifact(run, spec, run_id, clock, status, error, captured), dict(run.outputs))


def _out_of_credit(run: _Run, error: RunError | None, read: bool) -> RunError | None:
    """The run's fault when its model's last request was refused with HTTP 402 (transcript.py `out_of_credit`), whatever
    OpenClaw made of it (a failed turn, or its billing notice as the reply with exit 0: never the model's outcome); the
    build stops starting runs against that endpoint (builder/refused.py). The transcript is read only for a run that
    failed or whose turn ended in an error (`read`: it was read already)."""
    if not run.turns_started() or (error is None and not any(_ended_in_error(p) for p in run.turn_payloads)):
        return None
    said = transcript.out_of_credit(run.answers if read else run.model_answers())
    if said is None:
        return None
    return RunError(OUT_OF_CREDIT, f"the agent's provider {shown_url(run.spec.provider_base_url)} answered HTTP 402 "
                    f"(out of credit): {said}", "provider_error", retryable=True, provider_code="402",
                    metadata={**(error.metadata if error is not None else {}), "status_code": 402,
                              "provider_message": said, "turn_error": error.code if error is not None else None})


def _ended_in_error(payload: dict[str, Any] | None) -> bool:
    """A turn's result saying its model's request failed (OpenClaw's `meta.stopReason`, or a reply marked an error)."""
    if not payload:
        return False
    meta, replies = payload.get("meta"), payload.get("payloads")
    return (isinstance(meta, dict) and meta.get("stopReason") == "error") or any(
        isinstance(p, dict) and p.get("isError") is True for p in (replies if isinstance(replies, list) else []))


def _turn_timed_out(error: RunError) -> bool:
    """A turn cut off by the run's timeout. While the agent's model was answering it (its last request recorded was
    answered: transcript.py) it is the agent's own outcome within the user's budget (kept, as llm_probe's
    `max_turns_exceeded`), not a fault to pay for again. A timeout with no answered request (provider down or stalled,
    validation), or whose last request the provider refused (down since), stays a fault, retried; so does one whose
    workspace was not kept (run_limits.py): kept, its checks and judge would read none."""
    return error.code == "openclaw_timeout" and "turn_index" in error.metadata


def _agent_timeout(error: RunError, timeout_seconds: int) -> RunError:
    return RunError(AGENT_TIMEOUT, f"the agent used its whole {timeout_seconds}s: its model answered, and it was "
                    f"still working when the run's timeout ended it ({error.message}); kept as the agent's outcome "
                    "(`claw build --force` runs it again)", "timeout", metadata=dict(error.metadata))


def _artifact(run: _Run, spec: OpenClawSpec, run_id: str, clock: Clock, status: str,
              error: RunError | None, captured: dict[str, Any]) -> dict[str, Any]:
    key_outputs = run.key_outputs(status) if "workspace" in run.outputs else []
    raw_usage = ev.summed_usage(run.turn_payloads)
    prices = pricing(spec.model_extras)
    cost = ev.cost_usd(raw_usage, prices)
    started = run.turns_started()
    if cost is None and not started:
        # None was started (no engine, no API key, a config refused, the engine refused its container): no request
        # left, its cost is 0 whatever the model's price, not unknown.
        cost = 0.0
    usage = ev.turns_usage(raw_usage, cost)
    if not ev.turns_reported(run.turn_payloads) or run.left_no_result():
        # Its tokens unknown, never 0 (no declared price makes them a cost): a turn that counted none, or one whose
        # container ran and left no result (it crashed, timed out, flooded its output) after what it may have sent.
        usage = Usage.not_believed(ev.NO_RESULT if run.left_no_result() else ev.NOT_REPORTED)
    last = next((p for p in reversed(run.turn_payloads) if p), None)
    agent_meta = ((last or {}).get("meta") or {}).get("agentMeta") or {}
    outputs = run.outputs
    evidence = {
        "schema_version": 1,
        "agent_id": spec.agent_id,
        "cli_agent_id": run.cli_agent_id,
        "container_image": spec.image,
        "image_digest": spec.image_digest,
        "session_id": run.session,
        "workspace_template": spec.agent_tree,
        "generated_openclaw_config": _ref("openclaw_config", "openclaw_generated_config",
                                          outputs.get("openclaw_config"), "application/json"),
        "raw_session_trace": _ref("openclaw_raw_trace", "openclaw_raw_session_trace",
                                  outputs.get("openclaw_raw_trace"), "application/json"),
        "openclaw_logs": _ref("openclaw_logs", "openclaw_logs", outputs.get("openclaw_logs"), "text/plain"),
        "workspace_snapshot": _ref("openclaw_workspace", "openclaw_workspace_tree", outputs.get("workspace"),
                                   None),
        "workspace_diff": _ref("openclaw_workspace_diff", "openclaw_workspace_diff",
                               outputs.get("workspace_diff"), "text/x-diff"),
        "session_files": {k.split(":", 1)[1]: v for k, v in outputs.items() if k.startswith("openclaw_session:")},
        "key_output_artifacts": key_outputs,
        "metadata": {
            "observable_summary": ev.observable_summary(last, [r["metadata"]["workspace_relative_path"]
                                                               for r in key_outputs]),
            "tool_calls": ev.tool_calls(run.turn_payloads),  # (claw query's runs.tool_calls)
            "invocations": [inv.summary() for inv in run.invocations],
            "container_seconds": round(sum(inv.duration_s for inv in run.invocations), 3),
            "network": run.settings.network,
            **captured,
        },
    }
    artifact = RunArtifact(
        run_id=run_id, case_id=spec.case_id, runner_type=RUNNER_TYPE, status=status,
        started_at=clock.started_at, completed_at=clock.completed_at or clock.started_at,
        duration_seconds=clock.duration_seconds,
        request={
            "requested_model": spec.requested_model,
            "gateway": "openclaw",
            "endpoint": {"base_url": spec.provider_base_url},
            "execution_parameters": {"timeout_seconds": spec.timeout_seconds},
            "metadata": {
                "input_context": {"openclaw": spec.hints} if spec.hints else {},
                "resolved_messages": [{k: m.get(k) for k in ("role", "content", "name")} for m in spec.messages],
                "resolved_turns": [{k: t.get(k) for k in ("role", "content", "name")} for t in spec.turns],
                "attachments": [{"name": n, "byte_size": len(d), "object": _object_id(d)}
                                for n, d in spec.attachments],
                "model_selection": {"model_ref": oc_config.model_ref(spec.requested_model),
                                    "primary_params": oc_config.primary_params(spec.agent, spec.model_extras)},
                "openclaw": {"agent_id": spec.agent_id, "cli_agent_id": run.cli_agent_id,
                             "container_image": spec.image, "image_digest": spec.image_digest,
                             "docker_cli": spec.docker_cli, "execution": "container",
                             "turn_count": max(len(spec.turns), 1), "multiturn": bool(spec.turns)},
            },
        },
        provider={"gateway": "openclaw", "provider_name": agent_meta.get("provider"),
                  "provider_model_id": agent_meta.get("model"), "request_id": None,
                  "response_id": None, "finish_reason": ((last or {}).get("meta") or {}).get("stopReason"),
                  "native_finish_reason": None,
                  "metadata": {"returncode": run.invocations[-1].returncode if run.invocations else None}},
        usage=usage,
        raw_provider_usage=[{"turn_index": i, **ev.turn_usage(p)} for i, p in enumerate(run.turn_payloads)],
        trace=run.trace.events,
        output_artifacts=key_outputs,
        error=error,
        runner_metadata={"openclaw": evidence},
    )
    # Last line of defence: whatever path a secret took into the artifact, it does not leave here.
    data = ev.redact_json(artifact.to_json(), run.secrets)
    # OpenClaw reports no provider cost: its figure is always the declared prices' (or none).
    data["usage"]["cost_source"] = UNKNOWN if usage.cost_usd is None else PRICED
    if usage.rejected == ev.NO_RESULT and run.answers.requests:  # what its transcript shows answered: spent at least
        data["usage"].update(ev.known_part(run.answers.requests, run.answers.tokens, prices))
    strict_json(data)  # fail here, not in the store, if anything is not JSON
    return data
