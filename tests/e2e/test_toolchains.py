"""A Python project's loop where ``python3`` is a version manager's shim under HOME, through the real CLI.

On most developer machines ``python3`` is ``~/.pyenv/shims/python3``: a bash script that execs
``~/.pyenv/libexec/pyenv``, which execs the selected version's interpreter. The sandbox hides HOME, so
before the toolchain rules every run stopped at the baseline with exit 127. Here the agent, the
validation and the metric are Python scripts run as ``python3 …`` with a shell's PATH: once through a
shim of that shape in a temporary HOME, whose interpreter is a virtualenv there (its base elsewhere), and
once through the machine's own pyenv with the machine's own HOME.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MACHINE_HOME
from tests.e2e.conftest import Project, ok_run, outcomes

# Runs on a home crucible ran in before (``migrated_home``): not about a first run.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("migrated_home")]

PY_FILES = {
    "tools/bench.py": "print('METRIC score=' + open('src/value.txt').read().strip())\n",
    "tools/check.py": "import json, ssl, sys\nsys.exit(0 if int(open('src/value.txt').read()) > 0 else 1)\n",
    "tools/agent.py": "open('src/value.txt', 'w').write('7\\n')\nprint('HYPOTHESIS: seven')\n",
}
SHELL_PATH = "/usr/local/bin:/usr/bin:/bin"


def python_project(project: Project) -> None:
    project.make(PY_FILES)
    project.write_spec(
        agent={"command": "python3 tools/agent.py"},
        metric={"command": "python3 tools/bench.py"},
        validation={"command": "python3 tools/check.py", "retries": 0},
    )


def pyenv_shaped_home(home: Path) -> Path:
    """``home/.pyenv`` with pyenv's shape: a bash shim execs ``libexec/pyenv``, which execs the selected
    version, here a real virtualenv (its base interpreter is this test's, wherever that lives)."""
    root = home / ".pyenv"
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    shim = root / "shims" / "python3"
    shim.write_text(
        f'#!/usr/bin/env bash\nset -e\nprogram="${{0##*/}}"\nexport PYENV_ROOT="{root}"\n'
        f'exec "{root}/libexec/pyenv" exec "$program" "$@"\n'
    )
    manager = root / "libexec" / "pyenv"
    manager.write_text(
        "#!/usr/bin/env bash\n"
        'version="${PYENV_VERSION:-$(cat "$PYENV_ROOT/version")}"\nshift\nprogram="$1"\nshift\n'
        'exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"\n'
    )
    for script in (shim, manager):
        script.chmod(0o755)
    (root / "version").write_text("3.99.0\n")
    base = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys._base_executable)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([base, "-m", "venv", "--without-pip", str(root / "versions" / "3.99.0")], check=True)
    return root / "shims"


def test_a_shim_under_home_that_execs_a_python_elsewhere_under_home(
    project: Project, temp_home: Path
) -> None:
    shims = pyenv_shaped_home(temp_home)
    python_project(project)
    env = {"PATH": f"{shims}:{SHELL_PATH}"}

    # The dry run in-process (``crucible loop --dry-run`` as a process: test_cli_contract.py).
    dry = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run", "--json", env=env)
    view = ok_run(project.loop(env=env))

    assert dry.code == 0 and dry.json["sandbox_problems"] == [], dry.describe()
    assert outcomes(view) == [("accepted", "improved")], view
    assert view["best"]["value"] == 7.0


MACHINE_SHIM = MACHINE_HOME / ".pyenv" / "shims" / "python3"


@pytest.mark.skipif(not MACHINE_SHIM.is_file(), reason="this machine's python3 is not a pyenv shim")
def test_the_machines_pyenv_shim_with_the_machines_home(project: Project, machine_home: Path) -> None:
    assert os.environ["HOME"] == str(machine_home)
    python_project(project)
    env = {"PATH": f"{MACHINE_SHIM.parent}:{SHELL_PATH}"}

    view = ok_run(project.loop(env=env))

    assert outcomes(view) == [("accepted", "improved")], view
    assert view["baseline"]["value"] == 10.0 and view["best"]["value"] == 7.0
