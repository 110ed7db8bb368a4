"""A small stand-in for the `docker` CLI, enough for the runner's unit tests.

It understands `image inspect`, `run`, `rm -f` and `ps -a --filter label=… --format {{.Names}}`.
`run` plays OpenClaw itself: `config validate` and `agent` answer as a scenario file says
($FAKE_DOCKER_SCENARIO, JSON). The "container" is this very process; it registers itself under
$FAKE_DOCKER_STATE/containers/<name>.json (pid + labels) while it runs, so `rm -f` can kill it and
`ps` can list it (`rm` records the DOCKER_HOST it was given). Every invocation is appended to
$FAKE_DOCKER_STATE/calls.jsonl (argv, whether the CLI's own environment held secrets, the env-file's mode, whether
it is a pipe, and its content keys; a `run`'s open descriptors; a `ps`'s label filter).

Scenario: {"images": {"<ref>": {"Id": "sha256:…", "RepoDigests": [...]}},
           "validate": {"rc": 0, "stdout": "...", "stderr": "...", "sleep": 0},
           "turns": [{"write": {"rel/path": "text"}, "sparse": {"rel/path": bytes}, "flood": "stdout",
                      "payload": {...} | null, "stdout": "...",
                      "stderr": "...", "payload_on_stderr": false, "rc": 0, "sleep": 0, "until": "path",
                      "echo_env": false, "write_env_to": "file-in-workspace",
                      "link": {"path under the mount, e.g. workspace": "target"}, "file": {"workspace": "text"},
                      "remove": ["path under the mount, e.g. workspace"], "ask_provider": seconds,
                      "asks": n, "sql": {"path under the mount": ["statement", ...]},
                      "engine_refuses": false}],
           "run_rc": null, "run_stderr": "..."}   (run_rc 125 = the engine refuses to start)
A container made writes `--cidfile` (as the engine does once it has made one); "engine_refuses" refuses that turn's
(exit 125, no cidfile), where "rc": 125 is a container that ran and exited 125 itself.
"ask_provider": an agent looping on its model until it is stopped: a chat request to the provider openclaw.json names
every that many seconds, each written to OpenClaw's session transcript as 2026.9.6 keeps it (a row of the agent's
SQLite database, state/agents/<agent>/agent/openclaw-agent.sqlite): an assistant message with its `usage` as OpenClaw
writes it, or one with `stopReason: "error"` when no answer came (an HTTP refusal's `errorMessage` worded as pi-ai
keeps the OpenAI SDK's: "<status> <the provider's message>"). With "asks", it stops after that many requests and
the turn goes on as the rest of its spec says (a crash: "rc" with no "payload"; a "flood").
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import stat
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker"))


def scenario() -> dict:
    path = os.environ.get("FAKE_DOCKER_SCENARIO")
    return json.loads(Path(path).read_text()) if path else {}


def record(entry: dict) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def containers() -> Path:
    path = STATE / "containers"
    path.mkdir(parents=True, exist_ok=True)
    return path


def image_inspect(args: list[str]) -> int:
    images = scenario().get("images", {})
    fmt = None
    if args and args[0] == "--format":
        fmt, args = args[1], args[2:]
    ref = args[-1]
    if ref not in images:
        print(f"Error: No such image: {ref}", file=sys.stderr)
        return 1
    info = {"Id": images[ref].get("Id"), "RepoDigests": images[ref].get("RepoDigests", [])}
    print(info["Id"] if fmt else json.dumps([info]))
    return 0


def parse_run(args: list[str]) -> tuple[dict, list[str]]:
    flags: dict = {"labels": []}
    takes_value = {"--name", "--label", "--pull", "--network", "--user", "-v", "-w", "--env-file", "--memory",
                   "--pids-limit", "--cpus", "--cidfile"}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--rm", "--init"):
            i += 1
        elif arg in takes_value:
            if arg == "--label":
                flags["labels"].append(args[i + 1])
            else:
                flags[arg.lstrip("-")] = args[i + 1]
            i += 2
        else:
            break
    return flags, args[i:]


def env_file_info(path: str) -> dict:
    info = os.stat(path)
    lines = Path(path).read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    return {"mode": oct(stat.S_IMODE(info.st_mode)), "pipe": stat.S_ISFIFO(info.st_mode), "names": sorted(env),
            "env": env}


def open_files() -> list[str]:
    """What this process's descriptors are (`pipe:[inode]`, a path): what the `docker run` inherited."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # (the listing's own descriptor, closed)
            continue
    return found


