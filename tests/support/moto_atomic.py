"""moto's S3 server with its conditional writes made atomic, as S3's are: `python moto_atomic.py HOST PORT`.

moto checks a PutObject's If-Match / If-None-Match and then stores the object, with other requests' threads running
in between: two pushers racing on one ref could both be told they won (CI saw it once). S3 answers such a race with
one winner and 412 for the others, and claw relies on that, so the conditional writes are taken one at a time here."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto import backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

CONDITIONS = ("HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH")


def atomic_conditional_writes(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "PUT" and any(name in environ for name in CONDITIONS):
            with lock:
                return list(app(environ, start_response))  # (the whole answer made under the lock)
        return app(environ, start_response)

    return serve


def main(argv: list[str]) -> None:
    host, port = argv[0], int(argv[1])
    # The dispatcher lists moto's package directory and stats each of its ~170 entries on every request to route it:
    # the same answer each time, once is enough.
    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]
    run_simple(host, port, atomic_conditional_writes(DomainDispatcherApplication(create_backend_app)), threaded=True)


if __name__ == "__main__":
    main(sys.argv[1:])
