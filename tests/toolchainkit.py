"""Small toolchains with the shapes of the real ones, built under a home directory for sandbox tests.

Each one is laid out as its manager lays it out (a pyenv root with ``shims/``, ``libexec/pyenv`` and
``versions/``; an nvm version with ``lib/node_modules``; a rustup proxy in ``~/.cargo/bin`` that reads
``$RUSTUP_HOME``…), and its last step reads a marker file elsewhere in the toolchain's root, so the
command prints the marker only when the whole root is visible, not just the program file. The final
executables are shell scripts (or the system's ``/usr/bin/node`` and ``/usr/bin/python3``), so the
kit costs a few files, not a Python installation.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FakeTool:
    """One toolchain: ``command`` run with ``path`` in front of PATH prints ``expect``; ``root`` is the
    directory the sandbox must bind; ``secret`` a credential inside a bound root that must stay hidden."""

    kind: str
    command: str
    path: tuple[Path, ...]
    expect: str
    root: Path
    secret: Path | None = None


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _script(path: Path, body: str, shebang: str = "#!/bin/sh") -> Path:
    return _write(path, f"{shebang}\n{body}", 0o755)


def _link(path: Path, target: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def _marker_printer(exe: Path, label: str, marker: Path) -> None:
    """``exe`` prints ``label`` and the marker's contents (so the marker's directory must be visible)."""
    _write(marker, f"{label}-marker\n")
    _script(exe, f'printf "%s %s\\n" "{label}" "$(cat "{marker}")"\n')


def system_python_version() -> str:
    out = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def pyenv(home: Path) -> FakeTool:
    """A pyenv root: a bash shim that execs ``libexec/pyenv``, which execs the selected version."""
    root = home / ".pyenv"
    _script(
        root / "shims" / "python3",
        f'set -e\nprogram="${{0##*/}}"\nexport PYENV_ROOT="{root}"\n'
        f'exec "{root}/libexec/pyenv" exec "$program" "$@"\n',
        "#!/usr/bin/env bash",
    )
    _script(
        root / "libexec" / "pyenv",
        'version="${PYENV_VERSION:-$(cat "$PYENV_ROOT/version")}"\nshift\nprogram="$1"\nshift\n'
        'exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"\n',
        "#!/usr/bin/env bash",
    )
    _write(root / "version", "3.99.0\n")
    _marker_printer(
        root / "versions" / "3.99.0" / "bin" / "python3", "pyenv", root / "versions" / "3.99.0" / "lib" / "m"
    )
    return FakeTool("pyenv", "python3 -c pass", (root / "shims",), "pyenv pyenv-marker", root)


def uv_venv(home: Path) -> FakeTool:
    """A virtualenv (outside the toolchain) whose base interpreter is one of uv's managed Pythons."""
    install = home / ".local" / "share" / "uv" / "python" / "cpython-3.99.0-linux-x86_64-gnu"
    _marker_printer(install / "bin" / "python3.99", "uv-python", install / "lib" / "python3.99" / "m")
    _link(install / "bin" / "python3", "python3.99")
    venv = home / "work" / ".venv"
    _write(venv / "pyvenv.cfg", f"home = {install / 'bin'}\ninclude-system-site-packages = false\n")
    _link(venv / "bin" / "python", str(install / "bin" / "python3"))
    _script(venv / "bin" / "uvtool", "", f"#!{venv / 'bin' / 'python'}")
    return FakeTool("uv-python", "uvtool", (venv / "bin",), "uv-python uv-python-marker", install)


def conda(home: Path) -> FakeTool:
    """A miniconda base installation (``conda-meta``) with a ``.condarc`` holding a channel token."""
    root = home / "miniconda3"
    _write(root / "conda-meta" / "history", "")
    _marker_printer(root / "bin" / "python", "conda", root / "lib" / "m")
    secret = _write(root / ".condarc", "channels:\n  - https://t/CONDALEAK-token/main\n")
    return FakeTool("conda", "python", (root / "bin",), "conda conda-marker", root, secret)


def pipx(home: Path) -> FakeTool:
    """``pipx install black``: a symlink in ``~/.local/bin`` into a venv that uses pipx's shared libs."""
    root = home / ".local" / "share" / "pipx"
    _marker_printer(root / "venvs" / "black" / "bin" / "black", "pipx", root / "shared" / "m")
    _link(home / ".local" / "bin" / "black", str(root / "venvs" / "black" / "bin" / "black"))
    return FakeTool("pipx", "black", (home / ".local" / "bin",), "pipx pipx-marker", root)


