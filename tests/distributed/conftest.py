"""One real two-node Ray cluster for the whole of tests/distributed (its tests run on one xdist worker: the
"ray-cluster" group of tests/conftest.py), started once: each file's own cluster cost ~10 s to start, plus its
teardown. Its nodes' environment is what every file needs: the provider key, and for the OpenClaw cases the fake
container engine (tests/openclaw) the nodes reach and the host network (the stand-in listens on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, FakeDocker, fake_cli, payload
from tests.support.raycluster import RayCluster, need_ray, ray_cluster
from tests.support.workspace import SECRET

# An OpenClaw agent's one turn, as the fake engines play it: writes report.md and says so.
TURNS = [{"write": {"report.md": "# Report\nAll done.\n"}, "payload": payload("Wrote report.md")}]


def fake_engine(root: Path) -> FakeDocker:
    """A fake container engine under `root` (tests/openclaw/fake_docker.py) that has the image and plays TURNS."""
    fake = FakeDocker(str(fake_cli(root / "bin")), root / "state", root / "scenario.json")
    fake.script(images={FAKE_IMAGE: {"Id": FAKE_ID}}, turns=TURNS)
    return fake


@pytest.fixture(scope="package")
def nodes_docker(tmp_path_factory: pytest.TempPathFactory) -> FakeDocker:
    """The container engine of the cluster's nodes: its calls land in its own state directory."""
    return fake_engine(tmp_path_factory.mktemp("nodes-engine"))


@pytest.fixture(scope="package")
def cluster(nodes_docker: FakeDocker) -> Iterator[RayCluster]:
    need_ray()
    with ray_cluster({"OPENROUTER_API_KEY": SECRET, "CLAW_OPENCLAW_NETWORK": "host",
                      "FAKE_DOCKER_STATE": str(nodes_docker.state),
                      "FAKE_DOCKER_SCENARIO": str(nodes_docker.scenario_path)}) as running:
        yield running
