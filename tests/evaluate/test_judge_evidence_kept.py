"""A judge's evidence that holds no secret is returned as build_judge_evidence made it (not copied by redact_value):
the same value redact_value returns for it, with secrets anywhere in the run (its answer, messages, tool arguments
and results, a key named like a secret) or none."""

from __future__ import annotations

import pytest

from clawstore.evaluate.judge_evidence import build_judge_evidence
from clawstore.evaluate.redact import REDACTED, redact_value

from .helpers import artifact, final, msg, tool_call, tool_result

SECRET = "sk-or-v1-" + "a" * 32


@pytest.mark.parametrize("text", ["four", "the key is under the mat", SECRET, f"Bearer {'b' * 20}",
                                  "api_key=abc123def", "token counts: input_tokens 12"])
@pytest.mark.parametrize("where", ["answer", "message", "arguments", "result", "named"])
def test_the_evidence_is_what_redact_value_returns(text: str, where: str) -> None:
    args = {"password": "hunter2hunter2"} if where == "named" else {"path": text if where == "arguments" else "a.txt"}
    trace = [msg("user", "the task"), msg("assistant", text if where == "message" else "working"),
             tool_call("c1", "write_file", args), tool_result("c1", text if where == "result" else "ok"),
             final(text if where == "answer" else "done")]
    run = artifact(trace=trace)
    evidence = build_judge_evidence(run)
    assert evidence == redact_value(build_judge_evidence(run, redact_secrets=False))
    assert SECRET not in repr(evidence) and "hunter2hunter2" not in repr(evidence)
    if SECRET in text or where == "named":
        assert REDACTED in repr(evidence)
