"""The S3 tests' helpers: an empty bucket on moto's server, and a fault-injecting HTTP proxy in
front of it.

    with fault_proxy(moto_endpoint) as proxy:
        proxy.add(Fault("lost", method="PUT", key=r"zarr\\.json$"))
        ...  # point s3fs at proxy.endpoint

Each request is read whole from the client (keep-alive kept), matched against
the faults in order, and forwarded to moto on a connection of its own. What a
fault does to the request it matches, ``times`` times (then it is spent):

- ``error``: answer ``status`` (503 by default) with an S3 error body; moto never sees it.
- ``reset``: close the connection without an answer; moto never sees it.
- ``truncate``: forward, then send the answer's headers and half its body, and close.
- ``delay``: wait ``seconds``, then forward.
- ``hang``: never answer (the connection stays open until the proxy stops).
- ``lost``: forward (moto acts), then answer 500 as if the answer were lost.
- ``omit``: forward a listing, and drop from its answer the keys matching ``omit``.
- ``before``: call ``hook()``, then forward (another writer acting at that moment).

``proxy.requests`` records (method, key) of every request seen, faulted or not, and
``proxy.sent`` counts the bytes of their bodies.
`empty_bucket` gives a test an empty bucket on the server, seen through s3fs directly.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""What moto takes, in the environment (of the test process and of the tools the tests run)."""


def moto_endpoint() -> Iterator[str]:
    """For a fixture: moto's S3 API server on a loopback port (the one the store tools' benchmark
    starts)."""
    from support.stack import benchmark

    with benchmark("store_tools").moto_server() as url:
        yield url


def empty_bucket(endpoint: str, monkeypatch: Any, bucket: str) -> Iterator[Any]:
    """For a fixture: ``bucket`` made empty on the server at ``endpoint``, seen through s3fs
    directly; fsspec's s3 settings point at the server and the credentials are in the environment,
    for the test's length."""
    import fsspec
    import s3fs

    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint})
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
    if fs.exists(bucket):
        fs.rm(bucket, recursive=True)
    fs.mkdir(bucket)
    fs.invalidate_cache()
    yield fs
    fs.rm(bucket, recursive=True)


_ERROR_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b"<Error><Code>{code}</Code><Message>injected</Message></Error>"
)


@dataclass
class Fault:
    """One fault: what it does, to which requests (``method``, and a regular expression on the key),
    how often."""

    action: str
    method: str | None = None
    key: str = ""
    times: int = 1
    status: int = 503
    seconds: float = 0.0
    omit: str = ""
    hook: Callable[[], None] | None = None
    hits: int = field(default=0)

    def matches(self, method: str, key: str) -> bool:
        return (self.method is None or self.method == method) and re.search(
            self.key, key
        ) is not None


@dataclass
class _Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def key(self) -> str:
        """The object key (``bucket/key``), or for a listing ``bucket?prefix``."""
        url = urlsplit(self.target)
        return unquote(url.path.lstrip("/")) + (f"?{unquote(url.query)}" if url.query else "")

    def raw(self) -> bytes:
        headers = [(name, value) for name, value in self.headers if name.lower() != "connection"]
        lines = [
            f"{self.method} {self.target} HTTP/1.1",
            *(f"{n}: {v}" for n, v in headers),
            "Connection: close",
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


class FaultProxy:
    """The proxy's state: its faults, the requests it saw, its endpoint (see `fault_proxy`)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self.sent = 0  # bytes of the requests' bodies: what the clients sent
        self.endpoint = ""
        self._lock = threading.Lock()
        self._hanging: list[asyncio.StreamWriter] = []

    def add(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def _fault_for(self, request: _Request) -> Fault | None:
        with self._lock:
            self.requests.append((request.method, request.key))
            self.sent += len(request.body)
            for fault in self.faults:
                if fault.hits < fault.times and fault.matches(request.method, request.key):
                    fault.hits += 1
                    return fault
        return None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader, writer)) is not None:
                fault = self._fault_for(request)
                action = fault.action if fault else "forward"
                if action == "error":
                    assert fault is not None
                    writer.write(
                        _error(fault.status, _CODES.get(fault.status, "ServiceUnavailable"))
                    )
                elif action == "reset":
                    writer.transport.abort()
                    return
                elif action == "hang":
                    self._hanging.append(writer)
                    return
                else:
                    if action == "delay":
                        assert fault is not None
                        await asyncio.sleep(fault.seconds)
                    if action == "before":
                        assert fault is not None and fault.hook is not None
                        await asyncio.get_running_loop().run_in_executor(None, fault.hook)
                    answer = await self._forward(request)
                    if action == "truncate":
                        head, _, body = answer.partition(b"\r\n\r\n")
                        writer.write(head + b"\r\n\r\n" + body[: len(body) // 2])
                        await writer.drain()
                        writer.transport.abort()
                        return
                    if action == "lost":
                        answer = _error(500, "InternalError")
                    if action == "omit":
                        assert fault is not None
                        answer = _without_keys(answer, fault.omit)
                    writer.write(answer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            if writer not in self._hanging:
                writer.close()

    async def _forward(self, request: _Request) -> bytes:
        """moto's whole answer to ``request``, made a keep-alive answer with an exact length."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        try:
            writer.write(request.raw())
            await writer.drain()
            answer = await reader.read()
        finally:
            writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        status, *headers = head.decode("latin-1").split("\r\n")
        if any(h.lower().startswith("transfer-encoding: chunked") for h in headers):
            body = _unchunked(body)
        kept = [
            h
            for h in headers
            if h.split(":")[0].lower() not in ("connection", "content-length", "transfer-encoding")
        ]
        if request.method == "HEAD":
            length = [h for h in headers if h.lower().startswith("content-length:")]
            kept += length
        else:
            kept.append(f"Content-Length: {len(body)}")
        return ("\r\n".join([status, *kept, "Connection: keep-alive"]) + "\r\n\r\n").encode(
            "latin-1"
        ) + body


def _unchunked(body: bytes) -> bytes:
    out, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2 :]
    return out


