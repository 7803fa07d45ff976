"""Alembic's entry point, run by ``controller.store.migrate`` with an open connection.

There is no ``alembic.ini`` and no offline (``--sql``) mode: migrations run only through
``crucible db upgrade`` / ``Store.open(upgrade=True)``, which pass the connection in
``config.attributes["connection"]`` so the engine is configured exactly like the store's.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from controller.store.models import Base


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if context.is_offline_mode() or not isinstance(connection, Connection):
        raise RuntimeError("run crucible's migrations with `crucible db upgrade` (controller.store.migrate)")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
