"""``python -m controller.cli``: the ``crucible`` command where its console script is not on PATH (the
demo starts the local forge's commands so, with the interpreter that runs the demo)."""

from controller.cli.main import main

main()
