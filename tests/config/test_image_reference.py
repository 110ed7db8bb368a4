"""A run profile's `openclaw.image` is an OCI image reference: the engine command line takes it among its options
(`docker run ... --env-file F <image> openclaw ...`), so a value starting with '-' was read as one more option
(`image: --privileged`), and the next word as the image. Before session 72 `claw validate` took any text; a space or
a line break (a reference no engine can pull) is refused as well, naming the file and the field."""

from __future__ import annotations

import pytest

from tests.support.claw import Claw
from tests.support.workspace import Workspace

BLOCK = {"agent_id": "helper", "timeout_seconds": 60}


def _profile(ws: Workspace, image: str) -> None:
    agent = ws.configs / "agents/helper"
    (agent / "workspace").mkdir(parents=True)
    (agent / "agent.yaml").write_text("schema_version: 1\nagent_id: helper\ntitle: Helper\n", encoding="utf-8")
    ws.edit("run_profiles/rp.yaml", lambda doc: doc.update({"openclaw": {**BLOCK, "image": image}}))


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "ghcr.io/openclaw/openclaw: 2026.4.15",
                                   "ghcr.io/openclaw/openclaw:2026.4.15\n--privileged"])
def test_an_image_that_is_no_reference_is_refused(ws: Workspace, claw: Claw, image: str) -> None:
    _profile(ws, image)
    line = claw.one_config_error()
    assert line.startswith("configs/run_profiles/rp.yaml: openclaw.image: expected an OCI image reference"), line


@pytest.mark.parametrize("image", ["ghcr.io/openclaw/openclaw:2026.4.15", "openclaw", "localhost:5000/team/oc:v1",
                                   "docker.io/library/node@sha256:" + "a" * 64, "  example/openclaw:1  "])
def test_image_references_validate(ws: Workspace, claw: Claw, image: str) -> None:
    _profile(ws, image)
    code, out, err = claw("validate")
    assert code == 0, out + err
