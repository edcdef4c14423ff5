"""The bus: the one door to NATS and JetStream (only this package imports ``nats``).

Roles name the client's types from ``client`` and reach the bus through these modules:

- connecting and declaring: ``streams`` (connect, declare and align streams and durables),
  ``server`` and ``serverconfig`` (the nats-server program and its configuration file);
- writing: ``publishing`` (deduplicated, retried publishes), ``handing`` (a batch's publishes or
  acks handed to the client in one write), ``logstore`` and ``logshares`` (the ``LOGS`` stream as
  a store of followed lines, each namespace's share of it);
- reading: ``consuming`` (durable batch consumers), ``pulling`` (their pull requests),
  ``settling`` (ack, retry, dead-letter), ``reading`` (a stream read without acks),
  ``listening`` (a core subscription, messages parsed as bus events), ``backlog`` (streams'
  and consumers' standing);
- key-value state: ``buckets`` (open, forget keys), ``keyspace`` (a role's state by key prefix),
  ``leases`` and ``holding`` (partition leases and a fair share of them), ``versions`` (the
  ``published`` bucket's I/O) and ``positions`` (where each watch stood);
- ``answering``: requests asked again while JetStream cannot answer yet, the fault handling of
  every door above.
"""
