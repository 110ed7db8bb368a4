"""The stand-in's OpenAI Batch API: `/v1/files`, `/v1/batches`, their content, cancel and list, answering each line as
the stand-in answers a chat request. Details: docs/runners.md (Details by module)."""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

EXPIRY_WINDOW_S = 24 * 3600

Picker = Callable[[str, Any], dict[str, Any]]  # (model, messages) -> the stand-in's reply for them
Completer = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]  # (reply, body) -> chat.completion
Answer = tuple[int, dict[str, Any]] | tuple[int, dict[str, Any], dict[str, str]]  # (status, body[, headers])


def last_prompt(messages: Any) -> str:
    """The last user or system message's text: what a rule's `match` is looked for in."""
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") in ("user", "system"):
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def multipart_file(content_type: str, raw: bytes) -> tuple[dict[str, str], bytes | None]:
    """(form fields, the uploaded file's bytes) of a multipart/form-data body."""
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
    fields: dict[str, str] = {}
    data: bytes | None = None
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            data = payload
        elif isinstance(name, str):
            fields[name] = payload.decode("utf-8")
    return fields, data


class BatchService:
    """Files and batches of one stand-in server (thread-safe)."""

    def __init__(self, pick: Picker, complete: Completer):
        self._pick = pick
        self._complete = complete
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        # `refuse_after`: uploads and batch creations answer `refusal` (an HTTP status, 402: out of credit) once this
        # many of them were served (None: never; 0: the first upload, 1: its batch's creation, 2: the next upload),
        # with a `Retry-After: refusal_retry_after` header when that is set
        self.settings: dict[str, Any] = {"delay": 0.0, "expire_next": 0, "expire_keep": 0, "fail_match": None,
                                         "refuse_after": None, "refusal": 402, "refusal_retry_after": None}
        self.received: dict[str, Any] = {"files": 0, "batches": 0, "lines": 0, "custom_ids": [],
                                         "file_bytes": [], "file_lines": [], "cancelled": 0, "refused": 0}

    def configure(self, body: dict[str, Any]) -> None:
        with self.lock:
            for name in self.settings:
                if name in body:
                    self.settings[name] = body[name]

    def reset(self) -> None:
        with self.lock:
            self.files.clear()
            self.batches.clear()
            self.settings.update(delay=0.0, expire_next=0, expire_keep=0, fail_match=None, refuse_after=None,
                                 refusal=402, refusal_retry_after=None)
            self.received = {"files": 0, "batches": 0, "lines": 0, "custom_ids": [], "file_bytes": [],
                             "file_lines": [], "cancelled": 0, "refused": 0}

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return json.loads(json.dumps(self.received))

    def _refused(self) -> Answer | None:
        """The refusal `refuse_after` asks for now (counted), as OpenRouter words one out of credit; None: served."""
        with self.lock:
            after = self.settings["refuse_after"]
            if after is None or self.received["files"] + self.received["batches"] < int(after):
                return None
            self.received["refused"] += 1
            status, wait = int(self.settings["refusal"]), self.settings["refusal_retry_after"]
        body = {"error": {"code": status, "message": "Insufficient credits (stand-in batch refusal)"}}
        return (status, body) if wait is None else (status, body, {"Retry-After": str(wait)})

    # ---- the API ------------------------------------------------------------------------------
    def upload(self, content_type: str, raw: bytes) -> Answer:
        refused = self._refused()
        if refused is not None:
            return refused
        fields, data = multipart_file(content_type, raw)
        if data is None or fields.get("purpose") != "batch":
            return 400, {"error": {"message": "expected a multipart upload with purpose=batch and a file"}}
        file_id = f"file-{uuid.uuid4().hex[:20]}"
        lines = [line for line in data.splitlines() if line.strip()]
        with self.lock:
            self.files[file_id] = data
            self.received["files"] += 1
            self.received["file_bytes"].append(len(data))
            self.received["file_lines"].append(len(lines))
        return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": "batch.jsonl", "purpose": "batch"}

    def create(self, body: dict[str, Any]) -> Answer:
        refused = self._refused()
        if refused is not None:
            return refused
        file_id = body.get("input_file_id")
        with self.lock:
            data = self.files.get(str(file_id))
            if data is None:
                return 404, {"error": {"message": f"no file {file_id}"}}
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
            expires = self.settings["expire_next"] > 0
            if expires:
                self.settings["expire_next"] -= 1
            now = time.time()
            batch = {"id": f"batch_{uuid.uuid4().hex[:20]}", "object": "batch", "endpoint": body.get("endpoint"),
                     "errors": None, "input_file_id": file_id, "completion_window": body.get("completion_window"),
                     "status": "in_progress", "output_file_id": None, "error_file_id": None,
                     "created_at": int(now), "in_progress_at": int(now), "expires_at": int(now + EXPIRY_WINDOW_S),
                     "completed_at": None, "expired_at": None, "cancelled_at": None,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                     "metadata": body.get("metadata") or {}}
            self.batches[batch["id"]] = {"public": batch, "lines": lines, "created": now, "expires": expires,
                                         "keep": int(self.settings["expire_keep"]),
                                         "fail_match": self.settings["fail_match"]}
            self.received["batches"] += 1
            self.received["lines"] += len(lines)
            self.received["custom_ids"].extend(str(line.get("custom_id")) for line in lines)
            return 200, dict(batch)

    def get(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            entry = self.batches.get(batch_id)
            if entry is None:
                return 404, {"error": {"message": f"no batch {batch_id}"}}
            self._advance(entry)
            return 200, json.loads(json.dumps(entry["public"]))

    def listing(self) -> tuple[int, dict[str, Any]]:
        with self.lock:
            for entry in self.batches.values():
                self._advance(entry)
            data = sorted((json.loads(json.dumps(e["public"])) for e in self.batches.values()),
                          key=lambda b: -b["created_at"])
        return 200, {"object": "list", "data": data, "has_more": False}

    def cancel(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            entry = self.batches.get(batch_id)
            if entry is None:
                return 404, {"error": {"message": f"no batch {batch_id}"}}
            self._advance(entry)
            public = entry["public"]
            if public["status"] in ("in_progress", "validating"):
                public.update(status="cancelled", cancelled_at=int(time.time()))
                self.received["cancelled"] += 1
            return 200, dict(public)

    def content(self, file_id: str) -> bytes | None:
        with self.lock:
            return self.files.get(file_id)

    # ---- answering ----------------------------------------------------------------------------
    def _advance(self, entry: dict[str, Any]) -> None:
        public = entry["public"]
        if public["status"] != "in_progress":
            return
        elapsed = time.time() - entry["created"]
        total = public["request_counts"]["total"]
        delay = float(self.settings["delay"])
        if elapsed < delay:
            public["request_counts"]["completed"] = int(total * elapsed / delay)
            return
        answered, failed = [], []
        for index, line in enumerate(entry["lines"]):
            if entry["expires"] and index >= entry["keep"]:
                failed.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": line.get("custom_id"),
                               "response": None,
                               "error": {"code": "batch_expired",
                                         "message": "This request could not be executed before the completion "
                                                    "window expired."}})
                continue
            answered_line, ok = self._answer(line, entry["fail_match"])
            (answered if ok else failed).append(answered_line)
        now = int(time.time())
        if answered:
            public["output_file_id"] = self._keep(answered)
        if failed:
            public["error_file_id"] = self._keep(failed)
        public["request_counts"].update(completed=len(answered), failed=len(failed))
        if entry["expires"]:
            public.update(status="expired", expired_at=now)
        else:
            public.update(status="completed", completed_at=now)

    def _answer(self, line: dict[str, Any], fail_match: str | None) -> tuple[dict[str, Any], bool]:
        body = line.get("body") if isinstance(line.get("body"), dict) else {}
        request_id = f"req-{uuid.uuid4().hex[:12]}"
        base = {"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": line.get("custom_id"), "error": None}
        if fail_match and fail_match in last_prompt(body.get("messages")):
            return {**base, "response": {"status_code": 500, "request_id": request_id,
                                         "body": {"error": {"message": "stand-in batch line failure"}}}}, False
        reply = self._pick(str(body.get("model")), body.get("messages"))
        status = int(reply.get("status", 200))
        if status >= 400:
            return {**base, "response": {"status_code": status, "request_id": request_id,
                                         "body": {"error": {"message": reply.get("error", "stand-in error")}}}}, False
        payload = reply["body"] if "body" in reply else self._complete(reply, body)
        return {**base, "response": {"status_code": status, "request_id": request_id, "body": payload}}, True

    def _keep(self, lines: list[dict[str, Any]]) -> str:
        file_id = f"file-{uuid.uuid4().hex[:20]}"
        self.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
        return file_id
