"""The shared core every process builds on, in layers (pyproject's import contracts, top to bottom):

- ``cli``: the command line, the composition root that starts the embedded services, wires the
  parts and supervises them under ``up``;
- ``testing``: test doubles and helpers (a simulated cluster, waits); never imported by production code;
- ``api``: the read API (FastAPI): runs, findings, trends, subscriptions, audit, /metrics;
- ``store`` (PostgreSQL: models, migrations, history and audit chain), ``bus`` (NATS JetStream:
  streams, publishing, consuming, key-value buckets), ``kube`` (the Kubernetes gateway);
- ``metrics``: the Prometheus metric groups;
- ``contract``: settings, events, subjects, audit records and backoff, free of any client library.
"""
