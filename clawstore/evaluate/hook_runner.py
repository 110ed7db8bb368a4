"""Child-process side of a python hook. Runs as `python -c <this file's source>`.

Stdlib only and self-contained, so the child never imports clawstore. Reads one JSON request on
stdin: {mode: path|import, target, callable_name, module_name, artifact, context}. Writes one JSON
reply on the original stdout: {ok: true, value: <hook return value>} or {ok: false, error: "..."}.
Anything the hook prints goes to stderr, so it cannot corrupt the reply.
"""

import importlib
import importlib.util
import inspect
import json
import os
import resource
import sys


def _load(request):
    if request["mode"] == "path":
        spec = importlib.util.spec_from_file_location(request["module_name"], request["target"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load a Python module from {request['target']}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[request["module_name"]] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(request["target"])


def _positional_count(func):
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 1
    count = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return 2
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def _call(request):
    module = _load(request)
    name = request["callable_name"]
    func = getattr(module, name, None)
    if func is None or not callable(func):
        raise AttributeError(f"module has no callable '{name}'")
    n = _positional_count(func)
    if n == 0:
        return func()
    if n == 1:
        return func(request["artifact"])
    return func(request["artifact"], request["context"])


def _limit(request):
    """Hard limits on this process before any hook code runs; unprivileged, the hook cannot raise them."""
    limits = request.get("limits") or {}
    for name, key in (("RLIMIT_CPU", "cpu_seconds"), ("RLIMIT_AS", "memory_bytes"),
                      ("RLIMIT_FSIZE", "file_bytes"), ("RLIMIT_NOFILE", "open_files")):
        value = limits.get(key)
        if isinstance(value, int) and value > 0:
            resource.setrlimit(getattr(resource, name), (value, value))


def main():
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # the hook's own prints (and its subprocesses') go to stderr
    sys.stdout = sys.stderr
    request = json.load(sys.stdin)
    _limit(request)
    try:
        value = _call(request)
        reply = json.dumps({"ok": True, "value": value})
    except BaseException as exc:  # every hook failure, even SystemExit, becomes an error outcome
        reply = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    with os.fdopen(reply_fd, "w", encoding="utf-8") as out:
        out.write(reply)


if __name__ == "__main__":
    main()
