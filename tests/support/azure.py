"""The Azure tests' server: Azurite (Microsoft's emulator of Azure Blob Storage, from npm) on a
loopback port, and an empty container on it.

Azurite is found where ``AZURITE_BLOB`` names its ``azurite-blob`` command (CI
installs it: ``npm install azurite@3``), else on ``PATH``; where neither has
it, the Azure tests are skipped with the reason (and CI fails: see
``.ci/run``). The tools reach it as users reach Azure: a connection string in
``AZURE_STORAGE_CONNECTION_STRING``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's one account and its well-known key (published in Azurite's README)."""


def connection_string(endpoint: str) -> str:
    """The connection string of Azurite's account at ``endpoint`` (``http://127.0.0.1:PORT``)."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint={endpoint}/{ACCOUNT};"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def azurite_endpoint() -> Iterator[str]:
    """For a fixture: Azurite's blob service on a loopback port, for the session."""
    command = os.environ.get("AZURITE_BLOB") or shutil.which("azurite-blob")
    if not command:
        if os.environ.get("CI"):
            pytest.fail("AZURITE_BLOB is not set on CI: .ci/run installs Azurite")
        pytest.skip(
            "Azurite is not installed (npm install azurite@3; AZURITE_BLOB=its azurite-blob)"
        )
    port = _free_port()
    server = subprocess.Popen(
        [
            command,
            "--inMemoryPersistence",
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--skipApiVersionCheck",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.mkdtemp(prefix="azurite-"),  # where it writes its debug log, if any
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"Azurite did not start on port {port}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def azure_store(endpoint: str, container: str, prefix: str | None = None) -> Any:
    """An obstore store of ``container`` on Azurite at ``endpoint`` (below ``prefix``, if given):
    to put and read objects directly."""
    from obstore.store import AzureStore

    return AzureStore(
        container,
        prefix=prefix,
        account_name=ACCOUNT,
        account_key=KEY,
        endpoint=f"{endpoint}/{ACCOUNT}",
        client_options={"allow_http": True},
    )


def empty_container(endpoint: str, name: str, monkeypatch: Any) -> Any:
    """``name`` made an empty container on Azurite, its connection string in the environment for
    the test's length; an obstore store of it."""
    from azure.storage.blob import BlobServiceClient

    text = connection_string(endpoint)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", text)
    container = BlobServiceClient.from_connection_string(text).get_container_client(name)
    if container.exists():
        container.delete_container()
    container.create_container()
    return azure_store(endpoint, name)


def upload(store: Any, local: Path, prefix: str) -> None:
    """Every file below ``local`` put at ``prefix/<its path>``."""
    import obstore

    for path in sorted(local.rglob("*")):
        if path.is_file():
            obstore.put(store, f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())


def objects(store: Any) -> dict[str, bytes]:
    """Every object of the container, by key."""
    import obstore

    return {
        entry["path"]: bytes(obstore.get(store, entry["path"]).bytes())
        for page in obstore.list(store)
        for entry in page
    }


def zarr_store(endpoint: str, container: str, prefix: str) -> Any:
    """zarr-python's own `ObjectStore` over ``container/prefix``: the reader of the values."""
    from zarr.storage import ObjectStore

    return ObjectStore(azure_store(endpoint, container, prefix), read_only=True)
