"""The storage options users give zarr and xarray (fsspec's spellings), as obstore's configuration:
one table per object store, and an error for an option no entry maps, before any request.

Azure (``az://``, ``abfs://``, ``abfss://``) goes through obstore. Its
credentials come as Azure users have them: the options below, else the
environment (obstore reads ``AZURE_STORAGE_ACCOUNT_NAME``,
``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_KEY``,
``AZURE_STORAGE_USE_EMULATOR`` and the other ``AZURE_*`` names itself; a
``AZURE_STORAGE_CONNECTION_STRING`` is read here, as adlfs reads it), else
obstore's own chain (a managed identity, the Azure CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from .options import StoreOptions

__all__ = ["AZURE_OPTIONS", "AzureLocation", "azure_location", "parsed_connection_string"]


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"storage option {name} must be a non-empty string, got {value!r}")
    return value


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise ValueError(f"storage option {name} must be true or false, got {value!r}")


def _same(key: str) -> Callable[[str, Any], dict[str, Any]]:
    return lambda name, value: {key: _text(name, value)}


def _connection(name: str, value: Any) -> dict[str, Any]:
    return parsed_connection_string(_text(name, value))


AZURE_OPTIONS: Mapping[str, Callable[[str, Any], dict[str, Any]]] = {
    # adlfs's names
    "account_name": _same("account_name"),
    "account_key": _same("account_key"),
    "sas_token": _same("sas_key"),
    "connection_string": _connection,
    "tenant_id": _same("tenant_id"),
    "client_id": _same("client_id"),
    "client_secret": _same("client_secret"),
    "anon": lambda name, value: {"skip_signature": _flag(name, value)},
    # obstore's own names for what adlfs does not name
    "endpoint": _same("endpoint"),
    "use_emulator": lambda name, value: {"use_emulator": _flag(name, value)},
    "use_azure_cli": lambda name, value: {"use_azure_cli": _flag(name, value)},
}
"""Each storage option an Azure URL takes (adlfs's name where it has one), and obstore's
configuration it gives."""


def parsed_connection_string(text: str) -> dict[str, Any]:
    """An Azure Storage connection string as obstore's configuration (the account, its key or SAS,
    the blob endpoint).

    Examples
    --------
    >>> parsed_connection_string(
    ...     "DefaultEndpointsProtocol=http;AccountName=acc;AccountKey=a2V5;"
    ...     "BlobEndpoint=http://127.0.0.1:10000/acc;"
    ... )
    {'account_name': 'acc', 'account_key': 'a2V5', 'endpoint': 'http://127.0.0.1:10000/acc'}
    >>> parsed_connection_string("AccountKey=a2V5")
    Traceback (most recent call last):
    ...
    ValueError: an Azure connection string needs AccountName (or BlobEndpoint), found AccountKey
    """
    fields = dict(part.split("=", 1) for part in text.strip().strip(";").split(";") if "=" in part)
    config: dict[str, Any] = {}
    for field, key in (
        ("AccountName", "account_name"),
        ("AccountKey", "account_key"),
        ("SharedAccessSignature", "sas_key"),
        ("BlobEndpoint", "endpoint"),
    ):
        if fields.get(field):
            config[key] = fields[field]
    if "account_name" not in config and "endpoint" not in config:
        raise ValueError(
            "an Azure connection string needs AccountName (or BlobEndpoint), found "
            + (", ".join(sorted(fields)) or "nothing")
        )
    return config


class AzureLocation(NamedTuple):
    """An Azure URL read: its container, the path inside it, and obstore's configuration and client
    options for it."""

    container: str
    path: str
    config: dict[str, Any]
    client_options: dict[str, Any]


def azure_location(
    url: str, options: StoreOptions, environ: Mapping[str, str] = os.environ
) -> AzureLocation:
    """``url`` (``az://container/path``, ``abfs[s]://container/path``, or
    ``abfs[s]://container@account.dfs.core.windows.net/path``) with the ``storage_options`` of
    ``options``, as obstore takes them.

    Raises
    ------
    ValueError
        For an option no entry of `AZURE_OPTIONS` maps (naming the ones that do), a value of the
        wrong kind, or a URL without a container.

    Examples
    --------
    >>> given = StoreOptions(storage_options={"account_name": "acc", "anon": "true"})
    >>> azure_location("az://box/a/b", given, environ={})
    AzureLocation(container='box', path='a/b', config={'account_name': 'acc', \
'skip_signature': True}, client_options={})
    >>> given = StoreOptions(storage_options={"endpoint_url": "http://x"})
    >>> azure_location("az://box", given, environ={})
    Traceback (most recent call last):
    ...
    ValueError: storage option endpoint_url is not one an Azure URL takes; it takes account_name, \
account_key, sas_token, connection_string, tenant_id, client_id, client_secret, anon, endpoint, \
use_emulator, use_azure_cli
    """
    parts = urlsplit(url)
    container, _, host = parts.netloc.partition("@")
    if not container:
        raise ValueError(f"{url}: an Azure URL names a container (az://CONTAINER/path)")
    config: dict[str, Any] = {}
    if host:
        config["account_name"] = host.split(".", 1)[0]
    storage_options = options.storage_options or {}
    given: dict[str, Any] = {}
    if not ({"connection_string", "account_name"} & set(storage_options) or host) and environ.get(
        "AZURE_STORAGE_CONNECTION_STRING"
    ):
        # read as adlfs reads it, first: an option the caller gives wins over it
        given["connection_string"] = environ["AZURE_STORAGE_CONNECTION_STRING"]
    given |= storage_options
    for name, value in given.items():
        entry = AZURE_OPTIONS.get(name)
        if entry is None:
            raise ValueError(
                f"storage option {name} is not one an Azure URL takes; it takes "
                + ", ".join(AZURE_OPTIONS)
            )
        config |= entry(name, value)
    # plain HTTP only to an endpoint named http:// (an emulator), here or in obstore's environment
    endpoint = str(
        config.get("endpoint")
        or environ.get("AZURE_STORAGE_ENDPOINT")
        or environ.get("AZURE_ENDPOINT")
        or ""
    )
    plain = endpoint.startswith("http://") or environ.get("AZURE_ALLOW_HTTP", "") in ("true", "1")
    client_options = {"allow_http": True} if plain else {}
    return AzureLocation(container, parts.path.strip("/"), config, client_options)
