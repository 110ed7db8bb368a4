"""The store's face to the other layers: what they may ask of a store, as Protocols (readers, writers, action cache,
refs, transfer), all satisfied by `Store`. Which to take where: docs/store.md (Details by module)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable

from clawstore.store.core.codec import ObjectReader as ObjectStream

if TYPE_CHECKING:
    from clawstore.store.core.index import IndexSnapshot
    from clawstore.store.core.layout import StoreLayout
    from clawstore.store.core.locks import LeaseInfo
    from clawstore.store.reach import HeadClosure
    from clawstore.store.services.transfer import Incoming, SealedPack


@runtime_checkable
class ObjectReader(Protocol):
    """Read content-addressed objects (every read verifies the content against its id)."""

    def has(self, oid: str) -> bool: ...

    def missing(self, oids: Iterable[str]) -> list[str]: ...

    def get_bytes(self, oid: str) -> bytes: ...

    def get_many_bytes(self, oids: Iterable[str]) -> dict[str, bytes]: ...

    def get_json(self, oid: str) -> Any: ...

    def open_object(self, oid: str) -> ObjectStream: ...

    def object_sizes(self, oid: str) -> tuple[int, int]: ...


@runtime_checkable
class ObjectWriter(ObjectReader, Protocol):
    """Also store objects; `batch()` makes a group of puts durable and visible together."""

    def put_bytes(self, data: bytes | bytearray | memoryview) -> str: ...

    def put_json(self, value: Any) -> str: ...

    def put_file(self, path: Path | str) -> str: ...

    def put_stream(self, reader: BinaryIO) -> str: ...

    def put_tree(self, directory: Path | str, *, escape_names: bool = False) -> str: ...

    def batch(self) -> contextlib.AbstractContextManager[None]: ...

    def when_durable(self, callback: Callable[[], None]) -> None: ...


@runtime_checkable
class ActionReader(Protocol):
    """Action key -> record (a JSON object naming its outputs), read."""

    def get_action(self, key: str) -> dict[str, Any] | None: ...

    def get_action_record_id(self, key: str, look_again: bool = True) -> str | None: ...

    def iter_actions(self) -> Iterator[tuple[str, str | None]]: ...


@runtime_checkable
class ActionCache(ActionReader, Protocol):
    """Also point a key at a record."""

    def put_action(self, key: str, record: dict[str, Any]) -> str: ...


@runtime_checkable
class RefReader(Protocol):
    """Named pointers, read."""

    def get_ref(self, name: str) -> str | None: ...

    def list_refs(self, prefix: str = "") -> dict[str, str]: ...


@runtime_checkable
class Refs(RefReader, Protocol):
    """Also move them, by compare-and-set."""

    def set_ref(self, name: str, value: str, expected: Any = ...) -> None: ...

    def delete_ref(self, name: str, expected: Any = ...) -> bool: ...


@runtime_checkable
class StoreReader(ObjectReader, ActionReader, RefReader, Protocol):
    """Everything a reader asks of a store: objects (and the list of them), entries, refs, the leases
    held, and the directory it is (whose derived files, e.g. the query manifest, live beside it)."""

    @property
    def root(self) -> Path: ...

    def iter_objects(self) -> Iterator[str]: ...

    def list_leases(self) -> list[LeaseInfo]: ...


@runtime_checkable
class Transfer(ObjectReader, Refs, Protocol):
    """What a push or a pull asks of a store: what it holds (and lacks), its packs and new ones made of its
    objects to send; somewhere to receive packs, the entries they bring, what is kept apart."""

    @property
    def layout(self) -> StoreLayout: ...

    @property
    def tmp_dir(self) -> Path: ...

    def lease(self, purpose: str) -> contextlib.AbstractContextManager[LeaseInfo]: ...

    def batch(self) -> contextlib.AbstractContextManager[None]: ...

    def refresh(self) -> None: ...

    def object_digests(self) -> set[bytes]: ...

    def entry_digests(self) -> dict[bytes, bytes]: ...

    def get_action_record_id(self, key: str, look_again: bool = True) -> str | None: ...

    def committed(self, unless: frozenset[str] | None = None) -> IndexSnapshot | None: ...

    def head_closure(self, head_id: str) -> HeadClosure: ...

    def lacking_in_closure(self, roots: Iterable[str]) -> set[str]: ...

    def sealed_packs(self, skip: Container[str] = ()) -> Iterator[SealedPack]: ...

    def make_pack(self, digests: Iterable[bytes], work: Path, content: bytes | None = None) -> Path: ...

    def receive(self) -> Incoming: ...

    def add_entries(self, entries: Mapping[str, str]) -> None: ...

    def keep_apart(self, signer: str | None, actions: dict[str, str], refs: dict[str, str], digest: str | None,
                   signers: list[str] | None = None) -> str: ...
