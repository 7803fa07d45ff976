"""Coding-agent CLIs crucible drives headless: ``[agent] preset = "claude-code" | "codex" | …``.

``base`` says what a preset is, one module per CLI says how to run it and read its output, ``registry``
names them, ``command`` turns a spec's ``[agent]`` table into the command a turn runs (the CLI itself, its
output going to files), ``turn`` prepares a turn before the CLI's spawn and reads its output after the
exit (in the controller, ADR-0038), ``outcome`` holds what that reading shares, ``gitscratch`` sends a
CLI's git writes to a copy (aider's, ADR-0039), and ``probe`` finds an installed CLI and its version
(``crucible agents``).
"""
