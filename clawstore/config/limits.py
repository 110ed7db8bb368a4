"""The documented bounds on config input (docs/configuration.md, "Limits"): one home for every number.

A config may come from someone else; these keep a hostile file from exhausting memory, the C stack
or the provider budget before claw has said a word about it.
"""

from __future__ import annotations

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config YAML file or a message `source:` file
MAX_SOURCE_TOTAL_BYTES = 32 * 1024 * 1024  # the source files one case's messages (or turns) name, summed
MAX_NESTING_DEPTH = 100  # mappings and lists inside each other, in one file
MAX_ALIAS_NODES = 100_000  # nodes that `*alias` references expand to, summed over one file
MAX_ALIAS_TEXT = 16 * 1024 * 1024  # characters of text (scalars) those aliases expand to, summed over one file
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # any integer written in a config must fit in 64 bits
MAX_INT_CHARS = 80  # longer integer literals are refused before Python converts them

MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024  # one attachment file
ATTACHMENT_WARN_TOKENS = 1_000_000  # warn when attachments alone send more tokens than this per build
BYTES_PER_TOKEN = 4  # the usual rough estimate for English text and code

MAX_RUN_REPETITIONS = 1000
MAX_CONCURRENCY = 1024
MAX_JUDGE_REPETITIONS = 100
MAX_SAMPLE_SIZE = 10_000
MAX_CAMPAIGN_RUNS = 1_000_000  # models x cases x repetitions of one campaign
MAX_TOKENS = 10_000_000  # runner setting `max_tokens`
MAX_TURNS = 10_000
MAX_RETRIES = 100
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
MAX_CHECK_COUNT = 1_000_000  # `tool_call_count.count`