async def _read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = [
        (name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines)
    ]
    fields = {name.lower(): value for name, value in headers}
    # botocore's PUTs: the body comes once asked for
    if fields.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        headers = [(name, value) for name, value in headers if name.lower() != "expect"]
    if fields.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
        headers = [(n, v) for n, v in headers if n.lower() != "transfer-encoding"] + [
            ("Content-Length", str(len(body)))
        ]
    else:
        body = await reader.readexactly(int(fields.get("content-length", "0")))
    return _Request(method, target, headers, body)


_CODES = {501: "NotImplemented"}
"""The S3 error code of an injected status, where not ``ServiceUnavailable``."""


def _error(status: int, code: str) -> bytes:
    body = _ERROR_BODY.replace(b"{code}", code.encode())
    reason = {500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Content-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
    )
    return (head + "Connection: keep-alive\r\n\r\n").encode("latin-1") + body


def _without_keys(answer: bytes, pattern: str) -> bytes:
    """A listing's answer without the entries whose key matches ``pattern``."""
    head, _, body = answer.partition(b"\r\n\r\n")

    def kept_entry(entry: re.Match[str]) -> str:
        key = re.search(r"<Key>(.*?)</Key>", entry.group(0))
        return "" if key is not None and re.search(pattern, key.group(1)) else entry.group(0)

    kept = re.sub(r"<Contents>.*?</Contents>", kept_entry, body.decode("utf-8"), flags=re.S)
    count = len(re.findall(r"<Contents>", kept))
    kept = re.sub(r"<KeyCount>\d+</KeyCount>", f"<KeyCount>{count}</KeyCount>", kept)
    data = kept.encode("utf-8")
    head = re.sub(rb"Content-Length: \d+", f"Content-Length: {len(data)}".encode(), head)
    return head + b"\r\n\r\n" + data


@contextmanager
def fault_proxy(endpoint: str) -> Iterator[FaultProxy]:
    """A `FaultProxy` in front of the S3 server at ``endpoint`` (``http://127.0.0.1:PORT``), on a
    thread of its own; its ``endpoint`` is where clients connect."""
    proxy = FaultProxy(int(urlsplit(endpoint).port or 80))
    loop = asyncio.new_event_loop()
    started = threading.Event()
    server_box: list[Any] = []

    async def serve() -> None:
        server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
        server_box.append(server)
        proxy.endpoint = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        with suppress(asyncio.CancelledError):
            loop.run_until_complete(serve())

    thread = threading.Thread(target=run, daemon=True, name="s3-fault-proxy")
    thread.start()
    started.wait(10)
    try:
        yield proxy
    finally:

        def stop() -> None:
            for writer in proxy._hanging:
                writer.transport.abort()
            for server in server_box:
                server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(stop)
        thread.join(10)


def tool_code(lock: bool = True, lease: float | None = None, *settings: str) -> str:
    """Code for ``python -c`` that runs ``numcodecs-bytes`` (its arguments follow the code) with no
    lock on S3 (``lock=False``: as where no lock can be had), or with a lease of ``lease`` seconds
    on the lock; ``settings``, lines of code, run before it (``object_packing.PART_BYTES = 4096``:
    its module imported)."""
    lines = [
        "import contextlib, sys",
        "from numcodecs_bytes.store import lease, object_packing, s3_objects",
        *settings,
    ]
    if not lock:
        lines.append("s3_objects.S3Objects.lock = lambda self, top: contextlib.nullcontext()")
    if lease is not None:
        lines.append(f"lease.LEASE = {lease!r}")
    lines += ["from numcodecs_bytes.cli import main", "sys.exit(main(sys.argv[1:]))"]
    return "\n".join(lines)


def operations(requests: list[tuple[str, str]]) -> dict[str, int]:
    """The S3 operations of recorded requests (`FaultProxy.requests`), counted by name, from each
    request's method and query."""
    counts: dict[str, int] = {}
    for method, key in requests:
        query = key.partition("?")[2]
        names = {part.split("=", 1)[0] for part in query.split("&") if part}
        if method == "GET" and "list-type" in names:
            name = "ListObjectsV2"
        elif "uploads" in names:
            name = "ListMultipartUploads" if method == "GET" else "CreateMultipartUpload"
        elif "uploadId" in names:
            name = {"PUT": "UploadPart", "POST": "CompleteMultipartUpload"}.get(
                method, "AbortMultipartUpload"
            )
        elif method == "POST" and "delete" in names:
            name = "DeleteObjects"
        else:
            name = {
                "GET": "GetObject",
                "HEAD": "HeadObject",
                "PUT": "PutObject",
                "DELETE": "DeleteObject",
            }[method]
        counts[name] = counts.get(name, 0) + 1
    return counts
