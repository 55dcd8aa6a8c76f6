"""The project's own promises: CI runs what the README tells users to run."""

from __future__ import annotations

import configparser
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from support.stack import benchmark, has_module

ROOT = Path(__file__).parent.parent


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def bash_block(section: str) -> list[str]:
    """The commands of the first bash block under README.md's ``## section``."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(rf"^## {section}\n(?:(?!^## ).)*?```bash\n(.*?)```", readme, re.S | re.M)
    assert block, f"README.md has no bash block under ## {section}"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_install_is_by_the_package_name_then_the_demo() -> None:
    commands = [line.split("#")[0].strip() for line in bash_block("Install")]
    assert commands == [
        "pip install numcodecs-bytes",
        'pip install "numcodecs-bytes[zarr]"',
        'pip install "numcodecs-bytes[xarray]"',
        "python -m numcodecs_bytes demo",
    ]


def test_the_install_line_that_says_every_example_installs_what_each_needs() -> None:
    """The README's install line that claims "every example" names the extra whose packages its
    examples import (issue 68: the zarr extra's line claimed it; the to-v3 example needs xarray)."""
    (line,) = [line for line in bash_block("Install") if "every example" in line]
    extra = re.search(r"numcodecs-bytes\[(\w+)\]", line)
    assert extra is not None, line
    wanted = {
        name.split(">")[0].split("[")[0].strip()
        for name in setup_cfg()["options.extras_require"][extra.group(1)].split()
    }
    readme = (ROOT / "README.md").read_text()
    imported = set(re.findall(r"^>>> from (\w+)", readme, re.M))
    for names in re.findall(r"^>>> import (.*)$", readme, re.M):
        imported |= {name.split()[0].split(".")[0] for name in names.split(",")}
    assert "xarray" in imported
    for module in imported - {"numpy", "numcodecs_bytes", "tempfile", "numcodecs"}:
        assert module in wanted, (module, line)


def test_ci_runs_the_readme_test_command() -> None:
    (test_command,) = bash_block("Development")
    assert ".[test,interop]" in test_command and "pytest" in test_command
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_readme_links_are_absolute_and_those_into_the_repository_name_its_files() -> None:
    """README.md is the package's page on the index too, where a relative link leads nowhere."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)]*)\)", readme)
    assert links and all(link.startswith("https://") for link in links), links
    urls = dict(
        line.split(" = ") for line in setup_cfg()["metadata"]["project_urls"].strip().splitlines()
    )
    for link in links:
        if link.startswith(urls["Source"] + "/blob/main/"):
            assert (ROOT / link.removeprefix(urls["Source"] + "/blob/main/")).is_file(), link
    assert urls["Source"] in links


def test_extras_as_readme_lists_them() -> None:
    extras = setup_cfg()["options.extras_require"]
    readme = (ROOT / "README.md").read_text()
    for extra in ("zarr", "xarray", "cloud", "s3", "ml_dtypes"):
        assert f"`numcodecs-bytes[{extra}]`" in readme, extra
    # s3 is cloud's old name: the same packages
    assert extras["s3"] == extras["cloud"] and "obstore" in extras["cloud"]
    # The test extra holds no package that only CI's legs need; those are in interop.
    for ci_only in ("tensorstore", "zarrs", "moto", "s3fs", "distributed", "zarr-any-numcodecs"):
        assert ci_only not in extras["test"] and ci_only in extras["interop"], ci_only


def run_benchmark(name: str, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """benchmarks/NAME.py's main run in this process with ``args``; what it printed."""
    assert benchmark(name).main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.runs_a_benchmark
def test_the_codec_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/codec.py keeps working (quick mode: 4 KiB and 64 KiB, one round)."""
    out = run_benchmark("codec", capsys, "--quick", "--repeats", "1")
    assert "| int32 | 4 KiB | encode |" in out
    for target in (
        "copy-free: decode",
        "per call: int32 4 KiB encode",
        "throughput: int32 64 KiB decode",
    ):
        assert re.search(rf"^(PASS|FAIL)  {target}", out, re.M), target


@pytest.mark.runs_a_benchmark
def test_the_bool_check_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/bool_check.py keeps working, every way writing the right bytes (1 MiB, one
    run)."""
    out = run_benchmark("bool_check", capsys, "--sizes", "1")
    for way in ("split copy", "ours", "two passes", "one pass"):
        assert re.search(rf"^1 MiB {way} +\d+\.\d\d \.\. \d+\.\d\d$", out, re.M), way


@pytest.mark.runs_a_benchmark
def test_the_shard_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/shard.py keeps working: 64 MiB on the local disk, one round, every contender's
    result read equal to the source (the benchmark checks it)."""
    pytest.importorskip("zarr", minversion="3", reason="the benchmark shards with zarr 3")
    out = run_benchmark("shard", capsys, "--gib", "0.0625", "--s3-mib", "0", "--rounds", "1")
    # 64 chunks into one shard
    assert "files: 66 before (v2), 2 after --remove-v2-metadata" in out, out
    assert "what sharding adds to the metadata-only run" in out


@pytest.mark.runs_a_benchmark
def test_the_shard_benchmark_profiles_a_run_on_s3(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/shard.py --profile keeps telling where a run on S3 spends its time."""
    pytest.importorskip("zarr", minversion="3", reason="the benchmark shards with zarr 3")
    for needed in ("s3fs", "moto", "flask"):
        pytest.importorskip(needed, reason="S3 needs the interop extra")
    out = run_benchmark(
        "shard", capsys, "--gib", "0", "--s3-mib", "16", "--s3-chunks", "1", "--profile"
    )
    assert re.search(
        r"^packing \(the first chunk read to the last shard written\) +\d+\.\d\d +\d+$", out, re.M
    )
    assert re.search(r"^the whole run +\d+\.\d\d +\d+$", out, re.M), out


@pytest.mark.runs_a_benchmark
@pytest.mark.same_on_every_stack
def test_the_azure_benchmark_runs(azurite: str, capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/azure_store.py keeps working: 4 MiB on Azurite (which it starts itself), one
    round, each contender and the memory by shard size."""
    pytest.importorskip("zarr", minversion="3", reason="the benchmark shards with zarr 3")
    out = run_benchmark("azure_store", capsys, "--mib", "4", "--rounds", "1", "--rtt", "0.002")
    for contender in (
        "to-v3 --shard-size 64MiB",
        "to-v3, metadata only",
        "floor: chunk objects copied",
    ):
        assert re.search(rf"^{contender} +\d+\.\d\d", out, re.M), out
    assert re.search(r"^ +64 MiB +\d+\.\d\d +\d+$", out, re.M), out


@pytest.mark.runs_a_benchmark
def test_the_ome_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/ome.py keeps working: one plane (about 50 MiB raw), one round, every contender's
    result compared with the source (the benchmark checks it)."""
    pytest.importorskip("zarr", minversion="3", reason="the benchmark converts with zarr 3")
    out = run_benchmark("ome", capsys, "--gib", "0.05", "--rounds", "1")
    assert "OME-Zarr 0.4: image (1, 2, 1, 2048, 4096) uint16 and labels" in out, out
    assert re.search(r"^to-v3 --shard-size +\d", out, re.M), out


@pytest.mark.runs_a_benchmark
def test_the_zarr_arrays_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/zarr_arrays.py keeps working (quick mode: 4 MiB, one round)."""
    if not has_module("zarr"):
        pytest.skip("zarr is not installed")
    import zarr

    if int(zarr.__version__.split(".")[0]) < 3:
        pytest.skip("the benchmark writes Zarr v3 arrays with zarr 3")
    out = run_benchmark("zarr_arrays", capsys, "--quick", "--repeats", "1")
    assert "| memory | read | zarr native |" in out
    assert re.search(r"^(PASS|FAIL)  whole arrays: local disk read: ", out, re.M)


def test_importing_the_codec_loads_neither_the_store_tools_nor_zarr() -> None:
    import subprocess
    import sys

    code = (
        "import sys, numcodecs_bytes; print(sorted(m for m in sys.modules if "
        "m.startswith(('numcodecs_', 'zarr'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    for module in ("migrate", "store", "to_v3", "cli", "'zarr"):
        assert module not in loaded, loaded
    code = "from numcodecs_bytes import migrate_config; print(migrate_config({'id': 'endian'}))"
    assert subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip() == ("{'id': 'bytes'}")


# -- the house: each room uses only those before it ------------------------------------------------

PACKAGE = ROOT / "numcodecs_bytes"


def modules() -> dict[str, Any]:
    """Every module of the package, by its name below ``numcodecs_bytes``, parsed."""
    import ast

    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        found[name.removesuffix(".__init__") if name != "__init__" else name] = ast.parse(
            path.read_text()
        )
    return found


def imported(name: str, tree: Any, top_level_only: bool = False) -> set[str]:
    """What a module imports: the package's modules by name below ``numcodecs_bytes``, others by
    their own."""
    import ast

    package = name if (PACKAGE / name.replace(".", "/")).is_dir() else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join(
                    [
                        "numcodecs_bytes",
                        *filter(None, parts),
                        *([node.module] if node.module else []),
                    ]
                )
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {
        module.removeprefix("numcodecs_bytes.") if module.startswith("numcodecs_bytes.") else module
        for module in found
    }


ARCHITECTURE = ROOT / "docs" / "reference" / "architecture.md"


def rooms_of_the_page() -> list[tuple[str, list[str]]]:
    """The rooms as the architecture page draws them (its first ``text`` block), in order: each
    room's label (the left column) and the modules it names, below ``numcodecs_bytes`` (``x.py``;
    ``pkg/: a, b`` for ``pkg.a``, ``pkg.b``; ``pkg/run.py``; ``pkg/`` a whole package). Comments are
    in parentheses; other words that name no module of the package are comments too."""
    block = ARCHITECTURE.read_text().split("```text\n", 1)[1].split("```", 1)[0]
    names = set(modules())
    rooms: list[tuple[str, list[str]]] = []
    prefix, commenting = "", False
    for line in block.splitlines():
        label, text = line[:15].strip(), line[15:]
        if label == "|" or not line.strip():
            continue
        if label:
            rooms.append((label, []))
            prefix = ""
        kept = ""  # the text outside parentheses (comments, which may span lines)
        for char in text:
            commenting = (commenting or char == "(") and char != ")"
            kept += " " if commenting or char == ")" else char
        text = kept
        for word in re.findall(r"[\w./]+/?:?", text):
            if word.endswith("/:"):
                prefix = word.removesuffix("/:") + "."
                continue
            if word.endswith("/"):  # a whole package (below the prefix, where one is given)
                rooms[-1][1].append(prefix + word.removesuffix("/").replace("/", "."))
                continue
            word = word.rstrip(":")
            name = word.removesuffix(".py").replace("/", ".")
            if word.endswith(".py") or "/" in word:
                prefix = ""
            candidate = name if word.endswith(".py") else prefix + name
            if candidate in names:
                rooms[-1][1].append(candidate)
    return rooms


ROOMS = rooms_of_the_page()
PACKAGE_INITS = {
    "__init__": "codecs",
    "__main__": "command line",
    "store": "store access",
    "to_v3": "tools' runs",
    "migrate": "tools' runs",
}
"""The packages' own modules, which the page does not name: the rooms they belong to (the package's
``__init__`` holds the codecs; ``store``, ``to_v3``, ``migrate`` are their packages' doors)."""
RULES = [
    module
    for label, room in ROOMS
    if label == "tools' rules"
    for name in room
    for module in modules()
    if module == name or module.startswith(f"{name}.")
]
"""Every module of the rules' room, those of a package it names whole (``to_v3/rules/``) included:
the purity test holds them all."""


def test_the_page_draws_every_module_in_one_room() -> None:
    """The drawing is the whole package: every module in exactly one room (what a package named
    whole holds counts as named)."""
    placed = [name for _, room in ROOMS for name in room]
    assert len(placed) == len(set(placed)), placed
    labels = [label for label, _ in ROOMS]
    assert labels == [
        "leaves",
        "table, swap",
        "codecs",
        "store access",
        "tools' rules",
        "tools' runs",
        "command line",
    ], labels
    for name in modules():
        if name in PACKAGE_INITS:
            continue
        assert any(name == p or name.startswith(f"{p}.") for p in placed), name


def room_of(name: str) -> int:
    """The room a module is in: the most specific name the page places it by (`PACKAGE_INITS`
    apart)."""
    labels = [label for label, _ in ROOMS]
    if name in PACKAGE_INITS:
        return labels.index(PACKAGE_INITS[name])
    best = max(
        (
            (room, prefix)
            for room, (_, prefixes) in enumerate(ROOMS)
            for prefix in prefixes
            if name == prefix or name.startswith(prefix + ".")
        ),
        key=lambda found: len(found[1]),
    )
    return best[0]


def test_each_room_uses_only_those_before_it() -> None:
    found = modules()
    for name, tree in found.items():
        for used in imported(name, tree):
            matching = [
                module for module in found if used == module or used.startswith(module + ".")
            ]
            target = max(matching, key=len) if matching else None
            if target is None or target == name or name == "__init__":
                continue
            assert room_of(target) <= room_of(name), (
                f"{name} ({ROOMS[room_of(name)][0]}) imports {target}"
            )


def test_no_module_reaches_another_through_sys_modules() -> None:
    """An import the room test sees is the only way one module uses another: a read of
    ``sys.modules`` would be an import it cannot see (the package may replace its own module's
    class: ``sys.modules[__name__]``)."""
    import ast

    for name, tree in modules().items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "modules"
                and getattr(node.value, "id", "") == "sys"
            ):
                parent = next(
                    (p for p in ast.walk(tree) if isinstance(p, ast.Subscript) and p.value is node),
                    None,
                )
                own = parent is not None and getattr(parent.slice, "id", "") == "__name__"
                assert name == "__init__" and own, f"{name} reads sys.modules (line {node.lineno})"


