"""Toolchains under the home directory inside the real bubblewrap sandbox.

Each fake toolchain of ``tests/toolchainkit.py`` has its manager's shape; its command prints a marker
that lives elsewhere in the toolchain's root, so it works only when the sandbox binds the whole root,
sets the variables the manager needs now that ``HOME`` moved, and mirrors the dotfiles it reads. The
real pyenv of the machine (``~/.pyenv/shims/python3`` in a shell's PATH) is tested as well.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.workspace.denylist import home_dirs, passwd_home
from controller.workspace.process import CommandResult, run_command
from controller.workspace.sandbox import Sandbox
from controller.workspace.toolchains import Host, find_toolchains, resolve_pyenv_shim
from tests import toolchainkit
from tests.toolchainkit import FakeTool, shell_path

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SANDBOX_HOME = "/tmp/crucible-home"


def make_sandbox(home: Path, environ: dict[str, str], projects: tuple[Path, ...] = ()) -> Sandbox:
    return Sandbox(
        network=False,
        home=SANDBOX_HOME,
        homes=home_dirs({**environ, "HOME": str(home)}),
        environ=environ,
        projects=projects,
    )


def run_in(sandbox: Sandbox, command: str, env: dict[str, str], cwd: Path) -> CommandResult:
    argv = sandbox.wrap(["/bin/sh", "-c", command], search_path=env["PATH"], environ=env, writable=[cwd])
    return run_command(argv, cwd=cwd, env={**env, "HOME": SANDBOX_HOME}, timeout=60)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.mark.parametrize("build", toolchainkit.BUILDERS, ids=lambda b: b.__name__)
def test_a_toolchain_under_home_runs_inside_the_sandbox(
    build: Callable[[Path], FakeTool], home: Path, tmp_path: Path
) -> None:
    tool = build(home)
    (home / "unrelated.txt").write_text("not for the sandbox\n")
    work = tmp_path / "work-dir"
    work.mkdir()
    # Named through the environment: an absolute path in the command itself is shown on purpose.
    env = {"PATH": shell_path(tool), "UNRELATED": str(home / "unrelated.txt"), "SECRET": str(tool.secret)}
    probe = f'{tool.command}; cat "$UNRELATED" 2>/dev/null || echo unrelated-hidden'
    if tool.secret is not None:
        probe += '; cat "$SECRET" 2>/dev/null || echo secret-hidden'

    result = run_in(make_sandbox(home, env), probe, env, work)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == tool.expect, result.stdout + result.stderr
    assert "unrelated-hidden" in lines, "only the toolchain's root may be shown, not the rest of HOME"
    if tool.secret is not None:
        assert "LEAK" not in result.stdout
        assert tool.secret.read_text() != "" and lines[-1] in ("secret-hidden", "")


@pytest.mark.parametrize("build", toolchainkit.BUILDERS, ids=lambda b: b.__name__)
def test_the_toolchain_root_is_found_from_the_command(build: Callable[[Path], FakeTool], home: Path) -> None:
    tool = build(home)
    env = {"PATH": shell_path(tool)}

    shown = make_sandbox(home, env).exposure(["/bin/sh", "-c", tool.command], env["PATH"])

    assert tool.root in [c.root for c in shown.toolchains], shown
    assert tool.root in shown.binds or any(tool.root.is_relative_to(b) for b in shown.binds)
    assert not any(b == home or home.is_relative_to(b) for b in shown.binds), "HOME itself is never bound"


def test_without_the_toolchain_rules_the_pyenv_shape_fails_as_it_did(home: Path, tmp_path: Path) -> None:
    # The control: a sandbox that binds only the shim (what the command names, and its #! interpreter
    # lies outside HOME) fails the way the issue reports, so the fake has the real shim's shape.
    tool = toolchainkit.pyenv(home)
    shim = tool.path[0] / "python3"
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(shim),
        str(shim),
    ]

    result = subprocess.run([*argv, "--", str(shim)], capture_output=True, text=True, timeout=60)

    assert result.returncode == 127
    assert f"{home}/.pyenv/libexec/pyenv: No such file or directory" in result.stderr


def test_a_python_version_file_above_the_repository_selects_the_version(home: Path, tmp_path: Path) -> None:
    tool = toolchainkit.pyenv(home)
    root = tool.root
    (root / "versions" / "3.98.0" / "bin").mkdir(parents=True)
    (root / "versions" / "3.98.0" / "bin" / "python3").write_text("#!/bin/sh\necho picked 3.98.0\n")
    (root / "versions" / "3.98.0" / "bin" / "python3").chmod(0o755)
    (tmp_path / "projects" / "repo").mkdir(parents=True)
    (tmp_path / "projects" / ".python-version").write_text("3.98.0\n")
    env = {"PATH": shell_path(tool)}
    host = Host.of([home], env, [tmp_path / "projects" / "repo"])

    (chain,) = find_toolchains([root / "shims" / "python3"], host, [home])
    work = tmp_path / "w"
    work.mkdir()
    result = run_in(make_sandbox(home, env, (tmp_path / "projects" / "repo",)), "python3", env, work)

    assert chain.kind == "pyenv" and ("PYENV_VERSION", "3.98.0") in chain.env
    assert result.stdout.strip() == "picked 3.98.0", result.stderr
    # A .python-version at the repository's root is in the workspace itself: nothing to pass.
    (tmp_path / "projects" / "repo" / ".python-version").write_text("3.99.0\n")
    (same_root,) = find_toolchains([root / "shims" / "python3"], host, [home])
    assert not any(name == "PYENV_VERSION" for name, _ in same_root.env)


def test_a_command_naming_a_credential_never_gets_it_bound(home: Path, tmp_path: Path) -> None:
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("SSHLEAK-private-key\n")
    work = tmp_path / "w"
    work.mkdir()
    env = {"PATH": "/usr/bin:/bin"}
    sandbox = make_sandbox(home, env)

    shown = sandbox.exposure(["/bin/sh", "-c", f"cat {key}"], env["PATH"])
    result = run_in(sandbox, f"cat {key}", env, work)

    assert key in shown.withheld and key not in shown.binds
    assert "SSHLEAK" not in result.stdout and result.returncode != 0


def test_a_readonly_entry_covering_a_credential_is_masked_inside(home: Path, tmp_path: Path) -> None:
    # sandbox.readonly refuses such an entry at spec time; the sandbox masks it anyway.
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("AWSLEAK\n")
    (home / ".netrc").write_text("machine x password NETRCLEAK\n")
    (home / "data.txt").write_text("shared data\n")
    work = tmp_path / "w"
    work.mkdir()
    env = {"PATH": "/usr/bin:/bin"}
    sandbox = Sandbox(network=False, home=SANDBOX_HOME, homes=[home], readonly=[home])

    result = run_in(
        sandbox,
        f"cat {home}/data.txt; cat {home}/.aws/credentials {home}/.netrc; ls -A {home}/.aws",
        env,
        work,
    )

    assert result.stdout.splitlines()[0] == "shared data"
    assert "LEAK" not in result.stdout


def _real_pyenv_shim() -> Path | None:
    home = passwd_home()
    shim = None if home is None else home / ".pyenv" / "shims" / "python3"
    return shim if shim is not None and shim.is_file() else None


@pytest.mark.skipif(_real_pyenv_shim() is None, reason="this machine's python3 is not a pyenv shim")
@pytest.mark.parametrize("which_home", ["real", "temp"])
def test_the_machines_own_pyenv_shim_runs_inside_the_sandbox(
    which_home: str, home: Path, tmp_path: Path
) -> None:
    shim = _real_pyenv_shim()
    assert shim is not None
    real = passwd_home()
    assert real is not None
    user_home = real if which_home == "real" else home
    env = {"PATH": f"{shim.parent}:/usr/bin:/bin", "HOME": str(user_home)}
    outside = subprocess.run(
        ["python3", "-c", "import sys; print(sys.base_prefix)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    work = tmp_path / "w"
    work.mkdir()
    sandbox = Sandbox(network=False, home=SANDBOX_HOME, homes=home_dirs(env), environ=env)

    result = run_in(sandbox, "python3 -c 'import sys, ssl, json; print(sys.base_prefix)'", env, work)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == outside.stdout.strip()
    assert result.stdout.strip().startswith(str(real / ".pyenv"))


def test_a_pyenv_shim_resolves_in_its_own_root_when_pyenv_root_names_another(
    home: Path, tmp_path: Path
) -> None:
    # pytest started through a machine's pyenv inherits PYENV_ROOT; a second pyenv (a user's HOME
    # elsewhere) still resolves through its own root, named by its shim, down to the version's program.
    tool = toolchainkit.pyenv(home)
    shim = tool.path[0] / "python3"
    environ = {"PATH": shell_path(tool), "PYENV_ROOT": str(tmp_path / "another-pyenv")}

    target = resolve_pyenv_shim(shim, make_sandbox(home, environ).host)

    assert target == tool.root / "versions" / "3.99.0" / "bin" / "python3"
