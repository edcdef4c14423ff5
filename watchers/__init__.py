"""The processes that look at the cluster and publish what they see.

- The watch path (``service``, leader-elected): list-then-watch each resource kind
  (``watching``), correlate pods and events to their run (``correlating``), turn raw objects into
  typed events (``normalizing``) and publish them to JetStream (``pipeline``, shared with replay
  of ``recording`` files);
- ``admission``: the validating admission webhook that records who created, changed or deleted
  jobs, with its durable spool, apart from the watch path.
"""
