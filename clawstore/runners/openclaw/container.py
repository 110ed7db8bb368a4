"""Running OpenClaw in a container through a docker-compatible CLI (`docker`, `podman`): every container named and
labelled so it can be found and removed, secrets only through an env-file read from a pipe. Details: docs/openclaw.md
(Details by module)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clawstore.errors import UsageError
from clawstore.host import bounded_output
from clawstore.host.run_limits import MAX_OUTPUT_BYTES
from clawstore.host.scratch import remove_tree
from clawstore.runners.openclaw.config import CONTAINER_KEY_ENV
from clawstore.runners.openclaw.loopback import network_setting
from clawstore.values.key_shapes import KEY_SHAPES
from clawstore.values.urls import secrets_in_url, shown_url

LABEL = "clawstore.openclaw"
MOUNT_POINT = "/work"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
              "http_proxy", "https_proxy", "no_proxy", "all_proxy")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
_KEY_SHAPES = tuple(map(re.compile, KEY_SHAPES))
_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STOP_GRACE_S = 10.0
DEFAULT_MEMORY = "4g"
DEFAULT_PIDS_LIMIT = "4096"
CLI_QUERY_TIMEOUT_S = 30.0
_PIPE_BYTES = 64 << 10  # what a pipe holds by default (Linux); a bigger environment asks for more


@dataclass(frozen=True)
class EngineSettings:
    docker_cli: str = "docker"
    network: str | None = None
    pull: str = "never"
    user: str | None = None
    extra_env: tuple[str, ...] = ()
    memory: str | None = DEFAULT_MEMORY
    pids_limit: str | None = DEFAULT_PIDS_LIMIT
    cpus: str | None = None

    @classmethod
    def from_env(cls, docker_cli: str, environ: Mapping[str, str] | None = None) -> EngineSettings:
        env = os.environ if environ is None else environ
        user = env.get("CLAW_OPENCLAW_USER")
        if user is None and hasattr(os, "getuid"):
            user = f"{os.getuid()}:{os.getgid()}"
        extra = tuple(n.strip() for n in env.get("CLAW_OPENCLAW_ENV_ALLOW", "").split(",") if n.strip())
        return cls(docker_cli=docker_cli, network=network_setting(env),
                   pull=env.get("CLAW_OPENCLAW_PULL") or "never", user=user or None, extra_env=extra,
                   memory=_limit(env, "CLAW_OPENCLAW_MEMORY", DEFAULT_MEMORY),
                   pids_limit=_limit(env, "CLAW_OPENCLAW_PIDS_LIMIT", DEFAULT_PIDS_LIMIT),
                   cpus=_limit(env, "CLAW_OPENCLAW_CPUS", None))

    def limit_flags(self) -> list[str]:
        """The engine's resource limits for each container: an agent's runaway process (a fork bomb,
        a memory leak) ends in its own container instead of starving the build and the machine."""
        flags = []
        for flag, value in (("--memory", self.memory), ("--pids-limit", self.pids_limit), ("--cpus", self.cpus)):
            if value is not None:
                flags += [flag, value]
        return flags


_LIMIT_FORMS = {  # what each setting accepts, and how a message describes it
    "CLAW_OPENCLAW_MEMORY": (re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE), "a size such as 4g or 512m"),
    "CLAW_OPENCLAW_PIDS_LIMIT": (re.compile(r"^-?\d+$"), "a whole number such as 4096"),
    "CLAW_OPENCLAW_CPUS": (re.compile(r"^\d+(\.\d+)?$"), "a number of CPUs such as 1.5"),
}


def _limit(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """One resource-limit setting: unset or empty means the default, `none` no limit; anything else
    that is not a value of its form is refused here (exit 2), not by the engine once per run."""
    value = (env.get(name) or "").strip()
    if not value:
        return default
    if value.lower() == "none":
        return None
    form, described = _LIMIT_FORMS[name]
    if not form.match(value):
        raise UsageError(f"{name}: expected {described}, or none for no limit; got {value[:40]!r}")
    return value


@dataclass
class Invocation:
    """One container run: what came out, how long it took, and how it ended."""

    step: str
    container: str
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0
    engine_error: str | None = None  # the engine itself failed (no CLI, no daemon, no image)
    output_overflow: str | None = None  # the stream that passed MAX_OUTPUT_BYTES (the container was stopped)
    started: bool = False  # the engine started its container: what it ran may have sent requests

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.engine_error is None \
            and self.output_overflow is None

    def summary(self) -> dict[str, object]:
        return {"step": self.step, "container": self.container, "returncode": self.returncode,
                "timed_out": self.timed_out, "duration_s": round(self.duration_s, 3),
                "engine_error": self.engine_error,
                **({"output_overflow": self.output_overflow} if self.output_overflow else {})}


# --- environment ------------------------------------------------------------------------------
# Fixed settings for OpenClaw itself: its files under the mount, no self-update checks.
OPENCLAW_ENV = {
    "OPENCLAW_CONFIG_PATH": f"{MOUNT_POINT}/openclaw.json",
    "OPENCLAW_STATE_DIR": f"{MOUNT_POINT}/state",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
    "HOME": f"{MOUNT_POINT}/home",
    "NO_COLOR": "1",  # plain logs: no terminal escapes in stored evidence
    "TZ": "UTC",
}


def _passable(name: str, value: str | None) -> bool:
    return value is not None and bool(_NAME_OK.match(name)) and "\n" not in value and "\x00" not in value


def container_env(api_key_env: str | None, extra_names: Sequence[str] = (),
                  environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The explicit allowlist: the provider key (renamed to CONTAINER_KEY_ENV), proxies, and names
    the user allowed. The key's own variable name (e.g. OPENROUTER_API_KEY) never reaches OpenClaw."""
    env = os.environ if environ is None else environ
    chosen = {name: env[name] for name in (*PROXY_VARS, *extra_names)
              if name != api_key_env and _passable(name, env.get(name))}
    if api_key_env and _passable(CONTAINER_KEY_ENV, env.get(api_key_env)):
        chosen[CONTAINER_KEY_ENV] = env[api_key_env].strip()  # (as claw's own requests send it: Endpoint.api_key)
    chosen.update(OPENCLAW_ENV)
    return chosen


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values that must never be stored: the key, anything named like a secret, the credential a URL carries (a
    proxy's `http://user:password@proxy:3128`, an allowed `DATABASE_URL`'s; the engine's are engine_secrets) and a
    value holding a key's shape (an allowed `GH_PAT=ghp_…`: values/key_shapes.py), whatever
    its variable's name."""
    shaped = {k: [m.group(0) for shape in _KEY_SHAPES for m in shape.finditer(v)] for k, v in env.items()}
    named = [v for k, v in env.items() if k == CONTAINER_KEY_ENV or _SECRET_NAME.search(k) or shaped[k]]
    values = {form for v in named for form in (v, v.strip()) if len(form) >= 4}  # (stripped: as a reader takes it)
    values.update(key for found in shaped.values() for key in found)
    values.update(part for v in env.values() for part in secrets_in_url(v) if len(part) >= 4)
    return sorted(values, key=len, reverse=True)


class EnvTooLarge(Exception):
    """The container's environment does not fit in a pipe (far beyond any allowlist's)."""


def env_pipe(env: Mapping[str, str]) -> int:
    """The read end of a pipe holding `env` as an env-file (NAME=value lines, written whole, write end
    closed): the container CLI reads it as /dev/fd/N. The caller closes it once the CLI has started."""
    data = "".join(f"{name}={env[name]}\n" for name in sorted(env)).encode("utf-8")
    read, write = os.pipe()
    try:
        if len(data) > _PIPE_BYTES and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # (up to /proc/sys/fs/pipe-max-size, 1 MiB by default)
                fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, len(data))
        os.set_blocking(write, False)  # a pipe too small fails here instead of waiting for a reader
        try:
            written = os.write(write, data) if data else 0
        except BlockingIOError:
            written = 0
        if written != len(data):
            raise EnvTooLarge(f"the container's environment ({len(data)} bytes) does not fit in a pipe")
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


