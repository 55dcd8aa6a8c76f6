"""S3's timestamps read by the standard library, not dateutil.

botocore reads every timestamp of every answer with ``dateutil.parser.parse``:
50 to 100 us each on these machines, so a listing of a thousand keys (one
page: each key has its ``LastModified``) spends 50 to 100 ms of the event
loop's time on them, and the walk of a store of a million chunk files a minute
or more. S3 writes them in ISO 8601 in XML and RFC 1123 in headers, which
`datetime.fromisoformat` and `email.utils.parsedate_to_datetime` read in under a
microsecond. botocore lets a session's clients take another reader
(``set_parser_defaults(timestamp_parser=...)``, as the AWS CLI does for its
``cli_timestamp_format``); `timestamp` gives the same instants, anything else
read by botocore's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

__all__ = ["read_timestamps_fast", "timestamp"]


def timestamp(value: Any) -> datetime:
    """An aware datetime from a timestamp as S3 answers it: what botocore's ``parse_timestamp``
    gives, the same instant (in UTC where it gives local time).

    >>> timestamp("2026-11-27T10:02:03.250Z")
    datetime.datetime(2026, 11, 27, 10, 2, 3, 250000, tzinfo=datetime.timezone.utc)
    >>> timestamp("Fri, 27 Nov 2026 10:02:03 GMT")
    datetime.datetime(2026, 11, 27, 10, 2, 3, tzinfo=datetime.timezone.utc)

    (Other forms, epoch seconds among them, are botocore's to read: it comes with s3fs.)
    """
    if isinstance(value, str):
        for read in (datetime.fromisoformat, parsedate_to_datetime):
            try:
                found = read(value)
            except (TypeError, ValueError, IndexError):
                continue
            if found.tzinfo is not None:  # (one without a zone: as botocore takes it)
                return found
    from botocore.utils import parse_timestamp

    parsed: datetime = parse_timestamp(value)
    return parsed


def read_timestamps_fast(fs: Any, options: Mapping[str, Any]) -> None:
    """The clients of ``fs`` (an s3fs file system) read timestamps with `timestamp`, where the
    session is s3fs's own (not one the caller passed in ``options``: theirs is left as it is)."""
    if "session" in options:
        return
    session = getattr(fs, "session", None)
    if session is None or not getattr(fs, "_session_is_owned", True):
        return
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=timestamp)
