"""A hostile agent inside the sandbox sees no credential of the deny list, whatever HOME is (issue 20).

The sandbox hides the user's home directories and binds back, read-only, the toolchains a command
needs. Here the agent runs a tool from a conda-shaped toolchain (bound whole, with a ``.condarc`` holding
a token inside it), names a private key by its absolute path on its command line, names the controller's
own secret file, and then looks for every path of the deny list in every home it can think of, and lists
those homes. With ``HOME`` pointing at a temporary home, unset (the passwd entry's home is then the only
one) and the machine's own, it must find nothing, and the turn still keeps its edit.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from controller.workspace.denylist import DENIED_IN_HOME, passwd_home
from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

SHELL_PATH = "/usr/local/bin:/usr/bin:/bin"


def conda_toolchain(root: Path, token: str) -> Path:
    """``root`` shaped like a conda installation: ``conda-meta``, a program in ``bin``, a ``.condarc``
    with a channel token (masked again inside the bind). Its ``bin``."""
    (root / "conda-meta").mkdir(parents=True)
    (root / "bin").mkdir()
    tool = root / "bin" / "condatool"
    tool.write_text("#!/bin/sh\necho condatool ran\n")
    tool.chmod(0o755)
    (root / ".condarc").write_text(f"channels: [https://token:{token}@conda.invalid]\n")
    return root / "bin"


def hunter(homes: list[Path], extra: list[Path]) -> str:
    """A shell agent that reports each deny-list path it can read something of in ``homes`` (and
    ``extra``), prints what it reads, lists each home, then makes the turn's edit."""
    wanted = [str(h / rel) for h in homes for rel in DENIED_IN_HOME] + [str(p) for p in extra]
    lines = ["for p in \\"] + [f"  '{p}' \\" for p in wanted] + ["; do"]
    # A masked file is /dev/null bound over it, a masked directory an empty tmpfs: present, empty.
    lines += ['  if [ -s "$p" ] || { [ -d "$p" ] && [ -n "$(ls -A "$p")" ]; }; then echo "SEEN $p"; fi']
    lines += ['  cat "$p" 2>/dev/null | head -c 200']
    lines += ["done"]
    for home in homes:
        lines.append(f"ls -A '{home}' 2>/dev/null | sed 's|^|LISTED {home}/|'")
    lines += ["condatool", "echo 8 > src/value.txt", "echo 'HYPOTHESIS: eight'"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("home_is", ["temporary", "unset", "the machine's"])
def test_a_hostile_agent_sees_no_credential_whatever_home_is(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home_is: str
) -> None:
    token = f"E2ELEAKdeny{secrets.token_hex(8)}"
    passwd = passwd_home()
    assert passwd is not None
    homes = [passwd]
    planted: list[Path] = []
    if home_is == "temporary":
        home = tmp_path / "other-home"  # HOME points elsewhere than the passwd entry
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_e2e").write_text(token)
        (home / ".git-credentials").write_text(f"https://me:{token}@forge.invalid\n")
        (home / ".cargo").mkdir()
        (home / ".cargo" / "credentials.toml").write_text(f'[registry]\ntoken = "{token}"\n')
        monkeypatch.setenv("HOME", str(home))
        homes.insert(0, home)
        planted = [home / ".ssh" / "id_e2e", home / ".git-credentials"]
        conda = conda_toolchain(home / "miniconda3", token)
    else:
        if home_is == "unset":
            monkeypatch.delenv("HOME")
        conda = conda_toolchain(tmp_path / "miniconda3", token)
    key_file = tmp_path / "app-key.pem"
    key_file.write_text(f"-----BEGIN PRIVATE KEY-----\n{token}\n")
    monkeypatch.setenv("CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE", str(key_file))
    named = [*planted, key_file, conda.parent / ".condarc"]
    project.make({"tools/hunt.sh": hunter(homes, [key_file, conda.parent / ".condarc"])})
    project.write_spec(agent={"command": "sh tools/hunt.sh " + " ".join(f"'{p}'" for p in named)})

    view = ok_run(project.loop(env={"PATH": f"{conda}:{SHELL_PATH}"}))

    assert outcomes(view) == [("accepted", "improved")], view
    log = (project.run_dir(view["run_id"]) / "logs" / "turn-0001-agent.log").read_text()
    assert "condatool ran" in log, log  # the toolchain under the hidden home was bound
    assert "SEEN" not in log and token not in log, log
    listed = [line.split(" ", 1)[1] for line in log.splitlines() if line.startswith("LISTED ")]
    for entry in listed:
        name = Path(entry).name
        assert not any(rel.split("/")[0] == name and "/" not in rel for rel in DENIED_IN_HOME), entry
    # Nothing these commands need lives in the passwd home: it is hidden whole, whatever HOME says.
    assert not [e for e in listed if Path(e).parent == passwd], listed
