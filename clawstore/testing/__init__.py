"""Test helpers that are real parts: the stand-in OpenAI-compatible server (`standin`)."""
