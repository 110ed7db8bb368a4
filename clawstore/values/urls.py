"""Whether a URL written in a config names an HTTP server: checked where configs are validated and where requests go."""

from urllib.parse import urlsplit


def is_http_url(text: str) -> bool:
    """http(s) with a host and, if any, a port 0-65535: `localhost:8000/v1` (no scheme), `ftp://…`, `http://:8000/v1`
    (no host), `http://[::1` (an unclosed IPv6 bracket) or `http://host:99999/v1` cannot take a chat request (a port
    so written failed every run, its cost unknown, though nothing was sent)."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 (a port that is no number 0-65535 is a ValueError here, as the bracket is above)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
