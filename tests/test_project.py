"""The project's own promises: CI runs what the README tells users to run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\s+```bash\n(.*?)```", readme, re.S)
    assert block, "README.md has no Quick start block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_has_exactly_two_commands() -> None:
    install_and_demo, install_and_test = quick_start_commands()
    assert "demo" in install_and_demo
    assert ".[test]" in install_and_test and "pytest" in install_and_test


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert quick_start_commands()[1] in ci_lines


def test_benchmark_script_runs() -> None:
    """The benchmark must keep working (quick mode: small sizes, writes nothing)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--repeats", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "| int32 | 4 KiB | encode |" in result.stdout
    assert "per call vs AsType: int32 4 KiB encode" in result.stdout


def test_importing_the_codec_loads_neither_the_store_tools_nor_zarr() -> None:
    import subprocess
    import sys

    code = "import sys, numcodecs_bytes; print(sorted(m for m in sys.modules if m.startswith(('numcodecs_', 'zarr'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for module in ("migrate", "stores", "to_v3", "'zarr"):
        assert module not in loaded, loaded
    code = "from numcodecs_bytes import migrate_config; print(migrate_config({'id': 'endian'}))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == (
        "{'id': 'bytes'}"
    )
