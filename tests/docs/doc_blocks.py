"""Documentation tests: the command blocks of README.md and docs/ marked runnable, run verbatim.

A block is runnable when the line before its opening fence is `<!-- doctest -->` (a fresh workspace
holding the example configs) or `<!-- doctest: built -->` (the same, with the example campaign
`llm_probe_smoke × standard × default_judge` already built). Every line runs as written, in one
bash session per block (so `export`, variables and `cd` carry over, as when a reader types them),
against the simulated stand-in provider. A line promises something with `→` in its comment:

    claw build $C   # zero requests → 0 executed        (exit 0 and "0 executed" in its output)
    claw pin x      # → exit 2: has never been built     (exit 2 and that text)

A line without `→` must exit 0. `$EDITOR` is a script that makes the tour's edit (the prompt of
arithmetic_plain: 17 * 23 → 17 * 24); `$BROWSER` is `true`. A block that starts its own provider
(`claw standin`, as the README's tour does) gets no OPENROUTER_* variable from the harness; whatever it
left running is stopped with the session's process group when the block ends.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "clawstore" / "demo" / "configs"
MARKER = re.compile(r"^<!--\s*doctest(?::\s*(?P<mode>[\w-]+))?\s*-->\s*$")
FENCE = re.compile(r"^```(?:sh|bash|console)?\s*$")
PROMISE = re.compile(r"→\s*(?:exit (?P<code>\d+)(?::\s*|$))?(?P<text>.*?)\s*$")
MODES = ("fresh", "built")
EDIT_SCRIPT = "#!/bin/sh\nsed -i 's/17 \\* 23/17 * 24/' \"$1\"\n"
BUILD_FIRST = "claw build --suite llm_probe_smoke --run-profile standard --evaluation-profile default_judge"


@dataclass(frozen=True)
class Command:
    line: str  # verbatim (continuations joined with their backslashes)
    lineno: int
    exit_code: int
    expect: str  # "" when the line promises only its exit code


@dataclass(frozen=True)
class Block:
    source: Path
    lineno: int  # of the opening fence
    mode: str
    commands: tuple[Command, ...]

    @property
    def name(self) -> str:
        return f"{self.source.relative_to(REPO)}:{self.lineno}"

    def upto(self, text: str) -> Block:
        """The block cut after the first command containing `text` (a shorter run for a targeted test)."""
        last = next(i for i, c in enumerate(self.commands) if text in c.line)
        return Block(self.source, self.lineno, self.mode, self.commands[: last + 1])


@dataclass(frozen=True)
class Outcome:
    command: Command
    exit_code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == self.command.exit_code and self.command.expect in self.output

    def describe(self) -> str:
        promised = f"exit {self.command.exit_code}" + (f", {self.command.expect!r}" if self.command.expect else "")
        return f"line {self.command.lineno}: {self.command.line}\n  promised {promised}; got exit {self.exit_code}"


def _comment(line: str) -> str:
    """The trailing comment of a shell line (after the first ` #` outside quotes), or ""."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1:]
    return ""


def _command(line: str, lineno: int) -> Command:
    promise = PROMISE.search(_comment(line))
    if promise is None:
        return Command(line, lineno, 0, "")
    return Command(line, lineno, int(promise["code"] or 0), promise["text"])


def parse(source: Path, text: str | None = None) -> list[Block]:
    lines = (text if text is not None else source.read_text(encoding="utf-8")).splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i].strip())
        if not marker:
            i += 1
            continue
        mode = marker["mode"] or "fresh"
        if mode not in MODES or i + 1 >= len(lines) or not FENCE.match(lines[i + 1].strip()):
            raise ValueError(f"{source}:{i + 1}: a doctest marker must name one of {MODES} and precede a fence")
        fence_line, i = i + 2, i + 2
        commands: list[Command] = []
        pending, start = "", 0
        while i < len(lines) and not lines[i].startswith("```"):
            raw = lines[i]
            if not pending:
                start = i + 1
            pending = f"{pending}\n{raw}" if pending else raw
            if not raw.endswith("\\"):
                if pending.strip() and not pending.lstrip().startswith("#"):
                    commands.append(_command(pending, start))
                pending = ""
            i += 1
        blocks.append(Block(source, fence_line, mode, tuple(commands)))
        i += 1
    return blocks


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def all_blocks() -> list[Block]:
    return [block for doc in documents() for block in parse(doc)]


def _script(block: Block, results: Path) -> str:
    parts = ["set +e"]
    if block.mode == "built":
        parts.append(f"{BUILD_FIRST} >/dev/null 2>&1 || {{ echo 'setup build failed' >&2; exit 99; }}")
    for n, command in enumerate(block.commands):
        parts.append(f"{{ {command.line}\n}} >{results}/{n}.out 2>&1 </dev/null; echo $? >{results}/{n}.rc")
    return "\n".join(parts) + "\n"


def starts_its_provider(block: Block) -> bool:
    return any("claw standin" in command.line for command in block.commands)


def run_block(block: Block, workdir: Path, base_url: str) -> list[Outcome]:
    """Run the block in a fresh workspace under `workdir` against the provider at `base_url`."""
    workspace, results = workdir / "ws", workdir / "results"
    shutil.copytree(EXAMPLES, workspace / "configs")
    results.mkdir()
    editor = workdir / "edit-prompt"
    editor.write_text(EDIT_SCRIPT)
    editor.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAW_", "OPENROUTER_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", EDITOR=str(editor),
               BROWSER="true", HOME=str(workdir))
    if not starts_its_provider(block):
        env.update(OPENROUTER_BASE_URL=base_url, OPENROUTER_API_KEY="sk-doctest-simulated")
    # A session of its own: a provider the block started in the background is stopped with it.
    proc = subprocess.Popen(["bash", "-c", _script(block, results)], cwd=workspace, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, f"{block.name}: the block's session failed: {stderr}"
    return [Outcome(command, int((results / f"{n}.rc").read_text()), (results / f"{n}.out").read_text())
            for n, command in enumerate(block.commands)]
