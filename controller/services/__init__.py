"""services layer (see docs/architecture.md, "Layers")."""
