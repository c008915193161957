"""Builds the real layer with local bundling (pip from PyPI, no Docker) and inspects what Lambda would get;
builds the Glue export's packages zip the same way.

Marked ``bundling``: it downloads wheels (or takes them from pip's cache). Deselect with
``-m 'not bundling'``. The ``bundle`` and ``glue_packages`` fixtures are in ``conftest.py``, shared
with ``test_runtime_modules.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.layer import PipLayerBundler
from tests.infra.helpers import find_python313

pytestmark = pytest.mark.bundling

EM_AARCH64 = 183  # ELF e_machine of ARM64
MAX_LAYER_BYTES = 60 * 1024 * 1024
NATIVE = ("grpcio", "xxhash", "crc32c", "wrapt", "awscrt", "orjson", "msgspec", "cbor2")


def wheel_tags(site: Path) -> dict[str, list[str]]:
    tags = {}
    for wheel in site.glob("*.dist-info/WHEEL"):
        tags[wheel.parent.name] = [
            line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")
        ]
    return tags


def elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")


def test_bundle_holds_llog_and_its_dependencies(bundle: Path) -> None:
    site = bundle / "python"
    assert sorted(p.name for p in bundle.iterdir()) == ["python"]
    assert (site / "llog" / "__init__.py").is_file()
    assert (site / "llog" / "py.typed").is_file()
    assert (site / "llog" / "store" / "oxia_proto" / "io" / "oxia" / "proto" / "v1" / "__init__.py").is_file()
    assert not (site / "oxia").exists()  # llog talks to Oxia through its generated stub, not the oxia client
    for module in (
        "grpc",
        "betterproto2",
        "xxhash",
        "crc32c",
        "orjson",
        "msgspec",
        "cbor2",
        "dateutil",
        "aws_lambda_powertools",
        "aws_xray_sdk",
        "wrapt",
        "awscrt",
    ):
        assert (site / module).is_dir(), module
    # the byte code the layer carries is checked by test_layer_bytecode.py
    assert not (site / "bin").exists()


def test_no_code_generator_or_ruff(bundle: Path) -> None:
    names = {p.name.lower() for p in (bundle / "python").iterdir()}
    assert not [n for n in names if n.startswith(("betterproto2_compiler", "ruff", "jinja2"))]
    assert not list((bundle / "python").rglob("ruff"))


def test_wheels_are_for_cp313_manylinux_aarch64_or_pure_python(bundle: Path) -> None:
    tags = wheel_tags(bundle / "python")
    assert len(tags) == 14, sorted(tags)  # one per pin of infra/layer-requirements.txt
    for dist, dist_tags in tags.items():
        assert dist_tags, dist
        for tag in dist_tags:
            python, abi, platform = tag.split("-")
            if platform == "any":
                assert abi == "none", (dist, tag)
                assert python in ("py3", "py2", "py2.py3"), (dist, tag)
            else:
                assert python == "cp313", (dist, tag)
                assert abi in ("cp313", "abi3"), (dist, tag)  # abi3: the stable ABI, from 3.13 on
                assert platform.startswith("manylinux"), (dist, tag)
                assert platform.endswith("_aarch64"), (dist, tag)
    for native in NATIVE:
        (dist,) = [d for d in tags if d.lower().startswith(native)]
        assert all(t.endswith("_aarch64") for t in tags[dist]), (dist, tags[dist])


def test_native_libraries_are_arm64(bundle: Path) -> None:
    shared = list((bundle / "python").rglob("*.so")) + list((bundle / "python").rglob("*.so.*"))
    assert any("cpython-313-aarch64-linux-gnu" in p.name for p in shared)
    for library in shared:
        assert elf_machine(library) == EM_AARCH64, library


def test_layer_is_small(bundle: Path) -> None:
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert size < MAX_LAYER_BYTES, f"{size / 2**20:.1f} MiB"


def test_same_pins_import_on_cpython_313(tmp_path: Path) -> None:
    """This machine cannot run arm64 code; the x86_64 build of the same pins imports on CPython 3.13.

    boto3 comes from the Lambda runtime, so a copy stands in for it on the path, after the layer.
    Every module of ``llog`` imports with nothing else: the layer needs no development package.
    """
    python = find_python313()
    if python is None:
        pytest.skip("no CPython 3.13 here (set LLOG_PYTHON313 to one)")
    site = PipLayerBundler(architecture="x86_64").bundle(tmp_path / "layer")
    runtime = tmp_path / "runtime"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--target", str(runtime), "boto3==1.44.5", "botocore==1.44.5", "s3transfer==0.19.3", "jmespath==1.1.0",
         "urllib3==2.8.0"],
        check=True,
    )  # fmt: skip
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "import llog, grpc, crc32c, orjson, msgspec, cbor2, xxhash, betterproto2, wrapt, aws_xray_sdk\n"
        "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
        "from llog.store.oxia import OxiaStore\n"
        "from llog.format.codec import Record, encode_batch, decode_batch\n"
        "import importlib, pkgutil\n"
        "for module in pkgutil.walk_packages(llog.__path__, 'llog.'): importlib.import_module(module.name)\n"
        "assert llog.__file__.startswith(sys.argv[1]), llog.__file__\n"
        "assert grpc.__file__.startswith(sys.argv[1]), grpc.__file__\n"
        "print('ok', sys.version_info[:2], grpc.__version__)\n"
    )
    result = subprocess.run(
        [python, "-I", "-S", "-c", code, str(site), str(runtime)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok (3, 13)")


def test_glue_packages_zip_holds_llog_and_llog_export(glue_packages: tuple[Path, dict[str, Any]]) -> None:
    asset, entry = glue_packages
    assert entry["source"] == {"path": asset.name, "packaging": "zip"}
    assert sorted(p.name for p in asset.iterdir()) == ["llog", "llog_export"]
    assert (asset / "llog" / "format" / "codec.py").is_file()
    assert (asset / "llog" / "__init__.py").is_file()
    assert (asset / "llog_export" / "__init__.py").is_file()
    assert not list(asset.rglob("__pycache__"))
    assert not list(asset.rglob("*.pyc"))


def test_glue_packages_import_from_the_zip(glue_packages: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Glue puts the --extra-py-files zip on sys.path; zipimport finds both packages in it."""
    asset, _ = glue_packages
    archive = Path(shutil.make_archive(str(tmp_path / "packages"), "zip", root_dir=asset))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import llog_export, llog.errors\n"
        "assert llog_export.__file__.startswith(sys.argv[1]), llog_export.__file__\n"
        "assert llog.errors.__file__.startswith(sys.argv[1]), llog.errors.__file__\n"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code, str(archive)], capture_output=True, text=True,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
