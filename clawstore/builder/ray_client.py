"""`claw build --executor ray`: every provider request and OpenClaw run of the build runs on a Ray cluster, while the
driver plans, bounds concurrency and commits each result exactly once. Details: docs/distributed.md (Details by module).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import blake3

from clawstore import __version__
from clawstore.errors import UsageError
from clawstore.host.process_end import leave_to_exit
from clawstore.providers.errors import ProviderError
from clawstore.providers.usage import RUN_LOST, SENT_UNANSWERED, WORKER_LOST, Usage
from clawstore.values.clock import utc_now_millis
from clawstore.values.costs import UNKNOWN
from clawstore.values.earlier import EarlierAttempts, carry_earlier
from clawstore.values.urls import shown_text

if TYPE_CHECKING:
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint
    from clawstore.runners.openclaw.runner import OpenClawOutcome, OpenClawSpec

ACTOR_NAMESPACE = "clawstore"
ACTOR_CONCURRENCY = 256  # requests one node's actor serves at once (threads waiting on HTTP)
# (More than 1: Ray runs the actor's tasks out of order, and a request cancelled in its queue (chat) holds up no
# other; an actor of 1 waits 30 s for the cancelled one's turn, then fails the requests behind it: measured.)
DEFAULT_REQUEST_TIMEOUT_S = 600.0
MAX_BACKOFF_S = 60.0
CONNECT_TIMEOUT_S = 5.0  # for the cluster's address to accept a connection at all
# A request whose worker died is sent again, by the driver, at most this many times (as Ray's own retries did before
# session 78: they re-sent it unseen, and the lost attempt's spend, unknown, was dropped from the run's cost).
LOST_WORKER_RETRIES = 3
STOP_TIMEOUT_S = 120.0  # for the nodes to list and remove a lost run's containers (CLI calls of up to 30 s each)
# The driver's patience with an OpenClaw task beyond the run's own limit (the engine starting its container): past it
# the driver gives up on the case, cancels its task and stops its containers (run_openclaw).
OPENCLAW_MARGIN_S = 600.0
CHAT_MARGIN_S = 60.0  # the same beyond a request's own timeouts and backoffs (chat)
# For a given-up task's cancel to land (Ray killing its worker, or dropping it from its queue) before its nodes are
# asked to stop its containers: a cluster that does not answer is not waited for longer than this.
CANCEL_WAIT_S = 30.0


def _code_tag() -> str:
    """A short digest of the code an actor runs (this module and the provider client): actors made by
    other code, an older release or an edited checkout, are never reused."""
    from clawstore import providers

    hasher = blake3.blake3(__version__.encode())
    for path in sorted([Path(__file__), *Path(providers.__file__).parent.glob("*.py")]):
        hasher.update(path.read_bytes())
    return hasher.hexdigest()[:12]


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'clawstore[ray]'") from None
    return ray


def _check_reachable(target: str) -> None:
    """Ray retries an address where nothing answers for about ten minutes (twenty attempts of 35 s,
    printing warnings); one TCP connection tells at once. ("auto" and other forms: Ray's own answer.)"""
    host, sep, port = target.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, OverflowError, ValueError):
        raise UsageError(f"--executor ray: cannot reach a Ray cluster at {target} (nothing answers there: "
                         "start one with `ray start --head`, or pass --ray-address)") from None


def _messages_to_stderr(ray: Any) -> None:
    """Ray prints cluster events ("a worker died ...") on the driver's stdout; claw's stdout is the
    build table or its JSON, so they go to stderr (a private hook of Ray's, hence the guard)."""
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if original is None or getattr(original, "_claw_stderr", False):
        return

    def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        original({**data, "is_err": True}, *args, **kwargs)

    to_stderr._claw_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr


class _ChatWorker:
    """Lives on one Ray node: one provider client (one connection pool) for that node."""

    def __init__(self) -> None:
        from clawstore.host.machine_settings import backoff_base
        from clawstore.providers import ProviderClient

        self.client = ProviderClient(backoff_base=backoff_base())  # this node's environment

    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult:
        return self.client.chat(endpoint, body, timeout=timeout, retries=retries)

    def node(self) -> str:
        ray = import_ray()
        return str(ray.get_runtime_context().get_node_id())


