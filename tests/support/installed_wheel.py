"""The built wheel as a user meets it, installed with the ``zarr`` extra alone.

    python tests/installed_wheel.py   (run away from the source tree, by CI's package leg)

What it ships (``py.typed``, the license), its metadata as the index shows
it (project URLs, the SPDX license, the extras README.md names), both
numcodecs entry points and the console script. README.md's examples are run
by ``tests/readme_examples.py`` in the same environment.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

PROJECT_URLS = {"Homepage", "Documentation", "Source", "Changelog", "Issues"}
EXTRAS = {"zarr", "xarray", "s3", "ml-dtypes", "test", "interop", "docs"}


def main() -> int:
    import numcodecs_bytes

    package = Path(numcodecs_bytes.__file__).parent
    assert "site-packages" in str(package), f"not the installed wheel: {package}"
    assert (package / "py.typed").is_file(), "py.typed is not shipped"
    wheel = distribution("numcodecs-bytes")
    assert any(str(f).endswith("LICENSE") for f in wheel.files or ()), "LICENSE is not shipped"

    metadata = wheel.metadata
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or ())
    assert set(urls) == PROJECT_URLS and all(url.startswith("https://") for url in urls.values()), (
        urls
    )
    assert metadata["License-Expression"] == "MIT", metadata["License-Expression"]
    assert metadata.get_all("License-File") == ["LICENSE"], metadata.get_all("License-File")
    classifiers = metadata.get_all("Classifier") or []
    assert any(c.startswith("Development Status :: ") for c in classifiers), classifiers
    assert EXTRAS <= set(metadata.get_all("Provides-Extra") or ()), metadata.get_all(
        "Provides-Extra"
    )
    assert metadata["Description-Content-Type"] == "text/markdown"

    # The zarr extra and nothing more: zarr is there, the test extra's xarray is not.
    assert importlib.util.find_spec("zarr") is not None, "the zarr extra did not install zarr"
    assert importlib.util.find_spec("xarray") is None, "more than the zarr extra is installed"

    # resolved through the entry points, in a fresh interpreter
    for codec_id in ("bytes", "endian"):
        config = {"id": codec_id, "endian": "big", "dtype": "<i4"}
        code = (
            f"import sys, numcodecs; c = numcodecs.get_codec({config!r}); assert 'numcodecs_bytes' "
            "in sys.modules"
        )
        code += "; print(c)"
        print(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout.strip()
        )
    script = Path(sys.executable).parent / "numcodecs-bytes"
    out = subprocess.run([str(script), "dtypes"], check=True, capture_output=True, text=True).stdout
    assert "fixed_length_utf32" in out and "needs the ml_dtypes extra" in out, out
    print(
        f"wheel ok: {wheel.version}, py.typed, LICENSE, metadata ({', '.join(sorted(urls))}, "
        f"License-Expression MIT), both entry points, console script"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
