"""Whether a URL written in a config names an HTTP server: checked where configs are validated and where requests go."""

from urllib.parse import urlsplit


def is_http_url(text: str) -> bool:
    """http(s) with a host: `localhost:8000/v1` (no scheme), `ftp://…` or `http://[::1` (urlsplit's ValueError: an
    unclosed IPv6 bracket) cannot take a chat request."""
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)
