"""Statistics tests use the headless Chromium of tests/support for the view's intervals."""

from tests.support.browser import browser  # noqa: F401
