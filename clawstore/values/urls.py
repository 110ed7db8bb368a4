"""Whether a URL written in a config names an HTTP server, and whether it carries a credential: checked where configs
are validated and where requests go, and a URL masked where claw shows one."""

import re
from urllib.parse import unquote_plus, urlsplit

# Keys that would put a credential into a config (and from there into the store): a config's extra keys, and a URL's
# query parameters (beside the names URLs sign or authorise with: QUERY_SECRET_KEYS).
SECRET_KEYS = frozenset({"api_key", "apikey", "api-key", "authorization", "token", "secret", "password"})
QUERY_SECRET_KEYS = SECRET_KEYS | {"key", "sig", "signature", "access_token", "auth", "pass", "pwd", "passwd"}
# A query parameter named so is a credential too (`subscription-key`, `X-Amz-Signature`, `X-Amz-Security-Token`).
_SECRET_ENDINGS = ("_key", "apikey", "token", "secret", "password", "signature", "credential", "credentials")
_MASK = "***"
# A config key naming a credential, as is_credential_key reads names (lowercase, `_` as `-`, an `x-` prefix dropped):
# SECRET_KEYS, and the headers providers take a key or token in (Anthropic's `x-api-key`, `X-Auth-Token`,
# `Proxy-Authorization`, Azure APIM's `Ocp-Apim-Subscription-Key`, Google's `x-goog-api-key`).
_CREDENTIAL_KEYS = frozenset({key.replace("_", "-") for key in SECRET_KEYS} | {
    "auth-token", "access-token", "api-token", "proxy-authorization", "subscription-key"})
_CREDENTIAL_KEY_ENDINGS = ("-api-key", "-apikey", "-subscription-key")


def is_credential_key(name: str) -> bool:
    """`name`, a key of a config's free part (a model's extras, a judge's request options and their `extra_headers`),
    names a credential. Not a name that only holds `key` or `token` (`prompt_cache_key`, `eos_token`, `max_tokens`)."""
    folded = name.strip().lower().replace("_", "-")
    folded = folded[2:] if folded.startswith("x-") else folded
    return folded in _CREDENTIAL_KEYS or folded.endswith(_CREDENTIAL_KEY_ENDINGS)


# What an environment variable's name is (as a shell writes one): `api_key_env: sk-or-v1-…`, the key pasted where its
# variable's name goes, is no name, and a message naming the variable would print the key.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_env_name(text: str) -> bool:
    """`text` (stripped) names an environment variable; empty is no name (a caller that takes it for "no key" asks
    first)."""
    return ENV_NAME.fullmatch(text.strip()) is not None


def named_variable(name: str) -> str:
    """`environment variable NAME` as a message names an API key's variable; a name that looks like a key pasted in its
    place (20 characters or more, letters and digits mixed, lowercase among them, no `_`: Azure's 32 hex characters, a
    Google `AIza…` key; names are words joined by `_`, OPENROUTER_API_KEY) is not shown."""
    if len(name) >= 20 and "_" not in name and any(c.isdigit() for c in name) and any(c.islower() for c in name):
        return (f"the environment variable api_key_env names ({len(name)} characters, not shown: it looks like a key "
                "pasted in place of the variable's name)")
    return f"environment variable {name}"


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


CHAT_PATH = "/chat/completions"  # what a client appends to a base URL (providers/endpoint.py `chat_url`)


def chat_url_problem(url: str) -> str | None:
    """Why `url` is no base URL when it names the chat endpoint itself (its path ends in /chat/completions, the URL a
    server's docs print): claw appends that path, so every request went to …/chat/completions/chat/completions (an
    HTTP 404, its cost unknown). None otherwise."""
    stripped = url.strip().rstrip("/")
    if not stripped.endswith(CHAT_PATH):
        return None
    return f"give the part before {CHAT_PATH} (claw adds it): {shown_url(stripped[: -len(CHAT_PATH)])}"


def _is_secret_name(name: str) -> bool:
    name = name.strip().lower().replace("-", "_")
    return name in QUERY_SECRET_KEYS or name.replace("_", "-") in QUERY_SECRET_KEYS or name.endswith(_SECRET_ENDINGS)


