"""A scripted model server and the installed coding-agent CLIs, for the presets' tests (tests/agents)."""
