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
    from clawstore.store.documents import RecordDoc
    from clawstore.store.reach import HeadClosure
    from clawstore.store.services.archive_import import ImportReport
    from clawstore.store.services.archive_verify import FrameSource
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
    """Action key -> record (a RecordDoc naming its outputs), read."""

    def get_action(self, key: str) -> RecordDoc | None: ...

    def get_action_record_id(self, key: str, look_again: bool = True) -> str | None: ...

    def iter_actions(self) -> Iterator[tuple[str, str | None]]: ...


@runtime_checkable
class ActionCache(ActionReader, Protocol):
    """Also point a key at a record."""

    def put_action(self, key: str, record: RecordDoc | dict[str, Any]) -> str: ...


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
    """Everything a reader asks of a store: objects (and the list of them), entries, refs (read under a lease that
    keeps the head a ref names from a gc: `reading_ref`), the leases held, and the directory it is (whose derived
    files, e.g. the query manifest, live beside it)."""

    @property
    def root(self) -> Path: ...

    def iter_objects(self) -> Iterator[str]: ...

    def list_leases(self) -> list[LeaseInfo]: ...

    def reading_ref(self, name: str) -> contextlib.AbstractContextManager[str | None]: ...


@runtime_checkable
class Transfer(ObjectReader, Refs, Protocol):
    """What a push or a pull asks of a store: what it holds (and lacks), its packs and new ones made of its
    objects to send; somewhere to receive packs, the entries they bring, what is kept apart."""

    @property
    def layout(self) -> StoreLayout: ...

    @property
    def tmp_dir(self) -> Path: ...

    def lease(self, purpose: str) -> contextlib.AbstractContextManager[LeaseInfo]: ...

    def keeping(self, oid: str) -> contextlib.AbstractContextManager[LeaseInfo]: ...

    def batch(self) -> contextlib.AbstractContextManager[None]: ...

    def refresh(self) -> None: ...

    def object_digests(self) -> set[bytes]: ...

    def index_segments(self) -> frozenset[str]: ...

    def entry_digests(self) -> dict[bytes, bytes]: ...

    def get_action_record_id(self, key: str, look_again: bool = True) -> str | None: ...

    def committed(self, unless: frozenset[str] | None = None) -> IndexSnapshot | None: ...

    def head_closure(self, head_id: str) -> HeadClosure: ...

    def lacking_in_closure(self, roots: Iterable[str]) -> set[str]: ...

    def closure_digests(self, roots: Iterable[str]) -> set[bytes]: ...

    def sealed_packs(self, skip: Container[str] = ()) -> Iterator[SealedPack]: ...

    def make_pack(self, digests: Iterable[bytes], work: Path, content: bytes | None = None) -> Path: ...

    def receive(self) -> Incoming: ...

    def add_entries(self, entries: Mapping[str, str]) -> None: ...

    def keep_apart(self, signer: str | None, actions: dict[str, str], refs: dict[str, str], digest: str | None,
                   signers: list[str] | None = None) -> str: ...


# --- archives and trust, for a pull (remote/): the archive service's own functions, imported when used


@runtime_checkable
class ArrivingContents(Protocol):
    """The objects of packs or an archive being received, read before any is published, with the
    store's own: is an entry's record and input document at hand, does it verify, does it take over."""

    def has(self, oid: str) -> bool: ...

    def takes_over(self, current: str, incoming: str) -> bool: ...

    def entry_problem(self, key: str, record_id: str) -> str | None: ...

    def outputs_at_hand(self, record_id: str) -> bool: ...


def arriving_contents(store: Transfer, staged: Mapping[str, Path | FrameSource], listed: set[str],
                      kept: dict[str, bytes] | None = None,
                      vetted: Mapping[tuple[str, str], str | None] | None = None) -> ArrivingContents:
    """What is staged (`staged`: hex digest -> where its frame is; `listed`: every id arriving, whole: PREFIX + hex)
    and what the store holds, for checking entries before they are added (archive_import.ArrivingPacks). `vetted`:
    (key, record) -> `record_checker` of entries whose record was read as it arrived (`kept`, verified)."""
    from clawstore.store.services.archive_import import ArrivingPacks

    return ArrivingPacks(store, staged, listed, kept, vetted)  # type: ignore[arg-type]


def record_checker() -> Callable[[str, bytes], tuple[str | None, list[Any] | None]]:
    """What a record's verified content alone says against the entry `key -> it` (actions.content_problem: the input
    document's presence left to the entry check), and what its outputs name (unchecked: actions.named_outputs), asked
    once per record (imported once, not per call)."""
    from clawstore.store.actions import content_problem

    return content_problem


def user_trusts(signer: str | None) -> bool:
    """Is content signed by `signer` trusted: the user's own key or one in their trust list."""
    from clawstore.store.services import archive_import

    return archive_import.user_trusts(signer)


def untrusted_why(signer: str | None, verb: str = "import") -> str:
    """Why content signed by `signer` is refused, and the two ways on (archive_import.untrusted_why)."""
    from clawstore.store.services import archive_import

    return archive_import.untrusted_why(signer, verb)


def archive_signer(path: Path) -> str | None:
    """The key whose signature an archive's manifest carries (None: unsigned); ArchiveError if forged."""
    from clawstore.store.services import archive_import

    return archive_import.archive_signer(path)


def import_archive(store: Transfer, path: Path, *, untrusted: bool = False) -> ImportReport:
    """Verify a whole archive, then publish it (archive_import.import_archive: its entries and refs kept
    apart when its signer is not trusted and `untrusted`)."""
    from clawstore.store.services import archive_import

    return archive_import.import_archive(store, path, untrusted=untrusted)  # type: ignore[arg-type]


# --- pack tables, for listings of format 4 (remote/listing.py): a pack names its objects in its own table


def pack_table(path: Path) -> bytes:
    """A sealed pack's table (its trailer's rows, checksum verified); NotAPackError if it is not sealed."""
    from clawstore.store.core import packfile

    return packfile.sealed_table(path)


def table_object_ids(table: bytes) -> list[bytes]:
    """The ids of the objects a pack's table names, in table order."""
    from clawstore.store.core import packfile

    return packfile.table_object_ids(table)


def table_rows(table: bytes) -> int:
    from clawstore.store.core import packfile

    return len(table) // packfile.TABLE_ROW_SIZE


def table_tail_size(rows: int) -> int:
    """The bytes at the end of a sealed pack holding its table of `rows` rows and its footer."""
    from clawstore.store.core import packfile

    return packfile.table_tail_size(rows)


def table_in_tail(tail: bytes, rows: int) -> bytes | None:
    """The table in a sealed pack's last `table_tail_size(rows)` bytes (None: they do not end in one of `rows` rows)."""
    from clawstore.store.core import packfile

    return packfile.table_in_tail(tail, rows)
