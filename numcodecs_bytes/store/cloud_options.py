"""The storage options users give zarr and xarray (fsspec's spellings), as obstore's configuration:
one table per object store, and an error for an option no entry maps, before any request.

S3 (``s3://``, ``s3a://``) and Azure (``az://``, ``abfs://``, ``abfss://``)
go through obstore. Credentials come as each cloud's users have them:

- S3: the options below (s3fs's names), over fsspec's own configuration
  for ``s3`` (``FSSPEC_S3_ENDPOINT_URL`` and the like, as s3fs reads it),
  else the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
  ``AWS_ENDPOINT_URL``: read by obstore and botocore both), else obstore's
  own chain (web identity, instance roles). A named ``profile`` is read by
  boto3 (it must be installed).
- Azure: the options below (adlfs's names), else the environment (obstore
  reads ``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURE_STORAGE_ACCOUNT_KEY``,
  ``AZURE_STORAGE_SAS_KEY``, ``AZURE_STORAGE_USE_EMULATOR`` and the other
  ``AZURE_*`` names itself; a ``AZURE_STORAGE_CONNECTION_STRING`` is read
  here, as adlfs reads it), else obstore's own chain (a managed identity, the
  Azure CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from .options import StoreOptions

__all__ = [
    "AZURE_OPTIONS",
    "S3_OPTIONS",
    "AzureLocation",
    "S3Location",
    "azure_location",
    "parsed_connection_string",
    "s3_location",
]


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


def _switch(key: str) -> Callable[[str, Any], dict[str, Any]]:
    return lambda name, value: {key: _flag(name, value)}


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
    "anon": _switch("skip_signature"),
    # obstore's own names for what adlfs does not name
    "endpoint": _same("endpoint"),
    "use_emulator": _switch("use_emulator"),
    "use_azure_cli": _switch("use_azure_cli"),
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


def _mapped(
    given: Mapping[str, Any],
    table: Mapping[str, Callable[[str, Any], dict[str, Any]]],
    what: str,
) -> dict[str, Any]:
    """Storage options as obstore's configuration, by ``table``; an option it has no entry for
    is a ValueError naming the ones it has."""
    config: dict[str, Any] = {}
    for name, value in given.items():
        entry = table.get(name)
        if entry is None:
            raise ValueError(
                f"storage option {name} is not one {what} takes; it takes " + ", ".join(table)
            )
        config |= entry(name, value)
    return config


def _plain_http(
    config: Mapping[str, Any], environ: Mapping[str, str], endpoints: tuple[str, ...], allow: str
) -> dict[str, Any]:
    """obstore's client options: plain HTTP only to an endpoint named ``http://`` (a local server,
    an emulator), in the configuration or in the environment (``endpoints``, then ``allow``)."""
    endpoint = str(
        config.get("endpoint") or next((environ[n] for n in endpoints if environ.get(n)), "")
    )
    plain = endpoint.startswith("http://") or environ.get(allow, "") in ("true", "1")
    return {"allow_http": True} if plain else {}


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
    config |= _mapped(given | dict(storage_options), AZURE_OPTIONS, "an Azure URL")
    client_options = _plain_http(
        config, environ, ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"), "AZURE_ALLOW_HTTP"
    )
    return AzureLocation(container, parts.path.strip("/"), config, client_options)


def _client_kwargs(name: str, value: Any) -> dict[str, Any]:
    """s3fs's ``client_kwargs`` (botocore's client arguments): the endpoint and region in them."""
    if not isinstance(value, Mapping):
        # a ValueError, as every option's wrong value: one line before any request
        raise ValueError(f"storage option {name} must be a mapping, got {value!r}")  # noqa: TRY004
    config: dict[str, Any] = {}
    for key, item in value.items():
        entry = _S3_CLIENT_KWARGS.get(key)
        if entry is None:
            raise ValueError(
                f"storage option {name}[{key!r}] is not one an S3 URL takes; it takes "
                + ", ".join(_S3_CLIENT_KWARGS)
            )
        config |= entry(f"{name}[{key!r}]", item)
    return config


_S3_CLIENT_KWARGS: Mapping[str, Callable[[str, Any], dict[str, Any]]] = {
    "endpoint_url": _same("endpoint"),
    "region_name": _same("region"),
}

S3_OPTIONS: Mapping[str, Callable[[str, Any], dict[str, Any]]] = {
    # s3fs's names
    "endpoint_url": _same("endpoint"),
    "key": _same("access_key_id"),
    "secret": _same("secret_access_key"),
    "token": _same("session_token"),
    "anon": _switch("skip_signature"),
    "region_name": _same("region"),
    "profile": _same("profile"),
    "client_kwargs": _client_kwargs,
    "requester_pays": _switch("request_payer"),
}
"""Each storage option an S3 URL takes (s3fs's names), and obstore's configuration it gives (a
``profile`` is read by boto3: not obstore's own)."""

_BOTOCORE_NAMES = {
    "endpoint": "endpoint_url",
    "access_key_id": "aws_access_key_id",
    "secret_access_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "region": "region_name",
}


class S3Location(NamedTuple):
    """An S3 URL read: its bucket, the path inside it, obstore's configuration and client options
    for it, and the profile to read credentials from (None: obstore's own chain)."""

    bucket: str
    path: str
    config: dict[str, Any]
    client_options: dict[str, Any]
    profile: str | None

    @property
    def botocore(self) -> dict[str, Any]:
        """The same as botocore's client arguments (what obstore cannot do goes through
        botocore): the endpoint, keys and region given; botocore reads the rest from the
        environment as obstore does."""
        return {
            _BOTOCORE_NAMES[key]: value
            for key, value in self.config.items()
            if key in _BOTOCORE_NAMES
        }


def s3_location(
    url: str,
    options: StoreOptions,
    environ: Mapping[str, str] = os.environ,
    fsspec_defaults: Mapping[str, Any] | None = None,
) -> S3Location:
    """``url`` (``s3://bucket/path``) with the ``storage_options`` of ``options`` over
    ``fsspec_defaults`` (fsspec's configuration for ``s3``, read where None), as obstore takes
    them.

    Raises
    ------
    ValueError
        For an option no entry of `S3_OPTIONS` maps (naming the ones that do), a value of the wrong
        kind, or a URL without a bucket.

    Examples
    --------
    >>> given = StoreOptions(storage_options={"endpoint_url": "http://127.0.0.1:9", "anon": True})
    >>> s3_location("s3://box/a/b", given, environ={}, fsspec_defaults={})
    S3Location(bucket='box', path='a/b', config={'endpoint': 'http://127.0.0.1:9', \
'skip_signature': True}, client_options={'allow_http': True}, profile=None)
    >>> given = StoreOptions(storage_options={"account_name": "acc"})
    >>> s3_location("s3://box", given, environ={}, fsspec_defaults={})
    Traceback (most recent call last):
    ...
    ValueError: storage option account_name is not one an S3 URL takes; it takes endpoint_url, \
key, secret, token, anon, region_name, profile, client_kwargs, requester_pays
    """
    parts = urlsplit(url)
    if not parts.netloc:
        raise ValueError(f"{url}: an S3 URL names a bucket (s3://BUCKET/path)")
    if fsspec_defaults is None:
        fsspec_defaults = _fsspec_defaults("s3")
    given = {**fsspec_defaults, **(options.storage_options or {})}
    config = _mapped(given, S3_OPTIONS, "an S3 URL")
    profile = config.pop("profile", None)
    client_options = _plain_http(
        config,
        environ,
        ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
        "AWS_ALLOW_HTTP",
    )
    if environ.get("AWS_ENDPOINT_URL_S3") and "endpoint" not in config:
        config["endpoint"] = environ["AWS_ENDPOINT_URL_S3"]  # botocore's name obstore does not read
    return S3Location(parts.netloc, parts.path.strip("/"), config, client_options, profile)


def _fsspec_defaults(protocol: str) -> Mapping[str, Any]:
    """fsspec's configuration for ``protocol`` (its ``FSSPEC_*`` variables and files), as s3fs
    would take it; none where fsspec is not installed."""
    try:
        import fsspec.config
    except ImportError:
        return {}
    return dict(fsspec.config.conf.get(protocol, {}))