def pip_user(home: Path) -> FakeTool:
    """``pip install --user``: a script for the system Python importing a user-site package."""
    site = home / ".local" / "lib" / f"python{system_python_version()}" / "site-packages"
    _write(site / "usermod.py", "print('pip-user', 'usermod')\n")
    _script(home / ".local" / "bin" / "userscript", "import usermod\n", "#!/usr/bin/python3")
    return FakeTool(
        "pip-user", "userscript", (home / ".local" / "bin",), "pip-user usermod", home / ".local" / "lib"
    )


def nvm(home: Path) -> FakeTool:
    """An nvm node version with a CLI installed by ``npm install -g`` (``#!/usr/bin/env node``), and a
    global npmrc with a token in that version's prefix."""
    version = home / ".nvm" / "versions" / "node" / "v99.0.0"
    _script(version / "bin" / "node", 'exec /usr/bin/node "$@"\n')
    package = version / "lib" / "node_modules" / "fakecli"
    _write(package / "package.json", '{"name": "fakecli", "marker": "nvm-marker"}\n')
    _script(
        package / "cli.js",
        "console.log('nvm', require('./package.json').marker)\n",
        "#!/usr/bin/env node",
    )
    _link(version / "bin" / "fakecli", "../lib/node_modules/fakecli/cli.js")
    secret = _write(version / "etc" / "npmrc", "//registry.npmjs.org/:_authToken=NPMLEAK-token\n")
    return FakeTool("nvm", "fakecli", (version / "bin",), "nvm nvm-marker", version, secret)


def npm_prefix(home: Path) -> FakeTool:
    """npm's user prefix (``npm config set prefix ~/.npm-global``), where ``npm install -g`` puts an
    agent CLI for most people; the node is the system's."""
    prefix = home / ".npm-global"
    package = prefix / "lib" / "node_modules" / "@acme" / "agent"
    _write(package / "package.json", '{"name": "@acme/agent", "marker": "npm-marker"}\n')
    _script(
        package / "cli.js",
        "console.log('npm-prefix', require('./package.json').marker)\n",
        "#!/usr/bin/env node",
    )
    _link(prefix / "bin" / "acme-agent", "../lib/node_modules/@acme/agent/cli.js")
    secret = _write(prefix / "etc" / "npmrc", "//registry.npmjs.org/:_authToken=NPMLEAK-prefix\n")
    return FakeTool(
        "npm-prefix",
        "acme-agent",
        (prefix / "bin",),
        "npm-prefix npm-marker",
        prefix / "lib" / "node_modules",
        secret,
    )


def npm_package(home: Path) -> FakeTool:
    """A package installed with ``npm install --prefix DIR`` (a cache of CLIs, as the tests' own): the CLI
    is a link in ``DIR/node_modules/.bin`` and needs a sibling package (Codex's per-platform binary)."""
    modules = home / ".cache" / "agents" / "acme-1.0" / "node_modules"
    _write(modules / "@acme" / "agent-linux" / "package.json", '{"marker": "npm-package-marker"}\n')
    _script(
        modules / "@acme" / "agent" / "cli.js",
        "console.log('npm-package', require('@acme/agent-linux/package.json').marker)\n",
        "#!/usr/bin/env node",
    )
    _link(modules / ".bin" / "acme-package", "../@acme/agent/cli.js")
    return FakeTool(
        "npm-package", "acme-package", (modules / ".bin",), "npm-package npm-package-marker", modules
    )


def volta(home: Path) -> FakeTool:
    """Volta: a shim in ``~/.volta/bin`` that finds its tools through ``$VOLTA_HOME`` (else ``~/.volta``)."""
    root = home / ".volta"
    _script(
        root / "bin" / "node",
        'v="${VOLTA_HOME:-$HOME/.volta}"\nexec "$v/tools/image/node/99.0.0/bin/node" "$@"\n',
    )
    _marker_printer(
        root / "tools" / "image" / "node" / "99.0.0" / "bin" / "node", "volta", root / "tools" / "m"
    )
    return FakeTool("volta", "node -e 0", (root / "bin",), "volta volta-marker", root)


