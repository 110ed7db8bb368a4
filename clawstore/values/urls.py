"""Whether a URL written in a config names an HTTP server: checked where configs are validated and where requests go."""

from urllib.parse import urlsplit


def is_http_url(text: str) -> bool:
    """http(s) with a host: `localhost:8000/v1` (no scheme) or `ftp://…` cannot take a chat request."""
    parts = urlsplit(text.strip())
    return parts.scheme in ("http", "https") and bool(parts.netloc)
