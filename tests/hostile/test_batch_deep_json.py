"""JSON nested a hundred thousand levels deep from a provider's Batch API (tests/hostile/test_deep_json.py for the
rest): an error's body, a control reply, an output file's line. Python's parser gives up on it with RecursionError,
which no `except ValueError` catches: a build submitting or collecting a batch ended in a traceback. Found by the
session 76 review in the 402 refusal's message (`_said`, read from every error body since s76-402); the control reply
and the output line had the same hole before. Each is now malformed JSON like any other (values/jsontext.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clawstore.providers.batch_api import BatchApi, read_lines
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.errors import ProviderError

DEEP = b"[" * 100_000


class _Deep(BaseHTTPRequestHandler):
    """Answers every request with DEEP: status 400 for `/v1/files`, 200 for the rest."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(400 if self.path.endswith("/files") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(DEEP)))
        self.end_headers()
        self.wfile.write(DEEP)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:  # (quiet)
        pass


@pytest.fixture
def deep_api() -> Iterator[BatchApi]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Deep)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with BatchApi(Endpoint(f"http://127.0.0.1:{server.server_address[1]}/v1", api_key_env=None),
                      backoff_s=0.0) as api:
            yield api
    finally:
        server.shutdown()
        server.server_close()


def test_a_deep_error_body_is_a_provider_error_not_a_crash(deep_api: BatchApi) -> None:
    with pytest.raises(ProviderError) as raised:
        deep_api.upload(b'{"custom_id": "a"}\n')
    assert raised.value.status_code == 400 and "HTTP 400" in raised.value.message


def test_a_deep_control_reply_is_an_invalid_response_not_a_crash(deep_api: BatchApi) -> None:
    with pytest.raises(ProviderError) as raised:
        deep_api.get("batch_1")
    assert raised.value.code == "invalid_response"


def test_a_deep_output_line_is_skipped_not_a_crash() -> None:
    good = b'{"custom_id": "b", "response": {"status_code": 200, "body": {"choices": []}}}'
    answers = read_lines(b'{"custom_id": "a", "response": ' + DEEP + b"\n" + good, "http://127.0.0.1/v1", None)
    assert [a.custom_id for a in answers] == ["b"]
