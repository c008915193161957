"""scripts/install-oxia.sh (``make setup``'s Oxia step) builds the server from source when none is found.

The script runs from a copy of scripts/ in a temporary checkout (so neither this repository's .tools nor a
../shared beside it is seen), with a PATH that has git and Go but no oxia, and ``LLOG_OXIA_REPO`` naming a local
git repository that stands in for github.com/oxia-db/oxia: a Go main package in ./cmd that, like Oxia's
(cobra's ``--version`` of the root command), prints ``oxia version <main.version>``, tagged v0.17.1. Nothing
touches the network: Go has no module to download (GOPROXY=off) and uses the local toolchain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO = shutil.which("go")
GIT = shutil.which("git")

pytestmark = pytest.mark.skipif(GO is None or GIT is None, reason="needs Go and git (make setup's build path)")

FAKE_MAIN = """package main

import (
	"fmt"
	"os"
)

var version string

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("oxia version " + version)
		return
	}
	fmt.Println("stand-in oxia")
}
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run([str(GIT), "-C", str(repo), *args], check=True, capture_output=True)


def make_source_repo(path: Path, main_go: str = FAKE_MAIN, tag: str = "v0.17.1") -> Path:
    (path / "cmd").mkdir(parents=True)
    (path / "go.mod").write_text("module example.com/oxia\n\ngo 1.22\n")
    (path / "cmd" / "main.go").write_text(main_go)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "stand-in for oxia-db/oxia")
    git(path, "tag", tag)
    return path


def checkout(tmp_path: Path) -> Path:
    """A checkout holding only the scripts install-oxia.sh runs."""
    repo = tmp_path / "llog"
    (repo / "scripts").mkdir(parents=True)
    for name in ("install-oxia.sh", "tool-lookup.sh"):
        shutil.copy2(ROOT / "scripts" / name, repo / "scripts" / name)
    return repo


def run_install(repo: Path, source: Path, tmp_path: Path, *, with_go: bool = True) -> subprocess.CompletedProcess[str]:
    bin_dirs = [str(Path(str(GIT)).parent), "/usr/bin", "/bin"]
    if with_go:
        bin_dirs.insert(0, str(Path(str(GO)).parent))
    env = {k: v for k, v in os.environ.items() if k not in ("OXIA_BIN", "GOFLAGS")}
    env.update(PATH=os.pathsep.join(bin_dirs), LLOG_OXIA_REPO=str(source), GOPROXY="off", GOTOOLCHAIN="local",
               TMPDIR=str(tmp_path))  # fmt: skip
    for directory in bin_dirs:
        assert not (Path(directory) / "oxia").exists(), f"an oxia on the test's PATH: {directory}"
    return subprocess.run([str(repo / "scripts" / "install-oxia.sh")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def test_a_missing_server_is_built_from_the_repository_at_the_tag_and_its_version_checked(tmp_path: Path) -> None:
    repo, source = checkout(tmp_path), make_source_repo(tmp_path / "oxia-src")
    # A later commit on the default branch: the build must take the tag, not the branch's head.
    (source / "cmd" / "main.go").write_text(FAKE_MAIN.replace("stand-in oxia", "untagged head"))
    git(source, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "after the tag")

    result = run_install(repo, source, tmp_path)

    assert result.returncode == 0, result.stderr
    binary = repo / ".tools" / "bin" / "oxia"
    assert result.stdout.strip() == f"oxia: {binary} (built from {source} at v0.17.1: oxia version 0.17.1)"
    assert f"cloning {source} at v0.17.1" in result.stderr
    assert "each package is listed as it is compiled" in result.stderr
    assert subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout == "stand-in oxia\n"
    assert not (repo / ".tools" / "oxia-unavailable").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("oxia-src.")] == []  # the clone is removed

    again = run_install(repo, source, tmp_path)  # idempotent: found, not rebuilt
    assert (again.returncode, again.stdout.strip()) == (0, f"oxia: {binary}")


def test_a_build_that_reports_another_version_is_not_kept(tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    older = FAKE_MAIN.replace('"oxia version " + version', '"oxia version 0.16.0"')
    source = make_source_repo(tmp_path / "oxia-src", older)

    result = run_install(repo, source, tmp_path)

    assert result.returncode == 3
    reason = (repo / ".tools" / "oxia-unavailable").read_text().strip()
    assert reason == (
        f"the server built from {source} at v0.17.1 reports 'oxia version 0.16.0', not 'oxia version 0.17.1'"
    )
    assert list((repo / ".tools" / "bin").iterdir()) == []
    assert "git clone --depth 1 --branch v0.17.1" in result.stderr  # the manual way, as the last resort


def test_without_go_the_manual_commands_are_printed(tmp_path: Path) -> None:
    if Path("/usr/bin/go").exists() or Path("/bin/go").exists():
        pytest.skip("Go is in /usr/bin or /bin: it cannot be left off PATH")
    repo, source = checkout(tmp_path), make_source_repo(tmp_path / "oxia-src")

    result = run_install(repo, source, tmp_path, with_go=False)

    assert result.returncode == 3
    assert "Go is not installed to build one" in (repo / ".tools" / "oxia-unavailable").read_text()
    assert f"git clone --depth 1 --branch v0.17.1 {source} /tmp/oxia-src" in result.stderr
    assert '-ldflags "-s -w -X main.version=0.17.1"' in result.stderr
    assert "cloning" not in result.stderr


def test_the_prebuilt_server_beside_the_checkout_comes_before_a_build(tmp_path: Path) -> None:
    repo, source = checkout(tmp_path), make_source_repo(tmp_path / "oxia-src")
    shared = tmp_path / "shared" / "tools" / "oxia"
    shared.mkdir(parents=True)
    install = shared / "install.sh"
    install.write_text(
        '#!/bin/sh\nprintf "#!/bin/sh\\necho prebuilt\\n" > "$1/oxia"\nchmod +x "$1/oxia"\necho "$1/oxia"\n'
    )
    install.chmod(0o755)

    result = run_install(repo, source, tmp_path)

    assert result.returncode == 0, result.stderr
    binary = repo / ".tools" / "bin" / "oxia"
    assert result.stdout.strip() == f"oxia: {binary} (prebuilt, from ../shared/tools/oxia)"
    assert "cloning" not in result.stderr