def _openclaw_on_node(spec: OpenClawSpec, objects: dict[str, bytes],
                      label: str = "") -> tuple[OpenClawOutcome, dict[str, bytes]]:
    """A Ray task: one OpenClaw run on this node's container engine, against a scratch store holding
    the agent's workspace (`objects`), its containers labelled `label` (the attempt's: `_stop_on_node`).
    Returns the outcome and the content of every object the run stored; the driver stores each and
    checks it hashes to its id."""
    from clawstore.host.scratch import scratch_dir
    from clawstore.runners.openclaw import run_openclaw
    from clawstore.store import Store

    # The store closed before its directory goes (a worker runs many tasks: nothing of it stays open).
    with scratch_dir("claw-ray-openclaw-") as tmp, Store(Path(tmp) / "store") as store:
        with store.batch():
            for data in objects.values():
                store.put_bytes(data)
        (Path(tmp) / "work").mkdir()
        outcome = run_openclaw(spec, store, Path(tmp) / "work", labels=(label,) if label else ())
        made = {oid: store.get_bytes(oid) for oid in store.iter_objects() if oid not in objects}
    return outcome, made


def _stop_on_node(docker_cli: str, label: str) -> tuple[list[str] | None, str]:
    """A Ray task: remove this node's containers labelled `label` (a lost run's: its `docker run` lives in a
    session of its own and outlives the worker that started it, its agent still at work). The names removed,
    or (None, why) when the node's engine cannot be asked (orphans.stop_labelled)."""
    from clawstore.runners.openclaw.container import EngineSettings
    from clawstore.runners.openclaw.orphans import stop_labelled

    return stop_labelled(EngineSettings.from_env(docker_cli), label)  # this node's engine, as the run used it


@dataclasses.dataclass
class LostContainers:
    """What the driver did with the containers of an OpenClaw case's lost runs."""

    stopped: list[str] = dataclasses.field(default_factory=list)  # their names
    unstopped: list[str] = dataclasses.field(default_factory=list)  # why some may run still, one line each

    def not_stopped(self) -> str:
        """`; not stopped: <why>; <why>` for a give-up's message, or "" when every one was stopped."""
        return f"; not stopped: {'; '.join(self.unstopped)}" if self.unstopped else ""

    def said(self) -> str:
        """`; its container(s) stopped: <name>, ...; not stopped: <why>` for a give-up's message, whose case has no
        trace to name them in; "" when there were none."""
        stopped = f"; its container(s) stopped: {', '.join(self.stopped)}" if self.stopped else ""
        return stopped + self.not_stopped()


def after_lost_runs(outcome: OpenClawOutcome, lost: int, containers: LostContainers | None = None) -> OpenClawOutcome:
    """The outcome of an OpenClaw case made again after `lost` runs whose worker died under them: its cost
    unknown (those runs may have sent paid requests), at least what this run spent (its known part, as a
    run cut off with requests in flight has, runners/openclaw/runner.py), and a runner event saying so and
    naming the lost runs' containers stopped, and any that may still run (their spend going on)."""
    if not lost:
        return outcome
    artifact = dict(outcome.artifact)
    usage = dict(artifact.get("usage") or {})
    if not (usage.get("nothing_sent") or usage.get("usage_rejected") or usage.get("tokens_unknown")):
        normalized, cost = usage.get("normalized") or {}, usage.get("cost_usd")
        usage.update(input_tokens_known=normalized.get("input_tokens") or 0,
                     output_tokens_known=normalized.get("output_tokens") or 0)
        if isinstance(cost, int | float) and usage.get("cost_source") != UNKNOWN:
            usage["cost_known_usd"] = cost
    usage.pop("nothing_sent", None)  # (this run sent nothing; the lost ones may have)
    usage.update(cost_usd=None, cost_source=UNKNOWN, usage_rejected=usage.get("usage_rejected") or RUN_LOST)
    artifact["usage"] = usage
    trace = list(artifact.get("trace") or [])
    containers = containers or LostContainers()
    detail = f"{lost} earlier run(s) of this case lost with their Ray worker: their spend is unknown"
    if containers.stopped:
        detail += f"; their container(s) stopped: {', '.join(containers.stopped)}"
    if containers.unstopped:
        detail += (f"; their containers could not all be stopped, and may be running the agent still (spending): "
                   f"{'; '.join(containers.unstopped)}")
    trace.append({"sequence": len(trace), "event_type": "runner", "timestamp": utc_now_millis(), "name": "worker_lost",
                  "detail": detail, "metadata": {"lost_runs": lost, "containers_stopped": list(containers.stopped),
                                                 "containers_not_stopped": list(containers.unstopped)}})
    artifact["trace"] = trace
    return dataclasses.replace(outcome, artifact=artifact)


