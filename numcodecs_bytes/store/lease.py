"""One run at a time on an object store: a lock object beside the topmost node's metadata, held by a
lease the run renews.

The lock object is written only where none exists, renewed and finally
removed only while it is the version this run wrote; each backend says how
(`LockObject`: S3's conditional requests through its client, obstore's put
modes).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple, Protocol

from ..problems import StoreBusyError

__all__ = [
    "LEASE",
    "LOCK_NAME",
    "Lease",
    "LockHeld",
    "LockLost",
    "LockObject",
    "LockRead",
]

LOCK_NAME = ".numcodecs-bytes-lock"
"""The lock object of an object store, beside its topmost node's metadata, while a run works on
it."""
LEASE = 60.0
"""Seconds of a run's lease on a store's lock: it renews the lock every quarter of that, and stops
writing once half of it has passed since its last renewal (a run paused that long may have lost
it); another run takes over a lock not renewed for 60% of it (or at once, where its run was a
process of the same machine that ended)."""


class LockHeld(Exception):
    """The lock object exists already (its conditional create was refused)."""


class LockLost(Exception):
    """The lock object is no longer the version this run wrote (or is gone)."""


class LockRead(NamedTuple):
    """The lock object as read: its bytes, its version, and the seconds since it was written."""

    body: bytes
    tag: str
    age: float


class LockObject(Protocol):
    """The four requests a lease makes of its lock object (OSError where one fails)."""

    def create(self, body: bytes) -> str:
        """Written where none exists; its version. `LockHeld` where one exists."""
        ...

    def replace(self, body: bytes, tag: str) -> str:
        """Written where it is the version ``tag``; its new version. `LockLost` where not."""
        ...

    def read(self) -> LockRead: ...

    def remove(self, tag: str) -> None:
        """Removed where it is the version ``tag``."""
        ...


def _clock() -> float:
    """Seconds on a clock that counts a suspended machine's time too (where the system has one)."""
    return time.clock_gettime(getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC))


class Lease:
    """A run's hold on a store's lock object (at ``path``, for messages): created where none
    exists, renewed and finally removed only while it is the version this run wrote. One left by a
    killed run is taken over at once where that run was a process of this machine (it is gone),
    else once 60% of the lease passed since it was last written.

    A run paused longer than half the lease (a stopped process, a frozen machine) stops at its next
    write (`problems.StoreBusyError`): another run may hold the lock by then. What remains is the
    window of one request (a pause between the check and the request it allows), where the writes'
    own conditions hold.
    """

    def __init__(self, lock: LockObject, path: str) -> None:
        self.lock, self.path = lock, path
        self.tag: str | None = None
        self.renewed = 0.0
        self.lost: str | None = None
        self._stop = threading.Event()
        self._renewing: threading.Thread | None = None

    @staticmethod
    def _body() -> bytes:
        return json.dumps(
            {"tool": "numcodecs-bytes", "lease_seconds": LEASE, **_this_process()}
        ).encode()

    def acquire(self) -> None:
        """The lock taken, or `problems.StoreBusyError` where another run holds it."""
        started = _clock()
        try:
            self.tag = self.lock.create(self._body())
        except LockHeld:
            self.tag = self._take_over()
        self.renewed = started
        self._renewing = threading.Thread(
            target=self._renew, name="numcodecs-bytes-lease", daemon=True
        )
        self._renewing.start()

    def _take_over(self) -> str:
        """The lock object of a run that ended without removing it, made this run's: where that run
        was a process of this machine that has ended, or where 60% of the lease has passed since it
        was last renewed (its run, if it still runs, writes nothing more after half: see
        `check`)."""
        found = self.lock.read()
        holder = _parsed(found.body)
        # later than its run stops writing (half the lease): a margin for clocks' rates
        lapses = 0.6 * LEASE
        if found.age <= lapses and not _ended_here(holder):
            where = (
                f" (pid {holder['pid']} on {holder['host']})"
                if {"pid", "host"} <= set(holder)
                else ""
            )
            raise StoreBusyError(
                f"{self.path}: another numcodecs-bytes run is working on this store{where}: its "
                f"lock was renewed {max(found.age, 0):.0f} s ago; where that run has stopped, the "
                f"lock lapses {lapses - found.age:.0f} s from now"
            )
        try:
            return self.lock.replace(self._body(), found.tag)
        except LockLost:
            raise StoreBusyError(
                f"{self.path}: another numcodecs-bytes run took this store's lock"
            ) from None

    def _renew(self) -> None:
        while not self._stop.wait(LEASE / 4):
            started = _clock()
            try:
                assert self.tag is not None
                self.tag = self.lock.replace(self._body(), self.tag)
                self.renewed = started
            except LockLost:
                self.lost = "another run took this store's lock"
                return
            except OSError:
                pass  # the server busy, the network: the next renewal tries again

    def check(self) -> None:
        """Raise `problems.StoreBusyError` where this run may no longer hold the lock."""
        if self.lost is None and _clock() - self.renewed > LEASE / 2:
            self.lost = (
                f"this run's lock was not renewed for {_clock() - self.renewed:.0f} s (the run was "
                "paused?)"
            )
        if self.lost is not None:
            raise StoreBusyError(
                f"{self.path}: {self.lost}: stopped, nothing more written; run again to finish"
            )

    def release(self) -> None:
        """The renewals stopped and the lock object removed, where it is still this run's."""
        self._stop.set()
        if self._renewing is not None:
            self._renewing.join()
        if self.tag is not None and self.lost is None:
            # taken over meanwhile, or the server unreachable: it lapses on its own
            with suppress(OSError):
                self.lock.remove(self.tag)


class LeaseHold:
    """A backend's hold on its store's lock: `during` a run it holds the lease on the lock object
    ``lock_object`` makes for a path; `check`, before each write, raises where it was lost."""

    def __init__(self, lock_object: Callable[[str], LockObject]) -> None:
        self._lock_object = lock_object
        self.lease: Lease | None = None  # while a run holds it

    @contextmanager
    def during(self, top: str) -> Iterator[None]:
        """The lock of the store whose topmost node is ``top`` (`LOCK_NAME` there) held for the
        block; a block that ends after the lock was lost ends in `problems.StoreBusyError` (what it
        found may be the other run's doing: its failures, its reports)."""
        path = f"{top}/{LOCK_NAME}"
        lease = Lease(self._lock_object(path), path)
        lease.acquire()
        self.lease = lease
        try:
            yield
            lease.check()
        finally:
            self.lease = None
            lease.release()

    def check(self) -> None:
        """`problems.StoreBusyError` where the run may no longer hold the lock (`Lease.check`)."""
        if self.lease is not None:
            self.lease.check()


def _this_process() -> dict[str, Any]:
    """What tells this process apart from every other: its machine, that machine's boot, its pid and
    when it started (a pid is used again by later processes)."""
    return {
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "pid": os.getpid(),
        "started": _started(os.getpid()),
    }


def _ended_here(holder: Mapping[str, Any]) -> bool:
    """Whether the process that wrote a lock object was one of this machine, since its last boot,
    that has ended (where this cannot be told: False)."""
    me = _this_process()
    if not all(holder.get(key) == me[key] and me[key] is not None for key in ("host", "boot")):
        return False
    pid = holder.get("pid")
    return (
        isinstance(pid, int)
        and pid != me["pid"]
        and (_started(pid) is None or _started(pid) != holder.get("started"))
    )


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """When a process of this machine started, in clock ticks since boot; None where there is no
    such process (or the system does not say)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _parsed(data: Any) -> dict[str, Any]:
    try:
        found = json.loads(data)
    except (TypeError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