PURE_STORE = ["store.shard_format", "store.layout"]
"""The modules of store access that hold facts only (the shard format, the Zarr layout): the rules
may use them."""


def test_the_rules_touch_no_store_and_no_io() -> None:
    found = modules()
    io = ("store", "cli", "os", "fsspec", "asyncio", "s3fs", "botocore", "obstore", "concurrent")

    def touches(module: str) -> bool:
        return module.split(".")[0] in io and not any(
            module == pure or module.startswith(f"{pure}.") for pure in PURE_STORE
        )

    for pure in PURE_STORE:  # facts only: no I/O, nothing of store access but facts
        used = imported(pure, found[pure])
        assert not {module for module in used if touches(module)}, (pure, used)
    for rule in RULES:
        used = imported(rule, found[rule])
        assert not {module for module in used if touches(module)}, (
            rule,
            used,
        )
        assert not {
            module
            for module in used
            if module.startswith(
                (
                    "to_v3.run",
                    "migrate.run",
                    "to_v3.nodes",
                    "to_v3.metadata_pass",
                    "to_v3.sharding_pass",
                    "to_v3.removal",
                )
            )
        }


def test_only_zarr3_imports_zarr_when_imported_and_only_store_access_makes_requests() -> None:
    found = modules()
    for name, tree in found.items():
        top = imported(name, tree, top_level_only=True)
        if name != "zarr3":
            assert not {module for module in top if module.split(".")[0] == "zarr"}, name
        # the codec's own helper threads
        if not name.startswith("store") and name not in ("_threads", "zarr3"):
            concurrency = {"fsspec", "s3fs", "asyncio", "threading", "concurrent"}
            assert not {
                module for module in imported(name, tree) if module.split(".")[0] in concurrency
            }, name


