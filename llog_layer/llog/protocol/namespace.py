"""The namespace identity: garbage collection refuses to run against an Oxia that lost its data (docs/GC.md).

GC deletes a shared WAL blob when no partition's index references it. If
Oxia's data is lost (or GC is pointed at a new, empty Oxia) before the topics
are rebuilt or restored (docs/RECOVERY.md), no index references anything and
one run would delete every WAL blob, which the rebuild needs. So a namespace
carries an identity in both stores (``NamespaceRecord``, ``NamespaceKeys``):

* Oxia: ``{root}/__catalog/namespace`` (partition key ``__catalog``);
* S3: ``{root}/__catalog/namespace.json``, the same document.

S3 outlives Oxia's data, so an S3 object without its Oxia twin means Oxia's
state was lost or replaced. ``check_namespace`` runs first in every GC run
(two reads) and decides:

| Oxia | S3 | action |
|---|---|---|
| absent | absent | create the Oxia record (create-only), then the S3 object: a new deployment, or one upgrading |
| present | absent | write the S3 object (a run that died between the two writes, or an upgrade) |
| present | present, same id | go on |
| absent or another id | present | ``NamespaceMismatch``: the run deletes nothing |

Oxia is written before S3, so a run that dies in between leaves the second
row, which the next run completes; the opposite order could leave an S3
object without its Oxia record, a false alarm. Two first runs at once: one
create wins, the other reads the winner's record and writes the same id.

After a loss, ``llog rebuild`` (or ``llog restore``) every topic, then
``adopt_namespace`` (``llog adopt-namespace``) writes the S3 object's id into
Oxia, create-only, and GC runs again. Adopting before every topic is back
would let GC delete the WAL blobs a later rebuild counts to place its next
offset.

``verify_namespace`` is the read-only half (the same two reads, nothing
created): GC repeats it right before each batch of deletes, since Oxia can be
lost while a run is reading references, and every backup run starts with it,
so a backup of an emptied Oxia never replaces (and prunes) the real ones.

What it does not catch: an Oxia and an S3 object lost together (both absent
again looks like a new deployment), a loss before the first run of a
version with the guard, an Oxia rolled back to an older snapshot of itself
(same id: its indexes simply lack what was written since), and the loss of a
shard other than the catalogue's (``__catalog`` holds the record). Writers and
compactors are not guarded: they must be stopped until the rebuild is done
(docs/RECOVERY.md).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from llog.errors import BlobNotFound, NamespaceMismatch, VersionConflict
from llog.format.keys import S3Location
from llog.format.kv.namespace import NamespaceKeys, NamespaceRecord
from llog.store.oxia import CREATE_ONLY
from llog.store.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamespaceState:
    """The identity each store holds (None: none)."""

    oxia: NamespaceRecord | None
    s3: NamespaceRecord | None


def _location(storage: Storage) -> S3Location:
    return S3Location(storage.bucket, NamespaceKeys(storage.root).object_key)


def read_namespace(storage: Storage) -> NamespaceState:
    """Both copies of the identity: one S3 GET, then one Oxia get.

    In that order: the identity is created in Oxia before S3 (``check_namespace``), so a copy this read finds
    in S3 was in Oxia before the Oxia get. Read the other way round, a first run creating both between the two
    reads would look like an Oxia that lost its state.
    """
    location = _location(storage)
    try:
        s3: NamespaceRecord | None = NamespaceRecord.decode(storage.blobs.get(location), location.uri)
    except BlobNotFound:
        s3 = None
    keys = NamespaceKeys(storage.root)
    found = storage.oxia.get(keys.record, partition_key=keys.partition_key)
    oxia = None if found is None else NamespaceRecord.decode(found.value, keys.record)
    return NamespaceState(oxia, s3)


def _create_in_oxia(storage: Storage, record: NamespaceRecord) -> tuple[NamespaceRecord, bool]:
    """Create the Oxia record: ``(record, True)``; if one exists already (another run's, just now), that one."""
    keys = NamespaceKeys(storage.root)
    try:
        storage.oxia.put(keys.record, record.encode(), partition_key=keys.partition_key,
                         expected_version_id=CREATE_ONLY)  # fmt: skip
        return record, True
    except VersionConflict:
        found = storage.oxia.get(keys.record, partition_key=keys.partition_key)
        if found is None:
            raise  # nothing deletes the record: a conflict with no record is not ours to explain
        return NamespaceRecord.decode(found.value, keys.record), False


def _mismatch(storage: Storage, s3: NamespaceRecord, oxia: NamespaceRecord | None, refused: str) -> NamespaceMismatch:
    held = "no namespace record" if oxia is None else f"namespace {oxia.namespace_id}"
    return NamespaceMismatch(
        f"Oxia's state under {storage.root}/ was lost or replaced: S3 ({_location(storage).uri}) names namespace "
        f"{s3.namespace_id}, Oxia ({NamespaceKeys(storage.root).record}) holds {held}. {refused}: against this "
        "Oxia every WAL object would look unreferenced and every topic empty. Stop writers and compactors, run "
        "`llog rebuild --topic T` (or `llog restore`) for every topic, then `llog adopt-namespace` "
        "(docs/RECOVERY.md).",
        s3_id=s3.namespace_id,
        oxia_id=None if oxia is None else oxia.namespace_id,
    )


def _verified(storage: Storage, state: NamespaceState, refused: str) -> None:
    if state.s3 is not None and (state.oxia is None or state.oxia.namespace_id != state.s3.namespace_id):
        raise _mismatch(storage, state.s3, state.oxia, refused)


def verify_namespace(storage: Storage, refused: str) -> NamespaceState:
    """Both copies of the identity; ``NamespaceMismatch`` if S3 holds one that Oxia does not. Writes nothing.

    The read-only check (module docstring): a namespace with no identity yet
    in S3 passes (``check_namespace``, GC's first step, creates it).
    ``refused`` tells, in the error, what the caller did not do.
    """
    state = read_namespace(storage)
    _verified(storage, state, refused)
    return state


def check_namespace(storage: Storage) -> NamespaceRecord:
    """The namespace's identity, created where missing; ``NamespaceMismatch`` if S3's has no equal in Oxia.

    The table in the module docstring; GC calls this before it deletes anything.
    """
    state = read_namespace(storage)
    _verified(storage, state, "Garbage collection deleted nothing")
    if state.oxia is not None and state.s3 is not None:
        return state.oxia
    oxia = state.oxia
    if oxia is None:
        oxia, _ = _create_in_oxia(storage, NamespaceRecord(str(uuid.uuid4()), int(storage.clock() * 1000)))
        log.info("namespace %s: created the identity of %s/", oxia.namespace_id, storage.root)
    storage.blobs.put(_location(storage), oxia.encode())
    return oxia


@dataclass(frozen=True)
class AdoptResult:
    namespace_id: str
    adopted: bool  # False: Oxia held the id already

    def to_json(self) -> dict[str, object]:
        return {"namespace_id": self.namespace_id, "adopted": self.adopted}


def adopt_namespace(storage: Storage) -> AdoptResult:
    """Write S3's namespace identity into Oxia after a rebuild or restore (module docstring).

    Create-only: if Oxia holds another id, ``NamespaceMismatch`` (nothing
    written); ``BlobNotFound`` if S3 holds none (GC creates both on its next run).
    """
    state = read_namespace(storage)
    if state.s3 is None:
        raise BlobNotFound(f"no namespace identity at {_location(storage).uri} to adopt: the next garbage "
                           "collection run creates one")  # fmt: skip
    oxia, adopted = (state.oxia, False) if state.oxia is not None else _create_in_oxia(storage, state.s3)
    if oxia.namespace_id != state.s3.namespace_id:
        raise NamespaceMismatch(
            f"refusing to adopt: Oxia ({NamespaceKeys(storage.root).record}) holds namespace {oxia.namespace_id}, "
            f"not S3's {state.s3.namespace_id}; this Oxia belongs to another namespace",
            s3_id=state.s3.namespace_id,
            oxia_id=oxia.namespace_id,
        )
    if adopted:
        log.info("namespace %s: adopted into Oxia under %s/", oxia.namespace_id, storage.root)
    return AdoptResult(oxia.namespace_id, adopted)
