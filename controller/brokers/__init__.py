"""brokers layer (see docs/architecture.md, "Layers")."""
