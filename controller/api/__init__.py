"""The API (FastAPI): runs, timelines, findings, comparisons, trends, logs, live events,
subscriptions, audit, metrics, health, and the pages that show them.

Its floors, top to bottom (the import contract in pyproject.toml keeps them; a module imports only
the floors below its own, and the routers never import each other):

- the application: :mod:`.app` includes every router and middleware, and :mod:`.server`
  serves it (uvicorn, with its own bounds on connections and headers);
- the pages: :mod:`.pages` renders, under ``/ui/``, what the JSON routers answer;
- the routers, one per concern: :mod:`.runs`, :mod:`.jobs`, :mod:`.compare`, :mod:`.events` (live
  events), :mod:`.logs`, :mod:`.notifications` (subscriptions of both channels and their
  deliveries), :mod:`.audit`, :mod:`.health`; beside them, :mod:`.rechecks` re-checks the
  subscriptions' creators in the background;
- what the routers share: :mod:`.streaming` (the Server-Sent Events gate, limits, heartbeats
  and re-checks every stream goes through), :mod:`.visible_runs` (the runs a caller may see),
  :mod:`.subscription_input` and :mod:`.subscription_views` (what a subscription's caller sends
  and sees), :mod:`.creators` (whom a subscription is re-checked as);
- the router preamble: :mod:`.routing` (known query parameters only, the documented answers, the
  caller, the namespaces a list may show);
- the auth seam every route goes through: :mod:`.auth`;
- the application's state and what sits in front of the routes: :mod:`.deps`, :mod:`.bodylimit`
  (request bodies bounded before any route runs), :mod:`.feeds` (one poll per watched run,
  shared by its streams), :mod:`.charts` (the pages' usage charts);
- below them: :mod:`.ratelimit` (per-client rate limits), :mod:`.models` (the answers' models),
  :mod:`.metrics_collectors` (figures computed when ``/metrics`` is scraped), and, at the bottom,
  :mod:`.access` (who is asking and what they may do), :mod:`.limits`, :mod:`.paging`,
  :mod:`.params` (the shared parameter types) and :mod:`.problems` (errors as problem details).

Every route reads through :mod:`controller.store` (logs through :mod:`controller.bus.logstore`).
"""
