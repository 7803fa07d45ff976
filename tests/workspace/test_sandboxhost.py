"""The sandbox of a run on this machine: ``sandbox.readonly`` checked, every home hidden (issue 20)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controller.domain.errors import SpecError
from controller.workspace.denylist import passwd_home
from controller.workspace.process import run_command
from controller.workspace.sandboxhost import readonly_paths, run_sandbox


def test_readonly_entries_expand_against_home(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    environ = {"HOME": str(tmp_path)}

    assert readonly_paths(["~/data", "/usr"], environ) == [tmp_path / "data", Path("/usr")]


@pytest.mark.parametrize(
    ("entries", "key", "says"),
    [
        (["/usr", "/no/such/dir"], "sandbox.readonly[1]", "'/no/such/dir' does not exist"),
        (["~"], "sandbox.readonly[0]", "covers {home}/.ssh, which the sandbox keeps hidden"),
        (["~/.ssh/keys"], "sandbox.readonly[0]", "covers {home}/.ssh"),
        (["{tmp}/link"], "sandbox.readonly[0]", "covers {home}/.aws"),
    ],
)
def test_a_readonly_entry_that_is_missing_or_shows_credentials_is_refused(
    tmp_path: Path, entries: list[str], key: str, says: str
) -> None:
    home = tmp_path / "home"
    (home / ".ssh" / "keys").mkdir(parents=True)
    (home / ".aws").mkdir()
    (tmp_path / "link").symlink_to(home / ".aws")  # a link into a denied path is refused too

    with pytest.raises(SpecError) as caught:
        readonly_paths([e.format(tmp=tmp_path) for e in entries], {"HOME": str(home)})

    assert caught.value.key == key
    assert says.format(home=home) in caught.value.message


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("home_is", ["unset", "elsewhere", "missing"])
def test_the_passwd_home_is_hidden_whatever_home_says(tmp_path: Path, home_is: str) -> None:
    passwd = passwd_home()
    assert passwd is not None and passwd.is_dir()
    environ = {"PATH": "/usr/bin:/bin"}
    if home_is == "elsewhere":
        environ["HOME"] = str(tmp_path)
    elif home_is == "missing":
        environ["HOME"] = str(tmp_path / "no-such-home")
    box = run_sandbox(network=False, home="/tmp/crucible-home", environ=environ)

    argv = box.wrap(["/bin/sh", "-c", f"ls -A {passwd}; echo listed"], search_path=environ["PATH"])
    result = run_command(argv, cwd=tmp_path, env=environ, timeout=60)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["listed"], f"{passwd} shows {result.stdout!r} inside"
    assert passwd in box.homes and (passwd / ".ssh") in box.denied