# --- the engine -------------------------------------------------------------------------------
# The variables that choose the engine a CLI talks to (recorded with a build's containers: orphans.py).
ENGINE_VARS = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH",
               "CONTAINER_HOST", "CONTAINER_CONNECTION")


def _cli_env(hidden: Sequence[str], engine: Mapping[str, str] | None = None) -> dict[str, str]:
    # The CLI process needs DOCKER_HOST and friends, never the provider key. `engine`: the engine
    # variables to use instead of this process's.
    env = {k: v for k, v in os.environ.items() if k not in hidden and (engine is None or k not in ENGINE_VARS)}
    return env if engine is None else {**env, **engine}


def engine_env() -> dict[str, str]:
    """This process's engine variables (ENGINE_VARS that are set)."""
    return {name: os.environ[name] for name in ENGINE_VARS if name in os.environ}


def _ssh_login(address: str) -> bool:
    """`ssh://deploy@host`: a login's name, no credential (ssh takes no password in the URL, docker refuses one)."""
    scheme, sep, rest = address.strip().partition("://")
    return bool(sep) and scheme.lower() == "ssh" and ":" not in rest.partition("/")[0].rpartition("@")[0]


def engine_secrets(engine: Mapping[str, str]) -> list[str]:
    """The credentials the engine's addresses carry (`tcp://user:password@host`, a query's token), never stored: the
    CLI quotes an address it cannot parse whole. Not an ssh login's name: redacted, every `deploy` an agent wrote
    would be."""
    return [part for value in engine.values() if not _ssh_login(value)
            for part in secrets_in_url(value) if len(part) >= 4]


