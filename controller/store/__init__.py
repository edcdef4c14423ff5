"""The store: the one door to PostgreSQL (every SQL statement of the project is written here).

- the engine and the schema: ``engine`` (engines, retryable errors, the one ping and advisory
  lock), ``models`` (tables), ``migrate`` (Alembic from code), ``roles`` (what the runtime role
  may do), ``timing`` (write timings), ``bulk`` (many rows in one statement), ``wakeups``
  (``LISTEN``/``NOTIFY``);
- history: ``history`` (the write side), ``queries`` (the read side the API and CLI share),
  ``livefeed`` (a run's timeline as it grows), ``filters`` (the narrowing every read side shares);
- notification: ``subscriptions``, ``outbox`` (deliveries owed, claimed, settled),
  ``notifystate`` (what the notify consumer compared last), ``alerts`` (the Alertmanager sink);
- audit: ``auditchain`` (hash-chained appends, the purge, queries), ``auditverification``
  (verify the chain, compare it with a SIEM's copy), ``auditformats`` (the export formats),
  ``corroboration`` and ``claims`` (admission records judged against the watch stream).
"""
