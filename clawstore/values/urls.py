"""Whether a URL written in a config names an HTTP server, and whether it carries a credential: checked where configs
are validated and where requests go, and a URL masked where claw shows one."""

import re
from urllib.parse import parse_qsl, urlsplit

# Keys that would put a credential into a config (and from there into the store): a config's extra keys, and a URL's
# query parameters (beside the names URLs sign or authorise with: QUERY_SECRET_KEYS).
SECRET_KEYS = frozenset({"api_key", "apikey", "api-key", "authorization", "token", "secret", "password"})
QUERY_SECRET_KEYS = SECRET_KEYS | {"key", "sig", "signature", "access_token", "auth", "pass", "pwd"}
# A query parameter named so is a credential too (`subscription-key`, `X-Amz-Signature`, `X-Amz-Security-Token`).
_SECRET_ENDINGS = ("_key", "apikey", "token", "secret", "password", "signature", "credential")
_MASK = "***"


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


def _is_secret_name(name: str) -> bool:
    name = name.strip().lower().replace("-", "_")
    return name in QUERY_SECRET_KEYS or name.replace("_", "-") in QUERY_SECRET_KEYS or name.endswith(_SECRET_ENDINGS)


# Split by hand, not by urlsplit: a malformed URL (`http://u:p@[::1/v1`) raises there, and must still be checked.
_PARTS = re.compile(r"^(?P<head>[^:/?#]+://)?(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<query>\?[^#]*)?(?P<frag>#.*)?$",
                    re.DOTALL)


def _params(part: str | None) -> list[tuple[str, str]]:
    return parse_qsl(part[1:], keep_blank_values=True) if part else []


def credential_in_url(text: str) -> str | None:
    """What in `text` is a credential, said without it ("a user:password part", "the query parameter 'key'"), or
    None. Any userinfo counts (`https://TOKEN@host` is a token); a query or fragment parameter by its name."""
    match = _PARTS.match(text.strip())
    if match is None:
        return None
    if match["head"] and "@" in match["authority"]:
        return "a user:password part"
    for name, _ in _params(match["query"]) + _params(match["frag"]):
        if _is_secret_name(name):
            return f"the query parameter {name!r}"
    return None


def shown_url(text: str) -> str:
    """`text` as claw shows it: a userinfo, and the value of a query parameter named as a credential, masked (a URL
    stored before session 62 may hold one; nothing shows it)."""
    if "@" not in text and "?" not in text and "#" not in text:  # (the common case, without a parse: a query row each)
        return text
    match = _PARTS.match(text)
    if match is None or credential_in_url(text) is None:
        return text
    authority = match["authority"]
    if match["head"] and "@" in authority:
        authority = f"{_MASK}@{authority.rpartition('@')[2]}"
    return (match["head"] or "") + authority + match["path"] + _masked(match["query"]) + _masked(match["frag"])


def _masked(part: str | None) -> str:
    if not part:
        return ""
    pieces = []
    for piece in part[1:].split("&"):
        name, eq, _ = piece.partition("=")
        pieces.append(f"{name}={_MASK}" if eq and _is_secret_name(name) else piece)
    return part[0] + "&".join(pieces)
