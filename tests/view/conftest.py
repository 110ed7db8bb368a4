"""View tests share the stand-in workspace fixtures and the headless Chromium of tests/support."""

from tests.support.browser import browser  # noqa: F401
from tests.support.claw import env  # noqa: F401
