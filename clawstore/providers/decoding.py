"""A reply's body as httpx's `iter_bytes` and `.text` give it, for the replies the wire reads itself (wire.py):
its Content-Encoding undone and its charset found, without a throwaway `httpx.Response` or httpx's private
decoders. The codings are the ones httpx sends in Accept-Encoding (gzip, deflate, zstd; br only where a brotli
package is installed); a coding claw does not know is passed through as it is, as httpx does. A body that does
not decompress is `httpx.DecodingError`, which the client reports as a malformed reply."""

from __future__ import annotations

import codecs
import email.message
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import httpx
import zstandard


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Zlib:
    """gzip: a zlib stream with a gzip wrapper."""

    def __init__(self, wbits: int):
        self._inflate = zlib.decompressobj(wbits)

    def decode(self, data: bytes) -> bytes:
        try:
            return self._inflate.decompress(data)
        except zlib.error as exc:
            raise httpx.DecodingError(str(exc)) from exc

    def flush(self) -> bytes:
        try:
            return self._inflate.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(str(exc)) from exc


class _Deflate(_Zlib):
    """deflate: a zlib stream, or a raw one as some servers send it, told apart by the zlib header (RFC 1950:
    method 8, the two bytes a multiple of 31). httpx tries zlib on the first chunk and falls back on an error, so a
    raw stream whose first chunk is a single byte failed there; here the first two bytes are waited for."""

    def __init__(self) -> None:
        self._head = b""
        self._chosen = False

    def _choose(self) -> None:
        cmf, flg = (self._head + b"\0")[:2]
        wrapped = len(self._head) >= 2 and cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        super().__init__(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        self._chosen = True

    def decode(self, data: bytes) -> bytes:
        if not self._chosen:
            self._head += data
            if len(self._head) < 2:
                return b""
            self._choose()
            data, self._head = self._head, b""
        return super().decode(data)

    def flush(self) -> bytes:
        if not self._chosen:
            if not self._head:
                return b""
            self._choose()
            return super().decode(self._head) + super().flush()
        return super().flush()


class _Zstd:
    """zstd: one frame or several back to back (a frame ending where a chunk does too: httpx then failed on the
    next chunk); a body that ends inside a frame does not decode."""

    def __init__(self) -> None:
        self._inflate = zstandard.ZstdDecompressor().decompressobj()
        self._seen = False

    def decode(self, data: bytes) -> bytes:
        self._seen = True
        out = []
        try:
            while data:
                if self._inflate.eof:  # (a frame ended: the next begins)
                    self._inflate = zstandard.ZstdDecompressor().decompressobj()
                out.append(self._inflate.decompress(data))
                data = self._inflate.unused_data if self._inflate.eof else b""
        except zstandard.ZstdError as exc:
            raise httpx.DecodingError(str(exc)) from exc
        return b"".join(out)

    def flush(self) -> bytes:
        if not self._seen:
            return b""
        if not self._inflate.eof:
            raise httpx.DecodingError("Zstandard data is incomplete")
        return bytes(self._inflate.flush())


def _brotli() -> Callable[[], Decoder] | None:
    try:
        import brotli  # type: ignore[import-not-found,unused-ignore]  # (optional, as for httpx)
    except ImportError:
        try:
            import brotlicffi as brotli  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            return None
    module: Any = brotli

    class _Brotli:
        def __init__(self) -> None:
            self._inflate = module.Decompressor()
            step = getattr(self._inflate, "decompress", None) or self._inflate.process  # (brotlicffi, brotli)
            self._step: Callable[[bytes], bytes] = step

        def decode(self, data: bytes) -> bytes:
            if not data:
                return b""
            try:
                return self._step(data)
            except module.error as exc:
                raise httpx.DecodingError(str(exc)) from exc

        def flush(self) -> bytes:
            try:
                getattr(self._inflate, "finish", lambda: None)()
            except module.error as exc:
                raise httpx.DecodingError(str(exc)) from exc
            return b""

    return _Brotli


_DECODERS: dict[str, Callable[[], Decoder]] = {
    "gzip": lambda: _Zlib(zlib.MAX_WBITS | 16),
    "deflate": _Deflate,
    "zstd": _Zstd,
}
if (_made_brotli := _brotli()) is not None:
    _DECODERS["br"] = _made_brotli


class _Chain:
    """Several codings, undone last applied first."""

    def __init__(self, applied: list[Decoder]):
        self._undo = applied[::-1]

    def decode(self, data: bytes) -> bytes:
        for decoder in self._undo:
            data = decoder.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for decoder in self._undo:
            data = decoder.decode(data) + decoder.flush()
        return data


def decoder_for(headers: httpx.Headers) -> Decoder | None:
    """The decoder of the codings Content-Encoding names, in order (identity and unknown ones skipped); None: the
    body is as sent."""
    applied = [_DECODERS[name]() for value in headers.get_list("content-encoding", split_commas=True)
               if (name := value.strip().lower()) in _DECODERS]
    if not applied:
        return None
    return applied[0] if len(applied) == 1 else _Chain(applied)


def decoded(chunks: Iterator[bytes], headers: httpx.Headers) -> Iterator[bytes]:
    """A body's chunks with its Content-Encoding undone."""
    decoder = decoder_for(headers) if "content-encoding" in headers else None
    if decoder is None:
        yield from chunks
        return
    for chunk in chunks:
        if out := decoder.decode(chunk):
            yield out
    if rest := decoder.flush():
        yield rest


def text_encoding(headers: httpx.Headers) -> str:
    """The codec the reply's text is in: its Content-Type charset if Python knows it, else UTF-8."""
    content_type = headers.get("content-type", "")
    if "charset" not in content_type.lower():
        return "utf-8"
    parsed = email.message.Message()
    parsed["content-type"] = content_type
    charset = parsed.get_content_charset(failobj=None)
    if not charset:
        return "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        return "utf-8"
    return charset


def reply_text(body: bytes | bytearray, encoding: str | None) -> str:
    """The reply's text in its charset (`text_encoding`, or httpx's), undecodable bytes replaced; UTF-8 when that
    codec cannot decode it so: Python knows codecs that are no text encoding (`rot13`, `hex`) or refuse `replace`
    (`idna`, `punycode`), and the client raised theirs for an answer it had been sent, a run's paid call then
    taken for none (tests/spend/test_sent_then_lost.py)."""
    try:
        return body.decode(encoding or "utf-8", errors="replace")
    except (LookupError, UnicodeError):
        return body.decode("utf-8", errors="replace")
