"""The simulated provider of `claw demo` and of the documentation tests: stand-in replies that make
the shipped example campaign build cleanly (answers for its cases, well-formed judge verdicts).

Every reply says it is simulated, so no transcript can pass for a real model's output.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol

from clawstore.config.ids import DIMENSIONS
from clawstore.testing import standin
from clawstore.testing.standin import text

MARK = "(simulated)"
# Every judge prompt starts with this heading (clawstore/evaluate/judge_prompt.py).
JUDGE_PROMPT_MARK = "# EVALUATION TARGET"


class Scriptable(Protocol):
    def script(self, model: str = "*", *replies: dict[str, Any], match: str | None = None) -> None: ...

    def set_default(self, reply: dict[str, Any]) -> None: ...


def judge_verdict(score: float, summary: str) -> dict[str, Any]:
    body = {"summary": f"{MARK} {summary}",
            "dimensions": {d: {"evidence": [f"{MARK} judged by the stand-in"], "score": score} for d in DIMENSIONS},
            "overall": {"evidence": [f"{MARK} judged by the stand-in"], "score": score}}
    return text(json.dumps(body))


# (substring of the prompt, reply) for the example cases; the first match wins.
ANSWERS: tuple[tuple[str, str], ...] = (
    ("17 * 23", "391"),
    ("17 * 24", "408"),
    ("90 km/h", "90 km/h × 1000 m / 3600 s = 25 m/s"),
    ("outage", "db-2 ran out of disk; service recovered after the log rotation at 04:12."),
)


def script_simulated_provider(server: Scriptable) -> None:
    """Judge prompts get a verdict (8/10); the example cases get plausible answers; anything else a stub."""
    server.script("*", judge_verdict(8, "a plausible, correct answer"), match=JUDGE_PROMPT_MARK)
    for prompt, answer in ANSWERS:
        server.script("*", text(f"{answer} {MARK}"), match=prompt)
    server.set_default(text(f"{MARK} stand-in answer"))


def main(argv: list[str] | None = None) -> int:
    """`python3 -m clawstore.testing.simulated [--port N]`: the stand-in answering as in `claw demo`."""
    return standin.main(argv, prepare=script_simulated_provider, prog="python3 -m clawstore.testing.simulated")


if __name__ == "__main__":
    sys.exit(main())
