"""The contract: what every process shares, depending on nothing of ours and on no broker,
database, web or Kubernetes client.

- messages: ``message`` (their base), ``events`` (what the watchers observed), ``findings``,
  ``audit``, ``logs`` (stored log lines and their timestamps and ranks), ``notifications``
  and ``cloudevents`` (what receivers see), ``signing`` (Standard Webhooks), ``runs`` (the
  API's answers about runs, shared by the API and its Python client);
- names and vocabulary: ``subjects`` (every subject, stream and durable name), ``kinds`` and
  ``kubeflow`` (the training kinds, labels, resourceVersions), ``names``, ``selectors``,
  ``quantities``, ``units``, ``xids`` (the driver's GPU error codes and clock-throttle reasons:
  what each means, what to do);
- settings and policy: ``settings``, ``thresholds``, ``access`` (who a caller is),
  ``egress`` (the SSRF guard), ``credentials`` (CA files and token files of outbound clients),
  ``redaction``;
- mechanics every room uses: ``clock``, ``backoff``, ``cancelling``, ``errors``, ``phases``
  (where a start's time goes, in its log line), ``turns`` (long CPU work handing the event loop
  over every few milliseconds).
"""
