"""The test cluster's GCS port is never one a Ray node's own parts take by default (CI once drew 52365, the
dashboard agent's, and `ray start` refused)."""

from __future__ import annotations

import pytest

from tests.support.raycluster import RAY_DEFAULT_PORTS, _free_port


def test_a_drawn_port_ray_takes_by_default_is_drawn_again() -> None:
    draws = iter([52365, 6379, 8265, 10001, 15000, 40123])
    assert _free_port(lambda: next(draws)) == 40123


def test_the_ports_avoided_are_the_installed_rays_defaults() -> None:
    constants = pytest.importorskip("ray._private.ray_constants")
    for port in (constants.DEFAULT_PORT, constants.DEFAULT_DASHBOARD_PORT,
                 constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT):
        assert port in RAY_DEFAULT_PORTS
