"""The build tests' fixtures (stand-in server, environment, workspace, in-process claw), reused as they are."""

from __future__ import annotations

from tests.build.conftest import claw, env, standin, ws

__all__ = ["claw", "env", "standin", "ws"]
