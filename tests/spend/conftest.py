"""Spend tests share the workspace fixtures of tests/support."""

from tests.support.browser import browser  # noqa: F401
from tests.support.claw import claw, env, ws  # noqa: F401
