"""The storage options S3 users give zarr and xarray (s3fs's names), each as obstore's
configuration and botocore's client arguments; the environment and fsspec's own configuration
beneath them."""

from __future__ import annotations

from typing import Any

import pytest

from numcodecs_bytes.store import StoreOptions
from numcodecs_bytes.store.cloud_options import S3_OPTIONS, s3_location


def located(options: dict[str, Any], **more: Any) -> Any:
    return s3_location(
        "s3://box/a/b",
        StoreOptions(storage_options=options),
        environ=more.get("environ", {}),
        fsspec_defaults=more.get("fsspec_defaults", {}),
    )


@pytest.mark.parametrize(
    ("options", "config", "botocore"),
    [
        (
            {"endpoint_url": "https://s3.example.org"},
            {"endpoint": "https://s3.example.org"},
            {"endpoint_url": "https://s3.example.org"},
        ),
        (
            {"key": "K", "secret": "S", "token": "T"},
            {"access_key_id": "K", "secret_access_key": "S", "session_token": "T"},
            {"aws_access_key_id": "K", "aws_secret_access_key": "S", "aws_session_token": "T"},
        ),
        ({"anon": True}, {"skip_signature": True}, {}),
        ({"anon": "false"}, {"skip_signature": False}, {}),
        ({"region_name": "eu-west-1"}, {"region": "eu-west-1"}, {"region_name": "eu-west-1"}),
        (
            {"client_kwargs": {"endpoint_url": "https://x.org", "region_name": "us-west-2"}},
            {"endpoint": "https://x.org", "region": "us-west-2"},
            {"endpoint_url": "https://x.org", "region_name": "us-west-2"},
        ),
        ({"requester_pays": True}, {"request_payer": True}, {}),
    ],
)
def test_each_option_maps_to_obstore_and_botocore(
    options: dict[str, Any], config: dict[str, Any], botocore: dict[str, Any]
) -> None:
    location = located(options)
    assert (location.bucket, location.path) == ("box", "a/b")
    assert location.config == config
    assert location.botocore == botocore
    assert location.client_options == {}  # https: no plain HTTP


def test_every_mapping_is_tested() -> None:
    tested = {"endpoint_url", "key", "secret", "token", "anon", "region_name", "client_kwargs"}
    assert set(S3_OPTIONS) == tested | {"requester_pays", "profile"}


def test_a_profile_is_kept_for_boto3_and_botocore() -> None:
    location = located({"profile": "work"})
    assert location.profile == "work" and location.config == {}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"account_name": "a"}, "storage option account_name is not one an S3 URL takes"),
        ({"config_kwargs": {}}, "storage option config_kwargs is not one an S3 URL takes"),
        ({"client_kwargs": {"verify": False}}, "storage option client_kwargs['verify'] is not"),
        ({"client_kwargs": "x"}, "storage option client_kwargs must be a mapping"),
        ({"anon": "maybe"}, "storage option anon must be true or false, got 'maybe'"),
        ({"key": ""}, "storage option key must be a non-empty string"),
    ],
)
def test_an_option_without_a_mapping_or_of_the_wrong_kind_is_refused(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        located(options)


def test_a_url_without_a_bucket_is_refused() -> None:
    with pytest.raises(ValueError, match="an S3 URL names a bucket"):
        s3_location("s3:///a", StoreOptions(), environ={}, fsspec_defaults={})


def test_plain_http_only_to_an_endpoint_named_http() -> None:
    assert located({"endpoint_url": "http://127.0.0.1:9000"}).client_options == {"allow_http": True}
    assert located({}, environ={"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}).client_options == {
        "allow_http": True
    }
    assert located({}, environ={"AWS_ENDPOINT_URL": "https://x.org"}).client_options == {}


def test_botocores_s3_endpoint_variable_reaches_obstore_too() -> None:
    """obstore reads AWS_ENDPOINT_URL but not botocore's AWS_ENDPOINT_URL_S3: passed on to it."""
    location = located({}, environ={"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:2"})
    assert location.config == {"endpoint": "http://127.0.0.1:2"}
    assert location.client_options == {"allow_http": True}


def test_fsspecs_configuration_is_beneath_the_options() -> None:
    """As s3fs takes them: FSSPEC_S3_ENDPOINT_URL (fsspec's configuration) where no option says
    otherwise, an option over it; its own options checked as the caller's are."""
    defaults = {"endpoint_url": "http://from-fsspec:1", "anon": True}
    location = located({"endpoint_url": "https://given.org"}, fsspec_defaults=defaults)
    assert location.config == {"endpoint": "https://given.org", "skip_signature": True}
    location = located({}, fsspec_defaults=defaults)
    assert location.config["endpoint"] == "http://from-fsspec:1"
    with pytest.raises(ValueError, match="storage option use_ssl is not one an S3 URL takes"):
        located({}, fsspec_defaults={"use_ssl": False})


def test_fsspecs_environment_variables_are_read_as_fsspec_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fsspec = pytest.importorskip("fsspec")
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": "http://from-conf:3"})
    location = s3_location("s3://box", StoreOptions(), environ={})
    assert location.config == {"endpoint": "http://from-conf:3"}