def test_the_code_is_formatted_at_100_columns_with_no_line_kept_from_the_formatter() -> None:
    """ruff format at zarr-python's line length (100), everywhere: no fmt-skip or fmt-off marker
    packs lines past it. Module length is no target (the layering test checks imports only)."""
    assert re.search(r"^line-length = 100$", (ROOT / "pyproject.toml").read_text(), re.M)
    kept = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("numcodecs_bytes", "tests", "benchmarks", "docs")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"#\s*fmt:\s*(skip|off)", line)
    ]
    assert kept == []


def test_no_library_message_names_a_flag_and_the_store_options_are_declared_once() -> None:
    """Library messages name the parameter (``request_timeout``); only the command line names flags.
    The store options are one value (``StoreOptions``): no function takes them one by one."""
    import ast

    for name, tree in modules().items():
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        if not name.startswith("cli") and name != "__main__":
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                ):
                    assert not re.search(r"(?<![\w-])--[a-z]", node.value), (name, node.value)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = {arg.arg for arg in [*node.args.args, *node.args.kwonlyargs]}
                assert not names & {"request_timeout", "run_timeout", "storage_options"}, (
                    name,
                    node.name,
                )


@pytest.mark.parametrize("ways", [2, 3, 5, 8])
@pytest.mark.parametrize("rounds", [1, 15, 60, 119])
def test_the_benchmarks_time_every_way_after_every_other_as_often(ways: int, rounds: int) -> None:
    """A way's time depends on the way timed before it: each round has every way once, and over the
    rounds each ordered pair of ways is timed back to back as often as any other, to within 4 (a new
    shuffle each round: 10 to 20 times apart over 60 rounds of five ways)."""
    from interleave import balanced_orders

    names = [f"way {index}" for index in range(ways)]
    for seed in range(3):
        orders = list(balanced_orders(names, rounds, seed))
        assert len(orders) == rounds and all(sorted(order) == names for order in orders)
        sequence = [name for order in orders for name in order]
        pairs = {(a, b): 0 for a in names for b in names if a != b}
        for a, b in itertools.pairwise(sequence):
            if a != b:
                pairs[a, b] += 1
        assert max(pairs.values()) - min(pairs.values()) <= 4, (seed, pairs)


