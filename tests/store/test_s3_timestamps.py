"""S3's timestamps read by the standard library (`store.s3_timestamps`): the instants botocore's own
reader gives, and only on the sessions the store tools made."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("s3fs", reason="object stores need s3fs (the interop extra)")
from botocore.utils import parse_timestamp
from support.s3 import empty_bucket

from numcodecs_bytes.store import StoreOptions, open_store
from numcodecs_bytes.store.s3_timestamps import timestamp

BUCKET = "timestamps"

INSTANTS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(instant=INSTANTS, offset=st.integers(-14 * 60, 14 * 60))
def test_every_form_s3_answers_in_reads_as_botocore_reads_it(
    instant: datetime, offset: int
) -> None:
    """ISO 8601 as S3's XML has it (milliseconds, ``Z``), with an offset, RFC 1123 as its headers
    have it, and epoch seconds: the same instant as botocore's ``parse_timestamp``, aware."""
    in_zone = instant.astimezone(timezone(timedelta(minutes=offset)))
    forms = [
        instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z",
        in_zone.isoformat(),
        format_datetime(instant.replace(microsecond=0), usegmt=True),
        int(instant.timestamp()),
        str(int(instant.timestamp())),
    ]
    for form in forms:
        found = timestamp(form)
        assert found.tzinfo is not None, form
        assert found == parse_timestamp(form), form


def test_what_the_standard_library_does_not_read_is_botocores_to_read() -> None:
    """A form without a zone is botocore's to take as it does (not read as naive here)."""
    for form in ("2026-11-27T10:02:03", "Fri, 27 Nov 2026 10:02:03 -0000", "20261127T100203Z"):
        assert timestamp(form) == parse_timestamp(form), form


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from empty_bucket(endpoint, monkeypatch, BUCKET)


def test_the_store_tools_own_session_reads_them_and_a_callers_session_is_left_alone(
    s3: Any, endpoint: str
) -> None:
    import aiobotocore.session

    s3.pipe(f"{BUCKET}/store/.zgroup", b'{"zarr_format": 2}')
    store = open_store(f"s3://{BUCKET}/store")
    fs = store.files.fs  # type: ignore[attr-defined]
    listed = fs.ls(f"{BUCKET}/store", detail=True, refresh=True)
    assert listed[0]["LastModified"].tzinfo is UTC  # (botocore's own gives tzlocal())

    theirs = aiobotocore.session.AioSession()
    open_store(f"s3://{BUCKET}/store", StoreOptions(storage_options={"session": theirs}))
    defaults = theirs.get_component("response_parser_factory")._defaults
    assert "timestamp_parser" not in defaults
