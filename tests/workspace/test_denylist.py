"""The deny list: which homes it covers, what it refuses and what it masks inside a bind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.workspace.denylist import (
    DENIED_IN_HOME,
    denied_cover,
    denied_paths,
    home_dirs,
    masks_inside,
    passwd_home,
    readonly_problem,
    withheld,
)


def test_the_passwd_home_is_a_home_whatever_home_says(tmp_path: Path) -> None:
    real = passwd_home()
    assert real is not None and real.is_dir()
    real = Path(os.path.realpath(real))

    assert home_dirs({"HOME": str(tmp_path)}) == [tmp_path.resolve(), real]
    assert home_dirs({}) == [real], "with HOME unset the passwd home is still hidden"
    assert home_dirs({"HOME": str(real)}) == [real]
    assert home_dirs({"HOME": "/"}) == [real], "a HOME of / would hide the whole system"


@pytest.mark.parametrize(
    "rel",
    [
        ".ssh",
        ".aws",
        ".config/gh",
        ".netrc",
        ".git-credentials",
        ".docker",
        ".kube",
        ".gnupg",
        ".npmrc",
        ".claude",
        ".claude.json",
        ".codex",
        ".gemini",
        ".qwen",
        ".config/gcloud",
        ".azure",
        ".pypirc",
        ".cargo/credentials.toml",
    ],
)
def test_the_documented_credentials_are_denied(rel: str) -> None:
    assert rel in DENIED_IN_HOME


def test_a_readonly_entry_covering_a_home_names_a_credential_that_is_there(tmp_path: Path) -> None:
    denied = denied_paths([tmp_path])
    assert readonly_problem("~", tmp_path, denied) == f"'~' covers {tmp_path / '.ssh'}, {HIDDEN}"
    (tmp_path / ".kube").mkdir()
    assert readonly_problem("~", tmp_path, denied) == f"'~' covers {tmp_path / '.kube'}, {HIDDEN}"
    assert readonly_problem("~/.pyenv", tmp_path / ".pyenv", denied) == "'~/.pyenv' does not exist"
    (tmp_path / ".pyenv").mkdir()
    assert readonly_problem("~/.pyenv", tmp_path / ".pyenv", denied) is None


HIDDEN = "which the sandbox keeps hidden (credentials)"


def test_cover_inside_and_around(tmp_path: Path) -> None:
    denied = denied_paths([tmp_path])

    assert denied_cover(tmp_path, denied) == tmp_path / ".ssh", "a whole home covers .ssh"
    assert denied_cover(tmp_path / ".config", denied) is not None
    assert denied_cover(tmp_path / ".ssh" / "config", denied) == tmp_path / ".ssh"
    assert denied_cover(tmp_path / ".pyenv", denied) is None
    assert denied_cover(tmp_path / ".cargo" / "bin", denied) is None
    assert withheld(tmp_path / ".ssh" / "id_rsa", denied)
    assert not withheld(tmp_path / ".cargo", denied), "a root holding a credential is masked, not withheld"


def test_masks_are_the_existing_denied_paths_inside_a_bind(tmp_path: Path) -> None:
    (tmp_path / ".cargo" / "bin").mkdir(parents=True)
    (tmp_path / ".cargo" / "credentials.toml").write_text("token\n")
    (tmp_path / ".ssh").mkdir()
    prefix = tmp_path / "npm"
    (prefix / "etc").mkdir(parents=True)
    (prefix / "etc" / "npmrc").write_text("//r/:_authToken=x\n")
    denied = denied_paths([tmp_path])

    assert masks_inside([tmp_path / ".cargo"], denied) == [tmp_path / ".cargo" / "credentials.toml"]
    assert masks_inside([tmp_path / ".cargo" / "bin"], denied) == []
    assert masks_inside([tmp_path], denied) == [tmp_path / ".cargo" / "credentials.toml", tmp_path / ".ssh"]
    assert masks_inside([], denied, roots=[prefix]) == [prefix / "etc" / "npmrc"]