def next_turn() -> int:
    """A counter shared by concurrent "containers" (a build runs several at once): locked, so no
    reader ever sees it half-written."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "turn_counter", "a+", encoding="utf-8") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        text = counter.read().strip()
        index = int(text) if text else 0
        counter.seek(0)
        counter.truncate()
        counter.write(str(index + 1))
        return index


def ask_provider_until_stopped(interval: float, root: Path, argv: list[str], env: dict,
                               asks: int | None = None) -> None:
    import urllib.error  # (here: ~30 ms of imports that every other call of the fake would pay)
    import urllib.request

    config = json.loads((root / "openclaw.json").read_text())
    provider = next(iter(config["models"]["providers"].values()))
    key = env.get(provider["apiKey"][2:-1], "") if provider["apiKey"].startswith("${") else provider["apiKey"]
    agent, session = argv[argv.index("--agent") + 1], argv[argv.index("--session-id") + 1]
    transcript = Transcript(root / "state" / "agents" / agent / "agent" / "openclaw-agent.sqlite", session)
    body = json.dumps({"model": provider["models"][0]["id"],
                       "messages": [{"role": "user", "content": argv[argv.index("--message") + 1]}]}).encode()
    asked = 0
    while asks is None or asked < asks:
        asked += 1
        request = urllib.request.Request(provider["baseUrl"] + "/chat/completions", data=body, headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                reply = json.loads(response.read())
            text = reply["choices"][0]["message"].get("content") or ""
            message = {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "toolUse",
                       "usage": transcript_usage(reply.get("usage") or {}, provider["models"][0].get("cost") or {})}
        except urllib.error.HTTPError as exc:  # worded as pi-ai keeps the OpenAI SDK's error: "<status> <message>"
            message = {"role": "assistant", "content": [], "stopReason": "error",
                       "errorMessage": f"{exc.code} {provider_words(exc.read())}"}
        except (urllib.error.URLError, OSError, ValueError) as exc:
            message = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": str(exc)}
        transcript.add({"type": "message", "message": message})
        time.sleep(interval)


def provider_words(body: bytes) -> str:
    """A refusal's `error.message`, as the OpenAI SDK reads it, else the status's words."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else "status code (no body)"


def transcript_usage(usage: dict, prices: dict) -> dict:
    """An answered request's usage as OpenClaw writes it into the transcript (pi-ai's shape): its tokens, and their
    cost at the model's configured prices (never the provider's `usage.cost`)."""
    tokens = {"input": usage.get("prompt_tokens", 0), "output": usage.get("completion_tokens", 0),
              "cacheRead": 0, "cacheWrite": 0}
    cost = {name: count * prices.get(name, 0) / 1e6 for name, count in tokens.items()}
    return {**tokens, "totalTokens": sum(tokens.values()), "cost": {**cost, "total": sum(cost.values())}}


class Transcript:
    """OpenClaw 2026.9.6's session transcript: rows of the agent's SQLite database, in WAL mode (a container removed
    at the deadline leaves its last rows in the -wal file), every other one compressed (`event_zstd`)."""

    def __init__(self, path: Path, session: str):
        import sqlite3

        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT "
                        "NULL, event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB, "
                        "PRIMARY KEY (session_id, seq), CHECK (event_json IS NULL OR json_valid(event_json))) STRICT")
        self.session = session
        self.seq = self.db.execute("SELECT count(*) FROM transcript_events").fetchone()[0]
        self.add({"type": "session", "version": 4, "id": session})

    def add(self, entry: dict) -> None:
        if "zstandard" not in sys.modules:  # (run without `site`, -S: site-packages is added for this one import)
            import site

            site.main()
        import zstandard

        text = json.dumps(entry)
        packed = zstandard.ZstdCompressor().compress(text.encode()) if self.seq % 2 else None
        self.db.execute("INSERT INTO transcript_events VALUES (?, ?, ?, ?, ?)",
                        (self.session, self.seq, None if packed else text, int(time.time() * 1000), packed))
        self.seq += 1


