"""Alembic migrations of crucible's database; a package so an installed wheel ships them."""