def rustup(home: Path) -> FakeTool:
    """rustup: ``~/.cargo/bin/cargo`` is a proxy that reads ``$RUSTUP_HOME`` (else ``~/.rustup``); and
    ``~/.cargo/credentials.toml`` holds a registry token."""
    _script(
        home / ".cargo" / "bin" / "rustup",
        'r="${RUSTUP_HOME:-$HOME/.rustup}"\nexec "$r/toolchains/$(cat "$r/default")/bin/${0##*/}" "$@"\n',
    )
    _link(home / ".cargo" / "bin" / "cargo", "rustup")
    root = home / ".rustup"
    _write(root / "default", "stable\n")
    _marker_printer(
        root / "toolchains" / "stable" / "bin" / "cargo",
        "rustup",
        root / "toolchains" / "stable" / "lib" / "m",
    )
    secret = _write(home / ".cargo" / "credentials.toml", '[registry]\ntoken = "CARGOLEAK-token"\n')
    return FakeTool(
        "rustup", "cargo --version", (home / ".cargo" / "bin",), "rustup rustup-marker", root, secret
    )


def go_sdk(home: Path) -> FakeTool:
    """A ``golang.org/dl`` wrapper in ``~/go/bin`` that runs ``$HOME/sdk/go1.99.0/bin/go``."""
    _script(home / "go" / "bin" / "go1.99.0", 'exec "$HOME/sdk/go1.99.0/bin/go" "$@"\n')
    sdk = home / "sdk" / "go1.99.0"
    _marker_printer(sdk / "bin" / "go", "go-sdk", sdk / "pkg" / "m")
    return FakeTool("go-sdk", "go1.99.0 version", (home / "go" / "bin",), "go-sdk go-sdk-marker", sdk)


def asdf(home: Path) -> FakeTool:
    """asdf: a shim that ``exec asdf exec``s, asdf found on PATH, the version in ``~/.tool-versions``."""
    root = home / ".asdf"
    _script(
        root / "shims" / "ruby",
        '# asdf-plugin: ruby 9.9.9\nexec asdf exec "ruby" "$@"\n',
        "#!/usr/bin/env bash",
    )
    _script(
        root / "bin" / "asdf",
        'd="${ASDF_DATA_DIR:-$HOME/.asdf}"\nv=$(awk \'$1=="ruby"{print $2}\' "$HOME/.tool-versions")\n'
        'shift\np="$1"\nshift\nexec "$d/installs/ruby/$v/bin/$p" "$@"\n',
        "#!/usr/bin/env bash",
    )
    _write(home / ".tool-versions", "ruby 9.9.9\n")
    _marker_printer(
        root / "installs" / "ruby" / "9.9.9" / "bin" / "ruby",
        "asdf",
        root / "installs" / "ruby" / "9.9.9" / "m",
    )
    return FakeTool("asdf", "ruby -v", (root / "shims", root / "bin"), "asdf asdf-marker", root)


def mise(home: Path) -> FakeTool:
    """mise: shims are symlinks to the mise binary, which reads its data and config directories."""
    data = home / ".local" / "share" / "mise"
    _script(
        home / ".local" / "bin" / "mise",
        'd="${MISE_DATA_DIR:-$HOME/.local/share/mise}"\nc="${MISE_CONFIG_DIR:-$HOME/.config/mise}"\n'
        'v=$(sed -n \'s/^deno = "\\(.*\\)"/\\1/p\' "$c/config.toml")\n'
        'exec "$d/installs/deno/$v/bin/${0##*/}" "$@"\n',
    )
    _link(data / "shims" / "deno", str(home / ".local" / "bin" / "mise"))
    _write(home / ".config" / "mise" / "config.toml", 'deno = "9.9.9"\n')
    _marker_printer(
        data / "installs" / "deno" / "9.9.9" / "bin" / "deno", "mise", data / "installs" / "deno" / "m"
    )
    return FakeTool("mise", "deno --version", (data / "shims",), "mise mise-marker", data)


BUILDERS = (
    pyenv,
    uv_venv,
    conda,
    pipx,
    pip_user,
    nvm,
    npm_prefix,
    npm_package,
    volta,
    rustup,
    go_sdk,
    asdf,
    mise,
)


def build_all(home: Path) -> dict[str, FakeTool]:
    """Every fake toolchain under ``home``, by kind; plus ``home/unrelated.txt`` that must stay hidden."""
    _write(home / "unrelated.txt", "not for the sandbox\n")
    return {tool.kind: tool for tool in (build(home) for build in BUILDERS)}


def shell_path(tool: FakeTool, base: str | None = None) -> str:
    """PATH as the user's shell has it with ``tool`` installed."""
    rest = os.environ["PATH"] if base is None else base
    return ":".join([*(str(p) for p in tool.path), rest])