def play(spec: dict, workspace: Path, env: dict, argv: list[str] | None = None) -> int:
    for rel, size in (spec.get("sparse") or {}).items():  # a file this big that costs no disk
        with open(workspace / rel, "wb") as out:
            out.truncate(int(size))
    if spec.get("sleep"):
        time.sleep(float(spec["sleep"]))
    if spec.get("until"):  # at work until the test says (the file exists), not for a fixed time; at most 300 s
        deadline = time.monotonic() + 300
        while not os.path.exists(spec["until"]) and time.monotonic() < deadline:
            time.sleep(0.05)
    for rel, text in (spec.get("write") or {}).items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for rel in spec.get("remove") or []:  # an agent that deletes what is there (its whole workspace, say)
        shutil.rmtree(workspace.parent / rel, ignore_errors=True)
    for rel, statements in (spec.get("sql") or {}).items():  # a database the agent writes as it likes
        import sqlite3

        (workspace.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(workspace.parent / rel) as db:
            for statement in statements:
                db.execute(statement)
    # A hostile agent: whatever was at a path under the mount becomes a link ("link") or a file ("file").
    for kind in ("link", "file"):
        for rel, value in (spec.get(kind) or {}).items():
            place = workspace.parent / rel
            place.parent.mkdir(parents=True, exist_ok=True)
            if place.is_dir() and not place.is_symlink():
                shutil.rmtree(place)
            elif place.exists() or place.is_symlink():
                place.unlink()
            if kind == "link":
                place.symlink_to(value)
            else:
                place.write_text(value)
    if spec.get("ask_provider") is not None:
        ask_provider_until_stopped(float(spec["ask_provider"]), workspace.parent, argv or [], env, spec.get("asks"))
    if spec.get("flood"):  # print to this stream until killed
        stream = getattr(sys, spec["flood"]).buffer
        chunk = b"x" * 65536
        while True:
            stream.write(chunk)
    if spec.get("write_env_to"):
        (workspace / spec["write_env_to"]).write_text(json.dumps(env))
    out = spec.get("stdout", "")
    if spec.get("payload") is not None:
        out += json.dumps(spec["payload"])
    if spec.get("echo_env"):
        out += "\nENV " + json.dumps(env)
    if spec.get("payload_on_stderr"):
        sys.stderr.write(out)
    else:
        sys.stdout.write(out)
    sys.stderr.write(spec.get("stderr", ""))
    return int(spec.get("rc", 0))


def run(args: list[str]) -> int:
    flags, command = parse_run(args)
    image, argv = command[0], command[1:]
    scen = scenario()
    env_info = env_file_info(flags["env-file"])
    host_dir = flags["v"].rsplit(":", 2)[0]
    record({"cmd": "run", "argv": sys.argv, "flags": {k: v for k, v in flags.items()}, "image": image,
            "container_argv": argv, "env_file_path": flags["env-file"], "env_file_mode": env_info["mode"],
            "env_file_is_pipe": env_info["pipe"],
            "env_names": env_info["names"], "fds": open_files(), "cli_env_has_key": any(
                v in os.environ.values() for v in env_info["env"].values() if "secret" in v)})
    if scen.get("run_rc") is not None:
        sys.stderr.write(scen.get("run_stderr", "docker: Error response from daemon."))
        return int(scen["run_rc"])
    if image not in scen.get("images", {}):
        sys.stderr.write(f"docker: Error response from daemon: No such image: {image}.\n")
        return 125
    turn = None
    if argv[:2] == ["openclaw", "agent"]:
        turns = scen.get("turns") or [{}]
        index = next_turn()
        turn = (index, turns[min(index, len(turns) - 1)])
        if turn[1].get("engine_refuses"):  # the engine refuses this turn's container: never made, no --cidfile
            sys.stderr.write("docker: Error response from daemon: OCI runtime create failed\n")
            return 125
    if flags.get("cidfile"):  # the engine writes it once it has made the container (docker, podman)
        Path(flags["cidfile"]).write_text("fake" + flags["name"])
    name = flags["name"]
    marker = containers() / f"{name}.json"
    partial = marker.with_suffix(".partial")  # written whole, then named: a reader never sees half of it
    partial.write_text(json.dumps({"pid": os.getpid(), "labels": flags["labels"]}))
    os.replace(partial, marker)
    try:
        workspace = Path(host_dir) / "workspace"
        if argv[:3] == ["openclaw", "config", "validate"]:
            return play(scen.get("validate", {"stdout": '{"valid":true}'}), workspace, env_info["env"])
        if turn is not None:
            index, spec = turn
            record({"cmd": "agent", "turn": index, "argv": argv,
                    "workspace_files": sorted(p.relative_to(workspace).as_posix()
                                              for p in workspace.rglob("*") if p.is_file())})
            return play(spec, workspace, env_info["env"], argv)
        return 0
    finally:
        marker.unlink(missing_ok=True)


def rm(args: list[str]) -> int:
    name = args[-1]
    marker = containers() / f"{name}.json"
    if not marker.exists():
        print(f"Error: No such container: {name}", file=sys.stderr)
        return 1
    pid = json.loads(marker.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    marker.unlink(missing_ok=True)
    record({"cmd": "rm", "name": name, "pid": pid, "docker_host": os.environ.get("DOCKER_HOST")})
    return 0


def ps(args: list[str]) -> int:
    wanted = args[args.index("--filter") + 1].split("=", 1)[1] if "--filter" in args else None
    record({"cmd": "ps", "filter": wanted})
    for marker in sorted(containers().glob("*.json")):
        labels = json.loads(marker.read_text())["labels"]
        names = {label.split("=", 1)[0] for label in labels} | set(labels)
        if wanted is None or wanted in names:
            print(marker.stem)
    return 0


def main(argv: list[str]) -> int:
    if argv[:2] == ["image", "inspect"]:
        return image_inspect(argv[2:])
    if argv[:1] == ["run"]:
        return run(argv[1:])
    if argv[:1] == ["rm"]:
        return rm(argv[1:])
    if argv[:1] == ["ps"]:
        return ps(argv[1:])
    print(f"fake docker: unsupported command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