def engine_address_shown(address: str) -> str:
    """An engine's address as a build's container record keeps it (orphans.py): its credential masked as claw shows
    URLs (`tcp://***@host:2375`), an ssh login's name kept."""
    return address if _ssh_login(address) else shown_url(address)


def _quick(settings: EngineSettings, args: Sequence[str], hidden: Sequence[str] = (),
           engine: Mapping[str, str] | None = None) -> tuple[int, str]:
    try:
        done = subprocess.run([settings.docker_cli, *args], capture_output=True, text=True,
                              timeout=CLI_QUERY_TIMEOUT_S, env=_cli_env(hidden, engine), check=False)
    except FileNotFoundError:
        return 127, f"container CLI '{settings.docker_cli}' not found"
    except subprocess.TimeoutExpired:
        return 124, f"'{settings.docker_cli} {' '.join(args[:2])}' did not answer in {CLI_QUERY_TIMEOUT_S:.0f}s"
    return done.returncode, (done.stdout + done.stderr).strip()


def engine_problem(settings: EngineSettings, image: str) -> str | None:
    """Why containers cannot run (no CLI, no engine, image absent), or None when they can."""
    code, out = _quick(settings, ["image", "inspect", "--format", "{{.Id}}", image])
    if code == 0:
        return None
    if code in (124, 127):
        return out
    if settings.pull != "never" and "daemon" not in out.lower():
        return None  # the engine answers and will pull the image itself
    if re.search(r"no such image|image not known|not found", out, re.IGNORECASE):
        return (f"image '{image}' is not present in the engine ({settings.docker_cli}); "
                f"pull or load it first, or set CLAW_OPENCLAW_PULL=missing")
    return f"container engine unavailable: {out.splitlines()[0] if out else f'exit {code}'}"


def remove_container(settings: EngineSettings, name: str, engine: Mapping[str, str] | None = None) -> None:
    _quick(settings, ["rm", "-f", name], engine=engine)


