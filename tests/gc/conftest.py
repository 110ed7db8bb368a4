"""The build tests' fixtures (environment, workspace, in-process claw), reused as they are; the stand-in
server fixture comes from tests/conftest.py."""

from __future__ import annotations

from tests.support.claw import claw, env, ws

__all__ = ["claw", "env", "ws"]