def _ping(actor: Any) -> Any:
    """An actor's `node()`, answered once it has (re)started: Ray retries it over a worker's death (nothing paid)."""
    return actor.node.options(max_task_retries=-1).remote()


class _Lost:
    """The attempts of one request whose worker died under them, before the one that came back: entered in
    its result as the provider client enters its own attempts (ProviderClient.chat), their usage unknown as
    that of a request sent and not answered (a lost reply may have been billed), code `worker_lost`."""

    def __init__(self) -> None:
        self.usage = Usage.unsent()
        self.log: list[dict[str, Any]] = []

    @property
    def count(self) -> int:
        return len(self.log)

    def add(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        self.log.append({"attempt": self.count + 1, "code": "worker_lost", "status_code": None})

    def _shifted(self, log: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self.log, *({**entry, "attempt": entry.get("attempt", 0) + self.count} for entry in log)]

    def before(self, exc: BaseException) -> BaseException:
        """`exc` (the worker's error, or the driver's), with these attempts before its own: counted in a ProviderError's
        usage and attempts, carried by any other (MissingApiKeyError: the restarted worker's environment lacks the key;
        any error of the worker's) for its recorder to count (values/earlier.py). Before session 80 they were dropped
        with any but a ProviderError, and a run whose retry found no key read as one that sent nothing: a known 0."""
        if not self.count:
            return exc
        if isinstance(exc, ProviderError):
            exc.usage, exc.attempts = self.usage + exc.usage, exc.attempts + self.count
            exc.attempt_log = self._shifted(exc.attempt_log)
            return exc
        return carry_earlier(exc, EarlierAttempts(self.usage, tuple(self.log)))

    def before_result(self, result: ChatResult) -> ChatResult:
        if not self.count:
            return result
        return dataclasses.replace(result, usage=self.usage + result.usage, attempts=result.attempts + self.count,
                                   attempt_log=self._shifted(result.attempt_log))


class RayClient:
    """The provider client of a distributed build: `chat()` as in ProviderClient, run on the cluster."""

    def __init__(self, address: str | None = None):
        ray = import_ray()
        self._ray = ray
        target = address or os.environ.get("RAY_ADDRESS") or "auto"
        # A program that embeds claw and is connected already keeps its connection (and closes it).
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            _check_reachable(target)
            _messages_to_stderr(ray)
            try:
                # No runtime_env: the nodes' prestarted workers can host the actors at once.
                ray.init(address=target, log_to_driver=False, logging_level="ERROR")
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UsageError(f"--executor ray: cannot reach a Ray cluster at {target} ({exc})") from None
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        # No retries by Ray: a request whose worker died may have been answered and billed; the driver sends it
        # again and counts the lost attempt (chat). Its ping alone is retried (`_ping`).
        actor = ray.remote(num_cpus=0, max_concurrency=ACTOR_CONCURRENCY, max_restarts=-1,
                           max_task_retries=0)(_ChatWorker)
        # One actor per node; soft affinity: a lost node's actor restarts on another. Detached and named
        # by this claw's code: the next build on the cluster finds them running (starting one takes
        # about half a second), and another version of claw never uses them.
        tag = _code_tag()
        self._actors = [actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True),
                                      name=f"claw-provider-{tag}-{node[:16]}", namespace=ACTOR_NAMESPACE,
                                      lifetime="detached", get_if_exists=True).remote()
                        for node in nodes]
        # Requests go to the actors that have started, in turn: on a new cluster one node's actor is up
        # before the other's (a worker process to start on each), and the first requests need not wait
        # for the slowest node. Each actor answers a ping once it has started.
        self._starting = {_ping(actor): actor for actor in self._actors}
        self._started: list[Any] = []
        self._turn = itertools.count()
        self._lock = threading.Lock()
        # A container per task, one CPU each: Ray places them where CPUs are free. A task whose worker
        # died is run again by the driver (run_openclaw), which counts the lost run, not by Ray.
        self._openclaw = ray.remote(num_cpus=1, max_retries=0)(_openclaw_on_node)
        self._stopper = ray.remote(num_cpus=0, max_retries=0)(_stop_on_node)  # (no CPU: runs beside busy cases)

    @property
    def nodes(self) -> int:
        return len(self._actors)

    def _actor(self, patience: float) -> Any:
        """The next started actor (waiting, at most `patience`, for the first to start); once every
        actor has started, each in turn. If none starts in time: any, and nobody waits again (the
        requests then fail as the cluster's, each after its own patience, not one after another)."""
        ray = self._ray
        with self._lock:  # (the threads that would wait for the first actor wait here together)
            if self._starting:
                pings = list(self._starting)
                started, _ = ray.wait(pings, num_returns=len(pings), timeout=0)
                if not started and not self._started:
                    started, _ = ray.wait(pings, num_returns=1, timeout=patience)
                    started = started or pings  # none started in time: stop telling them apart
                self._started += [self._starting.pop(ping) for ping in started]
            ready = self._started or self._actors
            return ready[next(self._turn) % len(ready)]

    def _lost(self, actor: Any) -> None:
        """A worker died under `actor`: Ray starts it again; requests go to the other started actors until
        it answers a ping (one sent to it now would fail as this one did)."""
        with self._lock:
            if actor in self._started:
                self._started.remove(actor)
                self._starting[_ping(actor)] = actor

    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult:
        ray = self._ray
        # However long the worker may legitimately take (every attempt timing out), plus a margin: a
        # cluster that died must fail the node, not hang the build. One patience for all its workers.
        patience = ((timeout or DEFAULT_REQUEST_TIMEOUT_S) + MAX_BACKOFF_S) * (max(retries, 0) + 1) + CHAT_MARGIN_S
        deadline = time.monotonic() + patience
        lost = _Lost()
        while True:
            actor = self._actor(max(deadline - time.monotonic(), 0.0))
            ref = actor.chat.remote(endpoint, body, timeout, retries)
            try:
                result = ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0))
            except ray.exceptions.RayTaskError as exc:
                raise lost.before(exc.cause) from None  # the worker's own (ProviderError, MissingApiKeyError, ...)
            except ray.exceptions.RayActorError as exc:
                # The worker died with the request (or the actor could not be made: then it never ran).
                never_ran = getattr(exc, "actor_init_failed", False)
                lost.add(Usage.unsent() if never_ran else Usage.not_believed(WORKER_LOST))
                self._lost(actor)
                if lost.count > LOST_WORKER_RETRIES or time.monotonic() >= deadline:
                    raise lost.before(ProviderError(
                        "transport_error", f"the Ray worker running the request died ({lost.count} times: "
                        f"{type(exc).__name__})", retryable=True, usage=Usage.unsent(), attempts=0)) from None
                continue
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError) as exc:
                # The request may be under way still, or have been: what it cost is unknown, never 0. One still
                # queued (its actor not started yet, or serving ACTOR_CONCURRENCY others) is cancelled: before
                # session 80 it was sent once the actor got to it: paid, answered to nobody, asked again next build.
                said = ""
                if isinstance(exc, ray.exceptions.GetTimeoutError):  # (an actor's task: cancelled unforced)
                    said = self._cancel(ref) or ": cancelled (never sent if it was still queued)"
                raise lost.before(ProviderError(
                    "transport_error", f"the Ray cluster did not answer ({type(exc).__name__}){said}",
                    retryable=True, usage=Usage.not_believed(SENT_UNANSWERED))) from None
            return lost.before_result(result)

    def run_openclaw(self, spec: OpenClawSpec, objects: dict[str, bytes]) -> tuple[OpenClawOutcome, dict[str, bytes]]:
        """Run one OpenClaw case on the cluster (see _openclaw_on_node)."""
        from clawstore.runners.openclaw.orphans import ATTEMPT_LABEL

        ray = self._ray
        patience = spec.timeout_seconds + OPENCLAW_MARGIN_S  # the run's own limit, plus the engine starting a container
        lost = 0  # runs whose worker died under them: each may have sent paid requests
        containers = LostContainers()  # theirs, stopped (or not) before the case runs again
        while True:
            label = f"{ATTEMPT_LABEL}={uuid.uuid4().hex}"  # this attempt's containers, wherever Ray places it
            ref = self._openclaw.remote(spec, objects, label)
            try:
                try:
                    outcome, made = ray.get(ref, timeout=patience)
                except ray.exceptions.GetTimeoutError:
                    # Given up: the task is cancelled before its containers are stopped. Before session 80 one still
                    # queued (the cluster's CPUs busy) started later and ran the whole case, paid, for nobody; one
                    # between two turns as the nodes were asked started the next turn's container, seen by nobody.
                    # Forced: a running task's worker is killed, and the attempt's watchdog on its node removes its
                    # containers (runners/openclaw/watchdog.py). (A task that ended meanwhile: its own outcome.)
                    outcome, made = self._give_up(ref, spec.docker_cli, label, containers, lost)
            except ray.exceptions.RayTaskError as exc:
                raise exc.cause from None
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
                lost += 1
                self.stop_attempt(spec.docker_cli, label, containers)
                if isinstance(exc, ray.exceptions.NodeDiedError):
                    containers.unstopped.append("its node left the cluster: a container it started there is "
                                                "not reachable from the cluster")
                if lost <= LOST_WORKER_RETRIES:
                    continue
                raise ProviderError("transport_error", f"the Ray worker running the OpenClaw case died ({lost} "
                                    f"times: {type(exc).__name__}){containers.said()}", retryable=True,
                                    attempts=lost, usage=Usage.not_believed(RUN_LOST)) from None
            except ray.exceptions.RayError as exc:
                # The run may have been under way: what it cost is unknown, never 0; its container, if it runs, is
                # stopped as a lost run's (the case may be built again beside it).
                self.stop_attempt(spec.docker_cli, label, containers)
                raise self._not_run(type(exc).__name__, containers, lost) from None
            return after_lost_runs(outcome, lost, containers), made

    def _not_run(self, why: str, containers: LostContainers, lost: int, cancel: str = "") -> ProviderError:
        return ProviderError("transport_error", f"the Ray cluster did not run the OpenClaw case ({why}){cancel}"
                             f"{containers.said()}", retryable=True,
                             usage=Usage.not_believed(RUN_LOST if lost else SENT_UNANSWERED))

    def _give_up(self, ref: Any, docker_cli: str, label: str, containers: LostContainers,
                 lost: int) -> tuple[OpenClawOutcome, dict[str, bytes]]:
        """The driver gave up waiting for the OpenClaw task of `ref`: cancel it (forced: a running one's worker is
        killed), wait for the cancel to land, stop the attempt's containers on every node, and raise the give-up's
        error saying what became of the task; or return the task's result if it ended before the cancel reached it."""
        ray = self._ray
        said = self._cancel(ref, force=True)
        if not said:  # (Ray tells how the cancel landed through the task's result)
            try:
                return ray.get(ref, timeout=CANCEL_WAIT_S)  # type: ignore[no-any-return]
            except ray.exceptions.RayTaskError:
                raise  # (the run ended by itself, failing: its own error, as any run's)
            except (ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError):
                # (Ray 2.60 says TaskCancelledError whether the task was queued or running: which, it does not tell)
                said = ": its task cancelled (queued, it never starts; running, its worker was killed)"
            except ray.exceptions.GetTimeoutError:
                said = f": its task's cancel not confirmed within {CANCEL_WAIT_S:.0f} s: it may run still"
            except ray.exceptions.RayError as exc:
                said = f": its task cancelled ({type(exc).__name__})"
        self.stop_attempt(docker_cli, label, containers)
        raise self._not_run("GetTimeoutError", containers, lost, said)

    def _cancel(self, ref: Any, force: bool = False) -> str:
        """Cancel the task of `ref`, which the driver gave up waiting for (one still queued never starts): "", or why
        it could not be, for the give-up's message."""
        ray = self._ray
        try:
            ray.cancel(ref, force=force)
        except (ray.exceptions.RayError, ConnectionError, RuntimeError, ValueError, TypeError) as exc:
            return f": its task could not be cancelled ({type(exc).__name__}): it may run still"
        return ""

    def stop_attempt(self, docker_cli: str, label: str, containers: LostContainers) -> None:
        """Remove the containers labelled `label` (a run whose worker died) on every live node (which one ran
        it, Ray does not say once the worker is gone), through the node's own engine as the run used it."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:
            nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
            asked = {node: self._stopper.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                     .remote(docker_cli, label) for node in nodes}
        except (ray.exceptions.RayError, ConnectionError, RuntimeError) as exc:
            containers.unstopped.append(f"the cluster could not be asked to stop them ({type(exc).__name__})")
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node, ref in asked.items():
            try:
                names, why = ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0))
            except ray.exceptions.RayError as exc:
                containers.unstopped.append(f"node {node[:12]}: could not be asked ({type(exc).__name__})")
                continue
            if names is None:  # (the CLI's words may quote the engine's address: shown as claw shows URLs)
                containers.unstopped.append(f"node {node[:12]}: its container engine did not answer "
                                            f"({shown_text(why)})")
            else:
                containers.stopped += [name for name in names if name not in containers.stopped]

    def close(self) -> None:
        # The actors stay for the next build (idle, no CPU reserved). In the `claw` program the
        # process's end closes the connection, a quarter of a second sooner (clawstore/host/process_end.py).
        if self._owns_connection and not leave_to_exit():
            self._ray.shutdown()
