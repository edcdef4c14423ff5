"""The Kubernetes door: the one place that talks to the API server (only ``gateway`` imports
``kubernetes``).

- ``gateway``: list, watch, logs, Leases and Events through one client, retried in one path;
- ``streams``: the long requests (a watch, a followed log), closed from any thread;
- ``errors``: the API's failures as our own classes (403, 404, 409, 410, unavailable);
- ``resources``: what is watched, and the raw payloads' shapes;
- ``reviews``: TokenReview and SubjectAccessReview for the API's callers.
"""
