from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from tests.support.claw import claw, env, ws  # noqa: F401  (the migrated-campaign test builds)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")
