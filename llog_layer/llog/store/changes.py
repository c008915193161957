"""Wake-ups on Oxia key changes, from one notification subscription per client (docs/ARCHITECTURE.md).

Long-polling consumers wait for a partition's commit keys to change instead
of re-reading Oxia on a timer. ``ChangeFeed`` opens Oxia's notification
stream (one gRPC stream per shard, covering every write in the namespace:
the server offers no key filter) when the first waiter registers, and wakes
each ``Wakeup`` registered for a changed key or for a folder holding it
(those that only count changes, ``Wakeup.counts``, before the others).
Matching costs one dict lookup per ``/`` of a changed key.

A notification can be missed: a waiter read Oxia before the streams were
connected, or they failed and reconnected. So whenever the streams
(re)connect, every waiter is woken with "anything may have changed", and
waiters still re-check on a bounded timer of their own: a lost notification
costs latency, never a record. The feed reconnects after any stream error
(server restart, lost connection) with backoff, and ``close()`` only cancels
the streams: it never waits for the server.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import grpc

from llog.store.oxia_proto.io.oxia.proto import v1 as pb

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
W = TypeVar("W", bound="Wakeup")

ShardStubs = Callable[[], list[tuple[int, Any]]]  # (shard id, llog.store.oxia_client.Stub) of every shard

# Between reconnect attempts: 100 ms doubling up to 5 s. A server without
# notifications (--notifications-enabled=false) is asked again every 5 s;
# waiters re-check on their own timer meanwhile.
_RECONNECT_INITIAL_S = 0.1
_RECONNECT_MAX_S = 5.0
# Streams cancelled by close() or a reconnect end at once; this only bounds a stuck one.
_READER_JOIN_S = 1.0


@dataclass(frozen=True)
class Changes:
    """What woke a ``Wakeup``: the tags of changed keys, or ``everything`` (a notification may have been lost)."""

    tags: frozenset[Hashable] = frozenset()
    everything: bool = False

    def __contains__(self, tag: object) -> bool:
        return self.everything or tag in self.tags


class Wakeup:
    """One waiter's pending wake-ups; ``wait`` returns and clears them."""

    # Woken before the other waiters of the same change: one that only counts changes (the tail cache's),
    # which the others, once woken, look at to tell whether something changed.
    counts: ClassVar[bool] = False

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._tags: set[Hashable] = set()
        self._everything = False
        self._woken = False

    def wake(self, tag: Hashable | None = None) -> None:
        """Wake the waiter; ``tag`` names what changed (None: nothing to re-read, e.g. a local cache grew)."""
        with self._cond:
            if tag is not None:
                self._tags.add(tag)
            self._woken = True
            self._cond.notify_all()

    def wake_tags(self, tags: Iterable[Hashable | None]) -> None:
        """``wake`` once for several changes: the waiter sees all of them or none."""
        with self._cond:
            self._tags.update(t for t in tags if t is not None)
            self._woken = True
            self._cond.notify_all()

    def notified(self, tags: Iterable[Hashable | None], written: frozenset[tuple[str, int]]) -> None:
        """A notification of changed keys: ``wake_tags``; ``written``, each written key with the Oxia version id
        it got (a deleted key is not among them; an id alone is not one write: ids are counted per shard), is
        for a waiter that tells writes apart (the tail cache's)."""
        self.wake_tags(tags)

    def wake_all(self) -> None:
        with self._cond:
            self._everything = self._woken = True
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> Changes | None:
        """Block until woken (what woke it, cleared) or the timeout (None)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._woken, timeout=max(timeout_s, 0)):
                return None
            changes = Changes(frozenset(self._tags), self._everything)
            self._tags.clear()
            self._everything = self._woken = False
            return changes


class Watchers(Generic[K]):
    """``Wakeup``s registered per key, each with the tag it is woken with; callers hold their own lock."""

    def __init__(self) -> None:
        self._by_key: dict[K, dict[Wakeup, Hashable | None]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, wakeup: Wakeup, keys: Mapping[K, Hashable | None]) -> None:
        for key, tag in keys.items():
            self._by_key.setdefault(key, {})[wakeup] = tag

    def remove(self, wakeup: Wakeup, keys: Iterable[K]) -> None:
        for key in keys:
            waiters = self._by_key.get(key)
            if waiters is not None:
                waiters.pop(wakeup, None)
                if not waiters:
                    del self._by_key[key]

    def wake(self, key: K) -> None:
        for wakeup, tag in self._by_key.get(key, {}).items():
            wakeup.wake(tag)

    def collect(self, key: K, into: dict[Wakeup, list[Hashable | None]]) -> None:
        """The waiters of ``key`` and their tags, added to ``into`` (to wake each once, ``Wakeup.wake_tags``)."""
        for wakeup, tag in self._by_key.get(key, {}).items():
            into.setdefault(wakeup, []).append(tag)

    def everyone(self) -> list[Wakeup]:
        """Every waiter once, in wake order (``in_wake_order``)."""
        return in_wake_order(dict.fromkeys(w for waiters in self._by_key.values() for w in waiters))


def in_wake_order(waiters: Iterable[W]) -> list[W]:
    """``waiters`` with those that only count changes (``Wakeup.counts``) first."""
    return sorted(waiters, key=lambda w: not w.counts)


class ChangeFeed:
    """Oxia change notifications dispatched to registered ``Wakeup``s by key; thread-safe."""

    def __init__(self, shard_stubs: ShardStubs) -> None:
        self._shard_stubs = shard_stubs
        self._lock = threading.Lock()
        # Keyed by an exact key, or by a folder (ending in "/") holding the keys.
        self._watchers: Watchers[str] = Watchers()
        self._streams: list[Any] = []
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._live = False
        self.connects = 0  # times the streams of every shard came up (first, then after each failure)

    @property
    def live(self) -> bool:
        """Whether every shard's stream is connected, so a change now will be notified."""
        return self._live

    @contextlib.contextmanager
    def watching(self, wakeup: Wakeup, keys: Mapping[str, Hashable]) -> Iterator[None]:
        """Wake ``wakeup`` with ``keys[k]`` when key ``k`` (or a key under folder ``k/``) changes.

        Starts the feed on first use; register before reading what you watch,
        so a change after the read is never missed.
        """
        self.watch(wakeup, keys)
        try:
            yield
        finally:
            self.unwatch(wakeup, keys)

    def watch(self, wakeup: Wakeup, keys: Mapping[str, Hashable]) -> None:
        """``watching`` without an end: until ``unwatch`` (a watcher that outlives one request)."""
        with self._lock:
            self._watchers.add(wakeup, keys)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, daemon=True, name="llog-oxia-changes")
                self._thread.start()

    def unwatch(self, wakeup: Wakeup, keys: Iterable[str]) -> None:
        with self._lock:
            self._watchers.remove(wakeup, keys)

    def close(self) -> None:
        """Stop the feed without waiting for the server; waiters are woken to re-check and meet the closed store."""
        self._closed.set()
        with self._lock:
            self._live = False
            streams, self._streams = self._streams, []
            waiters = self._watchers.everyone()
        for stream in streams:
            stream.cancel()
        for waiter in waiters:
            waiter.wake_all()

    # --- the feed's thread ------------------------------------------------------

    def _run(self) -> None:
        delay = _RECONNECT_INITIAL_S
        failures = 0
        while not self._closed.is_set():
            try:
                shards = self._shard_stubs()
                if not shards:
                    raise LookupError("no shard assignments yet")
                streams = [stub.notifications(pb.NotificationsRequest(shard=shard)) for shard, stub in shards]
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                connects = self.connects
                reason = self._follow(streams)
                if self.connects > connects:  # it was up: a new failure, not the same one again
                    delay, failures = _RECONNECT_INITIAL_S, 0
            with self._lock:
                self._live = False
            if self._closed.is_set():
                return
            failures += 1
            # News is a feed that was up going down; not connecting yet (no client, no
            # assignments, notifications off) only costs waiters their re-check timer.
            (log.warning if failures == 1 and self.connects else log.debug)(
                "Oxia notifications unavailable (%s); retrying in %.1fs", reason, delay
            )
            self._closed.wait(delay)
            delay = min(delay * 2, _RECONNECT_MAX_S)

    def _follow(self, streams: list[Any]) -> str:
        """Read every shard's stream until one ends; returns why it ended."""
        with self._lock:
            if self._closed.is_set():
                for stream in streams:
                    stream.cancel()
                return "closed"
            self._streams = streams
        ended = threading.Event()
        pending = set(range(len(streams)))  # streams that have not delivered their first batch yet
        why: list[str] = []
        readers = [
            threading.Thread(
                target=self._read, args=(i, stream, pending, ended, why), daemon=True, name=f"llog-oxia-changes-{i}"
            )
            for i, stream in enumerate(streams)
        ]
        for reader in readers:
            reader.start()
        ended.wait()
        with self._lock:
            self._live = False
            self._streams = []
        for stream in streams:
            stream.cancel()
        for reader in readers:
            reader.join(_READER_JOIN_S)
        return why[0] if why else "stream ended"

    def _read(self, index: int, stream: Any, pending: set[int], ended: threading.Event, why: list[str]) -> None:
        try:
            for batch in stream:
                if index in pending:
                    self._connected(index, pending)
                self._dispatch({entry.key or "": _version(entry.value) for entry in batch.notifications})
            why.append("the server ended the stream")
        except grpc.RpcError as exc:
            why.append(f"{exc.code().name}: {exc.details()}")
        except Exception as exc:  # a bad message must not end the feed silently
            why.append(f"{type(exc).__name__}: {exc}")
        finally:
            ended.set()

    def _connected(self, index: int, pending: set[int]) -> None:
        # The server's first batch on a stream (possibly empty) says it is subscribed from now on.
        with self._lock:
            pending.discard(index)
            if pending or self._closed.is_set():
                return
            self._live = True
            self.connects += 1
            waiters = self._watchers.everyone()
        # Anything may have changed while no stream was up: every waiter re-reads.
        for waiter in waiters:
            waiter.wake_all()

    def _dispatch(self, changed: Mapping[str, int | None]) -> None:
        """One batch of notifications (one Oxia log entry may change several keys): key -> the version id it
        was written with (None: deleted). Wakes each waiter once with all its tags, so no waiter sees part of it."""
        with self._lock:
            if not self._watchers:
                return
            woken: dict[Wakeup, list[Hashable | None]] = {}
            written: dict[Wakeup, set[tuple[str, int]]] = {}
            for key, version in changed.items():
                matched: dict[Wakeup, list[Hashable | None]] = {}
                self._watchers.collect(key, matched)
                slash = key.find("/")
                while slash >= 0:
                    self._watchers.collect(key[: slash + 1], matched)
                    slash = key.find("/", slash + 1)
                for wakeup, tags in matched.items():
                    woken.setdefault(wakeup, []).extend(tags)
                    if version is not None:
                        written.setdefault(wakeup, set()).add((key, version))
            for wakeup in in_wake_order(woken):
                wakeup.notified(woken[wakeup], frozenset(written.get(wakeup, ())))


def _version(notification: pb.Notification | None) -> int | None:
    """The version id a notified key was written with; None for a deletion."""
    if notification is None or notification.type not in (pb.NotificationType.KEY_CREATED,
                                                          pb.NotificationType.KEY_MODIFIED):  # fmt: skip
        return None
    return notification.version_id
