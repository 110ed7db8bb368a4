"""clawstore: a benchmark harness for LLMs and OpenClaw agents built on a content-addressed store."""

__version__ = "0.1.0"
