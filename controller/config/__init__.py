"""config layer (docs/architecture.md): the run spec (``spec``), its value units (``units``), process-wide
settings (``settings``) and the ``crucible init`` template (``template``).

Nothing is re-exported here: importing ``controller.config.settings`` must not import pydantic and the
spec models, so that ``crucible --help`` stays cheap (ADR-0005 decision 6).
"""
