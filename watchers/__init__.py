"""The processes that look at the cluster and publish what they see.

- The watch path (``service``, leader-elected through ``leader``): list-then-watch each resource
  kind the API server serves (``watching``, ``discovery``), resuming from where each watch stood
  (``positions``); correlate pods and events to their run (``correlating``; the conditions of
  the nodes their pods run on as changes: ``nodes``), turn raw objects into typed events
  (``normalizing``; ``manifests``: a job as submitted) and publish them to JetStream
  (``pipeline``, shared with replay of ``recording`` files), skipping what was published before a
  restart and telling what was deleted while no watcher ran (``published``);
- beside it: ``tails`` (log tails of containers that ended in error), ``usage`` (what the pods
  use, from the cluster's Prometheus) and ``dcgm`` (their GPUs' health series, read with it) and
  ``neighbours`` (the other pods on their nodes, read with it),
  ``metrics`` (the watch loops' metrics);
- the log followers of every replica: ``following`` (follow containers' logs onto ``LOGS``),
  ``lines`` (the followed bytes as bounded, redacted, timestamped lines), ``packing`` (those
  lines as the JSON their batches store, a usual read by columns), ``sharing`` (the
  followed runs shared across replicas through leases);
- ``admission``: the validating admission webhook that records who created, changed or deleted
  jobs, with its durable spool, apart from the watch path.
"""
