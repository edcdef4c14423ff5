"""Alembic migrations of the history store, shipped as ``controller.store.migrations``."""