def labelled_containers(settings: EngineSettings, label: str,
                        engine: Mapping[str, str] | None = None) -> tuple[list[str] | None, str]:
    """Names of containers (running or not) that carry `label` (or `label=value`); (None, why) when the
    engine cannot be asked."""
    code, out = _quick(settings, ["ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
                       engine=engine)
    if code != 0:
        return None, out.splitlines()[0] if out else f"exit {code}"
    return [line for line in out.splitlines() if line.strip()], ""


def running_containers(settings: EngineSettings, label: str = LABEL) -> list[str]:
    """Names of containers (running or not) that carry our label (or `label=value`)."""
    return labelled_containers(settings, label)[0] or []


@dataclass
class ContainerRunner:
    """Runs steps of one OpenClaw run: same image, mount, environment and labels for every step."""

    settings: EngineSettings
    image: str
    root: Path
    env: Mapping[str, str]  # reaches each container through a pipe (env_pipe)
    run_tag: str
    hidden_env: tuple[str, ...] = ()
    owner_labels: tuple[str, ...] = ()  # the build that runs it (orphans.py), `key=value` each
    invocations: list[Invocation] = field(default_factory=list)

    def command(self, name: str, argv: Sequence[str], env_file: str, cidfile: str) -> list[str]:
        cmd = [self.settings.docker_cli, "run", "--rm", "--init", "--name", name, "--cidfile", cidfile,
               "--label", f"{LABEL}=1", "--label", f"{LABEL}.run={self.run_tag}"]
        for label in self.owner_labels:
            cmd += ["--label", label]
        cmd += ["--pull", self.settings.pull]
        if self.settings.network:
            cmd += ["--network", self.settings.network]
        if self.settings.user:
            cmd += ["--user", self.settings.user]
        cmd += self.settings.limit_flags()
        cmd += ["-v", f"{self.root}:{MOUNT_POINT}:rw", "-w", MOUNT_POINT,
                "--env-file", env_file, self.image, *argv]
        return cmd

    def run(self, step: str, argv: Sequence[str], timeout_s: float) -> Invocation:
        name = f"claw-oc-{self.run_tag}-{step}"
        inv = Invocation(step=step, container=name)
        self.invocations.append(inv)
        began = time.monotonic()
        if timeout_s <= 0:
            inv.timed_out, inv.returncode = True, 124
            return inv
        try:
            env_fd = env_pipe(self.env)
        except EnvTooLarge as exc:
            inv.engine_error, inv.returncode = str(exc), 125
            return inv
        # (Out of the mounted root: the engine writes the container's id there once it has made it. An engine whose
        # --rm removes it with the container leaves an exit 125 read as a refusal, as before.)
        made = Path(tempfile.mkdtemp(prefix="claw-oc-cid-", dir=self.root.parent)) / "cid"  # (in the scratch)
        try:
            try:
                proc = subprocess.Popen(self.command(name, argv, f"/dev/fd/{env_fd}", str(made)),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                        env=_cli_env(self.hidden_env), start_new_session=True, pass_fds=(env_fd,))
            except FileNotFoundError:
                inv.engine_error = f"container CLI '{self.settings.docker_cli}' not found"
                inv.returncode = 127
                return inv
            finally:
                os.close(env_fd)  # (the CLI holds its own copy)
            output = bounded_output.collect(proc, timeout_s, lambda: self._stop(proc, name),
                                            stdout_cap=MAX_OUTPUT_BYTES, stderr_cap=MAX_OUTPUT_BYTES)
            container_made = made.is_file() and made.stat().st_size > 0  # (docker removes it unwritten)
        finally:
            remove_tree(made.parent)
        inv.duration_s = time.monotonic() - began
        inv.timed_out, inv.output_overflow = output.timed_out, output.overflowed
        inv.stdout = output.stdout.decode("utf-8", errors="replace")
        inv.stderr = output.stderr.decode("utf-8", errors="replace")
        inv.returncode = 124 if inv.timed_out else proc.returncode
        inv.started = True
        if proc.returncode == 125 and not inv.timed_out:  # the engine refused to start the container
            inv.engine_error = _refusal(inv.stderr)
            # ... or the container's own process exited 125 (`docker run` passes its code on): a container the
            # engine made may have run and sent requests, its spend unknown, never a known 0.
            inv.started = container_made
        return inv

    def _stop(self, proc: subprocess.Popen[bytes], name: str) -> None:
        """Remove the container (that ends the CLI too), then make sure the CLI process is gone."""
        remove_container(self.settings, name)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            bounded_output.kill_group(proc)

    def cleanup(self) -> list[str]:
        """Remove any container of this run still present; return the names found."""
        leftovers = running_containers(self.settings, f"{LABEL}.run={self.run_tag}")
        for name in leftovers:
            remove_container(self.settings, name)
        return leftovers


def container_start_seconds(settings: EngineSettings, image: str, argv: Sequence[str] = ("true",)) -> float:
    """Wall time of one trivial container run with the same flags (for the benchmark)."""
    with tempfile.TemporaryDirectory(prefix="claw-oc-probe-") as tmp:
        runner = ContainerRunner(settings, image, Path(tmp), {}, f"probe{os.getpid()}")
        inv = runner.run("probe", argv, 60.0)
        if not inv.ok:
            raise RuntimeError(inv.engine_error or inv.stderr.strip() or f"exit {inv.returncode}")
        return inv.duration_s


def _refusal(stderr: str) -> str:
    """The engine's reason for not starting a container: stderr's last line that is not the CLI's help hint
    (docker: "Run 'docker run --help' for more information", older "See 'docker run --help'.")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and "--help" not in line]
    return lines[-1] if lines else "exit 125"
