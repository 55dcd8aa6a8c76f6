"""Write the committed fixture vectors: ``PYTHONPATH=tests python -m support.make_fixtures``.

One JSON file per data type and endian under ``tests/fixtures/``: the codec
config, the sample values (their in-memory bytes, little endian) and the
encoded bytes. The encoded bytes come from the numpy oracle, and the codec must
agree before anything is written. Run it only to add a data type; a changed
output for an existing file is a bug, not a reason to regenerate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from numcodecs_bytes import DATA_TYPES, BytesCodec
from support.samples import expected_bytes, sample

FIXTURES = Path(__file__).parents[1] / "fixtures"


def fixture_path(name: str, endian: str) -> Path:
    return FIXTURES / f"{name.replace('*', 'N')}.{endian}.json"


def main() -> int:
    FIXTURES.mkdir(exist_ok=True)
    written = 0
    for name in DATA_TYPES:
        values = sample(name)
        for endian in ("little", "big"):
            codec = BytesCodec(endian=endian, dtype=values.dtype)
            encoded = expected_bytes(values, endian)
            if bytes(codec.encode(values)) != encoded:
                raise SystemExit(
                    f"{name} {endian}: the codec disagrees with the numpy oracle; not writing"
                )
            path = fixture_path(name, endian)
            if path.exists():
                continue
            record = {
                "data_type": name,
                "config": codec.get_config(),
                "count": len(values),
                "values_hex": values.tobytes().hex(),
                "encoded_hex": encoded.hex(),
            }
            path.write_text(json.dumps(record, indent=2) + "\n")
            written += 1
    print(f"wrote {written} new fixture files to {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