# Split by hand, not by urlsplit: a malformed URL (`http://u:p@[::1/v1`) raises there, and must still be checked. The
# scheme's slashes may be backslashes, or missing (`https:\\u:p@host`, `https:/u:p@host`: not http URLs, but echoed in
# the refusal's message were their userinfo not seen).
_PARTS = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*:[/\\]*)?(?P<authority>[^/?#]*)(?P<path>[^?#]*)"
                    r"(?P<query>\?[^#]*)?(?P<frag>#.*)?$", re.DOTALL)
# Parameters are split at `;` too (some servers take it for `&`); a name is read as the server reads it (`API%5FKEY`).
_SEPARATOR = re.compile(r"([&;])")
# What urlsplit (and so is_http_url, and a client) drops from a URL before reading it: `ht\ttps://u:p@host` is
# https with a password there.
_DROPPED = str.maketrans("", "", "\t\r\n")


def _params(part: str | None) -> list[str]:
    return [unquote_plus(piece.partition("=")[0]) for piece in _SEPARATOR.split(part[1:])[::2]] if part else []


def credential_in_url(text: str) -> str | None:
    """What in `text` is a credential, said without it ("a user:password part", "the query parameter 'key'"), or
    None. Any userinfo counts (`https://TOKEN@host` is a token); a query or fragment parameter by its name."""
    return _credential(_PARTS.match(text.translate(_DROPPED).strip()))


def _credential(match: re.Match[str] | None) -> str | None:
    if match is None:
        return None
    if match["head"] and "@" in match["authority"]:
        return "a user:password part"
    for name in _params(match["query"]) + _params(match["frag"]):
        if _is_secret_name(name):
            return f"the query parameter {name!r}"
    return None


def secrets_in_url(text: str) -> list[str]:
    """The credentials `text` carries when it is a URL (a proxy's or a database's, passed in an environment): its
    userinfo's password (or token alone before the `@`), the userinfo whole, and the value of each query or fragment
    parameter named as a credential, each as written and percent-decoded. Empty for any other text (and for a URL
    without `//`: `mailto:alice@example.org` names a mailbox, no password)."""
    if "//" not in text:
        return []
    match = _PARTS.match(text.translate(_DROPPED).strip())
    if match is None or _credential(match) is None:
        return []
    found: list[str] = []
    if match["head"] and "@" in match["authority"]:
        userinfo = match["authority"].rpartition("@")[0]
        user, colon, password = userinfo.partition(":")
        found += [userinfo, password if colon else user]
    for part in (match["query"], match["frag"]):
        for piece in _SEPARATOR.split(part[1:])[::2] if part else []:
            name, eq, value = piece.partition("=")
            if eq and _is_secret_name(unquote_plus(name)):
                found.append(value)
    return list(dict.fromkeys(form for value in found if value for form in (value, unquote_plus(value))))


def shown_url(text: str) -> str:
    """`text` as claw shows it: a userinfo, and the value of a query parameter named as a credential, masked (a URL
    stored before session 62 may hold one; nothing shows it)."""
    if "@" not in text and "?" not in text and "#" not in text:  # (the common case, without a parse: a query row each)
        return text
    match = _PARTS.match(text.translate(_DROPPED))
    if match is None or _credential(match) is None:  # (on the parse the mask uses, not a second one)
        return text
    authority = match["authority"]
    if match["head"] and "@" in authority:
        authority = f"{_MASK}@{authority.rpartition('@')[2]}"
    return (match["head"] or "") + authority + match["path"] + _masked(match["query"]) + _masked(match["frag"])


# A URL inside free text (an error message naming the URL it called): found by its `://` (a str.find: a regex trying
# each letter for a scheme made the view's page ten times slower to write), from its scheme up to a space or a quote.
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_REST = re.compile(r"[^\s'\"<>]*")


def shown_text(text: str) -> str:
    """`text` with every URL in it shown as shown_url shows it (a failed request's error names the URL it called: a
    record made before session 62 may hold a password there)."""
    at = text.find("://")
    if at < 0:
        return text
    pieces, done = [], 0
    while at >= 0:
        start = at
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < at and not text[start].isalpha():  # (a scheme begins with a letter: `4001http://`)
            start += 1
        end = _URL_REST.match(text, at).end()  # (always matches: `://` itself)
        if start < at:
            pieces += [text[done:start], shown_url(text[start:end])]
            done = end
        at = text.find("://", max(end, at + 3))
    pieces.append(text[done:])
    return "".join(pieces)


def _masked(part: str | None) -> str:
    if not part:
        return ""
    pieces = _SEPARATOR.split(part[1:])
    for at in range(0, len(pieces), 2):
        name, eq, _ = pieces[at].partition("=")
        if eq and _is_secret_name(unquote_plus(name)):
            pieces[at] = f"{name}={_MASK}"
    return part[0] + "".join(pieces)
