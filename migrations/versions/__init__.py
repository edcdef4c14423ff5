"""Revisions, oldest first by the date in their file name.

A revision names itself once, in ``revision`` and ``down_revision``; its shared column types
and steps come from :mod:`controller.store.migrations.shapes`. Other branches may add a
revision with the same number: each file's slug names it, so it can be renumbered.
"""
