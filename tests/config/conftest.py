"""Config tests that build share the workspace fixtures of tests/support."""

from tests.support.claw import claw, env, ws  # noqa: F401
