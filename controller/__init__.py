"""Shared core: settings, bus event schema and subjects, database models, CLI and API."""
