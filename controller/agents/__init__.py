"""Coding-agent CLIs crucible drives headless: ``[agent] preset = "claude-code" | "codex" | …``.

``base`` says what a preset is, one module per CLI says how to run it and read its output, ``registry``
names them, ``command`` turns a spec's ``[agent]`` table into the command a turn runs (a small wrapper,
``run``, that starts the CLI inside the sandbox and prints the agent protocol's lines), and ``probe`` finds
an installed CLI and its version (``crucible agents``).
"""
