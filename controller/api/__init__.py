"""The API (FastAPI): runs, timelines, findings, comparisons, trends, subscriptions, audit, metrics, health.

Routers per concern (``runs``, ``jobs``, ``compare``, ``webhooks``, ``audit``, ``health``), wired in
:mod:`controller.api.app`; every route goes through the auth seam (:mod:`controller.api.auth`,
with per-client rate limits from :mod:`controller.api.ratelimit`), takes its parameters as the
shared types of :mod:`controller.api.params`, pages as :mod:`controller.api.paging` says, answers
the models of :mod:`controller.api.models`, and reads through :mod:`controller.store`. Request
bodies are bounded by :mod:`controller.api.bodylimit`; the limits themselves are in
:mod:`controller.api.limits`.
"""
