"""The small read API (FastAPI): runs, timelines, findings, comparisons, trends, metrics and health.

Routers per concern (``runs``, ``jobs``, ``compare``, ``health``), wired in :mod:`controller.api.app`;
every route goes through the auth seam (:mod:`controller.api.auth`) and reads through
:mod:`controller.store.queries`.
"""
