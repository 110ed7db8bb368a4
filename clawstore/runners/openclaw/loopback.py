"""Whether the agent's container can reach its model endpoint at all: a server on this machine's loopback is out of
reach from a container with a network of its own (the engine's default bridge, a named network), where 127.0.0.1 is
the container itself. Each turn failed only after OpenClaw's retries (106 s a turn), its cost unknown; said at once."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

from clawstore.values.urls import shown_url

ENDPOINT_UNREACHABLE = "openclaw_endpoint_unreachable"
# Network modes that share another namespace's loopback (this machine's, or another container's / namespace's):
# any other (unset, bridge, default, none, slirp4netns, pasta, a named network) gives the container its own.
_SHARED = ("container:", "ns:")


def loopback_host(base_url: str) -> str | None:
    """The URL's host when it is a loopback address (127.0.0.0/8, ::1, `localhost`, `*.localhost`) or the unspecified
    one (0.0.0.0, ::, which clients send to loopback), else None."""
    try:
        host = urlsplit(base_url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    name = host.rstrip(".").lower()  # (`localhost.` is localhost, fully qualified)
    if name == "localhost" or name.endswith(".localhost"):
        return host
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])  # (an IPv6 zone, fe80::1%eth0, is no part of it)
    except ValueError:
        if ":" in name:
            return None
        try:  # the forms a resolver takes as IPv4 too: 127.1, 2130706433, 0x7f.1
            address = ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return host if address.is_loopback or address.is_unspecified else None


def network_setting(environ: Mapping[str, str] | None = None) -> str | None:
    """CLAW_OPENCLAW_NETWORK, the containers' `--network` mode (None: the engine's default)."""
    return (os.environ if environ is None else environ).get("CLAW_OPENCLAW_NETWORK") or None


def private_loopback(network: str | None) -> bool:
    """The network mode gives the container a loopback of its own (everything but `host`, `container:…`, `ns:…`)."""
    mode = (network or "").strip()
    return mode != "host" and not mode.startswith(_SHARED)


def endpoint_problem(base_url: str, network: str | None) -> str | None:
    """Why a container on `network` (CLAW_OPENCLAW_NETWORK; None: the engine's default) cannot reach `base_url`, or
    None when it may."""
    host = loopback_host(base_url)
    if host is None or not private_loopback(network):
        return None
    mode = f"network '{network}'" if network else "the engine's default network (bridge)"
    return (f"the agent's model endpoint {shown_url(base_url)} is on this machine's loopback ({host}), which a "
            f"container on {mode} cannot reach (its loopback is the container's own); set CLAW_OPENCLAW_NETWORK=host, "
            "or give the endpoint an address of this machine that is not loopback")
