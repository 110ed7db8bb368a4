"""Fault tests use the shared workspace fixtures (stand-in provider, in-process claw)."""

from tests.support.claw import claw, env, ws  # noqa: F401
