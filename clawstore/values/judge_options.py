"""What a judge's request carries beside its model and messages (read where configs are validated and where the
judge's request is made)."""

from collections.abc import Mapping
from typing import Any

# Request keys the judge's own fields set (its model, the prompt it is sent): no request option may replace them.
RESERVED_REQUEST_KEYS = ("model", "messages")
# A judge's fields clawstore reads itself (its id and model, prices, batch, endpoint, transport); the config reference:
# "any extra judge fields are passed through as request_options", so every other field goes into the request.
JUDGE_OWN_FIELDS = frozenset({"judge_id", "type", "model", "request_options", "judge_model", "model_id", "pricing",
                              "cost", "batch", "base_url", "api_key_env", "timeout_seconds", "retries", "attempts"})


def judge_request_options(judge: Mapping[str, Any]) -> dict[str, Any]:
    """What a judge's request carries beside the model and messages: its extra fields, then `request_options`."""
    passed = {key: value for key, value in judge.items() if key not in JUDGE_OWN_FIELDS}
    return {**passed, **dict(judge.get("request_options") or {})}