def test_readmes_first_example_runs_with_the_package_alone() -> None:
    """Issue 56, item 6: ``pip install numcodecs-bytes`` brings numpy and numcodecs, not zarr:
    README's first example imports nothing else (CI's noextras leg runs README's examples without
    zarr and xarray)."""
    import sys

    readme = (ROOT / "README.md").read_text()
    first = re.search(r"^```python\n(.*?)^```", readme, re.S | re.M)
    assert first is not None
    imported = set(re.findall(r"^>>> (?:from|import) (\w+)", first.group(1), re.M))
    assert imported <= {"numpy", "numcodecs", "numcodecs_bytes", *sys.stdlib_module_names}, imported
    install = readme[readme.index("## Install") : first.start()]
    assert "pip install numcodecs-bytes " in install and '"numcodecs-bytes[zarr]"' in install


def test_the_mutation_testing_settings_name_files_that_exist() -> None:
    """setup.cfg's [mutmut] section: every file it mutates and every test file it runs is there (it
    named test files that had moved)."""
    section = setup_cfg()["mutmut"]
    paths = [
        line.strip()
        for key in ("only_mutate", "pytest_add_cli_args_test_selection")
        for line in section[key].splitlines()
        if line.strip()
    ]
    assert paths and all((ROOT / path).is_file() for path in paths), [
        p for p in paths if not (ROOT / p).is_file()
    ]
