"""The Kubernetes API gateway: the one module that imports ``kubernetes``.

Everything the controller asks of the API server goes through :class:`KubeGateway`: list and
watch (raw JSON, never the client's models — they are far too slow for thousands of pods),
container log tails, Lease get/create/replace for leader election, and Event creation. The
official client still does what it is good at: configuration (in-cluster service account,
kubeconfig contexts, exec/OIDC token refresh, TLS, proxies) and the HTTP connection pool; we
call its generic ``param_serialize``/``call_api`` layer so one code path serves core and custom
resources alike.

Methods are synchronous and may block; the async watch loop and leader elector call them from
threads.

What may pass is retried here, in the one request path, by urllib3's own ``Retry`` (the client
hands ``Configuration.retries`` to its pool manager), bounded by :class:`RetryPolicy`
(``MPIJC_KUBE__READ_RETRIES``, ``…__RETRY_BACKOFF_S``, ``…__RETRY_AFTER_MAX_S``):

* reads (GET: lists, gets, log tails, the initial request of a watch) answered 429, 500, 502,
  503 or 504, or not answered (refused, reset, timed out), are sent again after an exponential,
  jittered backoff, or after the server's ``Retry-After`` (capped), at most ``read_retries``
  times; then the last answer is raised as :class:`APIUnavailableError`. Reads change nothing,
  so repeating them is safe;
* writes (Lease create/replace, Event create) are sent again only when no connection could be
  made (nothing reached the server); an answer, or a connection lost after the request went
  out, is the caller's to judge: a Lease replace is guarded by its resourceVersion and the
  elector decides with its own clock, an Event is best effort;
* a watch stream that breaks once it has been answered is not retried here: the watch loop
  (:mod:`watchers.watching`) resumes or relists, as only it knows from where;
* 403, 404, 409, 410 and every other 4xx but 429 are answers, never retried.

Failures are raised as :mod:`controller.kube.errors` classes, translated from the client's
``ApiException`` and urllib3's transport errors here and only here. The long requests (a watch,
a followed log) are :mod:`controller.kube.streams`.
"""

from __future__ import annotations

import builtins
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypedDict, Unpack, cast

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from controller.contract.settings import KubeSettings
from controller.kube.errors import (
    APIError,
    APINotFoundError,
    KubeConfigError,
    error_from_status,
    status_body,
    unavailable,
)
from controller.kube.resources import (
    EVENTS,
    LEASES,
    PODS,
    Lease,
    RawObject,
    Resource,
)
from controller.kube.streams import FOLLOW_READ_TIMEOUT_S, LogFollow, Query, WatchStream

__all__ = [
    "DEFAULT_RETRIES",
    "NO_RETRIES",
    "KubeGateway",
    "ListPage",
    "RetryPolicy",
]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
"""Seconds to establish a connection; an API server that takes longer is treated as down."""
READ_TIMEOUT_S = 60.0
"""Seconds of silence tolerated on a non-watch response (a 5,000-pod list streams well within it)."""
WATCH_READ_GRACE_S = 30.0
"""Extra seconds of silence on a watch beyond its server-side timeout before the stream counts as dead."""
CONNECTION_POOL_SIZE = 48
"""Connections kept for reuse: one per open watch (a job kind each, two pod watches, events), the
log tails read side by side, the Lease and reviews; the client's default (5 per CPU) is fewer than
the watches on a small machine, and every request beyond it opens and drops a connection."""

Method = Literal["GET", "POST", "PUT", "DELETE"]

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers that say "not now": throttled, or the API server (or the load balancer before it) failing."""
RETRIED_METHODS = frozenset({"GET"})
"""Methods retried after an answer or a lost connection; a write is retried only when never sent."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a read is retried (see the module docstring for what is)."""

    retries: int
    """Requests after the first; 0 answers every failure at once."""
    backoff_s: float
    """urllib3's backoff factor: waits of 0, 2, 4, 8 times this, plus up to this much jitter."""
    retry_after_max_s: int
    """Most seconds one wait lasts, a server's ``Retry-After`` included."""

    @classmethod
    def from_settings(cls, kube: KubeSettings) -> RetryPolicy:
        return cls(kube.read_retries, kube.retry_backoff_s, kube.retry_after_max_s)

    def urllib3_retry(self) -> Retry:
        """The policy as the ``Retry`` the client's pool manager applies to every request."""
        return Retry(
            total=self.retries,
            allowed_methods=RETRIED_METHODS,
            status_forcelist=RETRIED_STATUSES,
            backoff_factor=self.backoff_s,
            backoff_jitter=self.backoff_s,
            backoff_max=self.retry_after_max_s,
            respect_retry_after_header=True,
            retry_after_max=self.retry_after_max_s,
            raise_on_status=False,  # the last answer is returned, and raised with its Status body
        )


DEFAULT_RETRIES = RetryPolicy.from_settings(KubeSettings())
"""The policy of the settings' defaults."""
NO_RETRIES = RetryPolicy(retries=0, backoff_s=0.0, retry_after_max_s=0)
"""Every failure raised at once (tests of the callers' own recovery)."""


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: its objects, the list's resourceVersion, the token of the next page."""

    items: builtins.list[RawObject]
    resource_version: str
    continue_token: str | None = None


class _Sent(TypedDict, total=False):
    """What a request sends beside its method and path, as :meth:`KubeGateway.request` takes it."""

    query: Query | None
    body: object
    read_timeout_s: float


def _from_api_exception(exc: ApiException) -> APIError:
    status = int(exc.status or 0)
    return error_from_status(status, status_body(exc.body), fallback=str(exc.reason or ""))


class KubeGateway:
    """Synchronous, raw-JSON access to the Kubernetes API through one ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: Any) -> None:
        """Wrap a ``kubernetes.client.ApiClient`` (typed ``Any``: the client's annotations are partial)."""
        self._api = api_client

    @staticmethod
    def _configuration(retries: RetryPolicy, connections: int = 0, **kwargs: Any) -> Any:
        configuration = client.Configuration(**kwargs)
        configuration.keep_alive = True  # TCP keepalive: idle watches through proxies are probed, not lost
        configuration.retries = retries.urllib3_retry()
        # connections held at once (log follows): beyond the pool's size each one released is closed
        pool = max(configuration.connection_pool_maxsize, CONNECTION_POOL_SIZE, connections)
        configuration.connection_pool_maxsize = pool
        return configuration

    @classmethod
    def from_settings(cls, kube: KubeSettings, *, connections: int = 0) -> KubeGateway:
        """:meth:`from_config` with the kubeconfig, context and retry policy of ``kube``."""
        retries = RetryPolicy.from_settings(kube)
        return cls.from_config(kube.kubeconfig, kube.context, retries=retries, connections=connections)

    @classmethod
    def from_config(
        cls,
        kubeconfig: Path | None = None,
        context: str | None = None,
        *,
        retries: RetryPolicy = DEFAULT_RETRIES,
        connections: int = 0,
    ) -> KubeGateway:
        """In-cluster service account first, then kubeconfig; a given file or context: kubeconfig only.
        ``connections``: how many the caller holds at once at most (its log follows), kept pooled."""
        configuration = cls._configuration(retries, connections)
        try:
            if kubeconfig is None and context is None:
                try:
                    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                except ConfigException:
                    log.debug("not in a cluster; loading kubeconfig")
                else:
                    return cls(client.ApiClient(configuration))
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig is not None else None,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (ConfigException, OSError) as exc:
            raise KubeConfigError(f"no usable Kubernetes configuration: {exc}") from exc
        return cls(client.ApiClient(configuration))

    @classmethod
    def for_url(
        cls, url: str, *, retries: RetryPolicy = DEFAULT_RETRIES, connections: int = 0
    ) -> KubeGateway:
        """A gateway to a plain-HTTP API server without auth (a simulated cluster, kubectl proxy)."""
        configuration = cls._configuration(retries, connections, host=url.rstrip("/"))
        return cls(client.ApiClient(configuration))

    def close(self) -> None:
        """Close pooled connections."""
        self._api.close()

    def __enter__(self) -> KubeGateway:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the one request path -------------------------------------------------------------------

    def request(
        self,
        method: Method,
        path: str,
        *,
        query: Query | None = None,
        body: object = None,
        accept: str = "application/json",
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request (retried as the module docstring says); return the 2xx response unread,
        or raise the matching :class:`APIError`."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        serialized = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        what = f"{method} {path}"
        try:
            response = self._api.call_api(*serialized, _request_timeout=(CONNECT_TIMEOUT_S, read_timeout_s))
            if not 200 <= response.status <= 299:
                response.read()
                ApiException.from_response(http_resp=response, body=None, data=None)  # always raises
        except ApiException as exc:
            raise _from_api_exception(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unavailable(what, exc) from exc
        return cast(urllib3.BaseHTTPResponse, response.response)

    def _json(self, method: Method, path: str, **sent: Unpack[_Sent]) -> Any:
        response = self.request(method, path, **sent)
        try:
            return json.loads(response.data)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unavailable(f"{method} {path}", exc) from exc
        except ValueError as exc:
            raise APIError(response.status, f"{method} {path}: response is not JSON") from exc

    # -- list and watch -------------------------------------------------------------------------

    def list(
        self, resource: Resource, namespace: str | None, *, read_timeout_s: float = READ_TIMEOUT_S
    ) -> tuple[builtins.list[RawObject], str]:
        """All objects of ``resource`` (cluster-wide if ``namespace`` is None) in one answer, and
        the list's resourceVersion; ``read_timeout_s`` of silence make it :class:`APIUnavailableError`."""
        page = self.list_page(resource, namespace, read_timeout_s=read_timeout_s)
        return page.items, page.resource_version

    def list_page(
        self,
        resource: Resource,
        namespace: str | None,
        limit: int = 0,
        continue_token: str | None = None,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> ListPage:
        """One page of at most ``limit`` objects (0: all), the first or the one ``continue_token`` names.

        Every page of a list is of the first one's resourceVersion; a token the server no longer
        honours (its snapshot compacted away) is :class:`APIGoneError`. The API server omits
        ``apiVersion``/``kind`` on the items of built-in lists; they are filled in so listed
        objects look exactly like watched ones.
        """
        query: Query = [("labelSelector", resource.label_selector)] if resource.label_selector else []
        if limit > 0:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        body = self._json("GET", resource.path(namespace), query=query, read_timeout_s=read_timeout_s)
        items = cast(builtins.list[RawObject], body.get("items") or [])
        for item in items:
            if isinstance(item, dict):
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
        metadata = body.get("metadata") or {}
        return ListPage(items, str(metadata.get("resourceVersion") or ""), metadata.get("continue") or None)

    def watch(
        self, resource: Resource, namespace: str | None, resource_version: str, timeout_s: float
    ) -> WatchStream:
        """Watch changes after ``resource_version`` for at most ``timeout_s`` seconds, with bookmarks."""
        query: Query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(max(1, int(timeout_s)))),
        ]
        if resource.label_selector:
            query.append(("labelSelector", resource.label_selector))
        return WatchStream(self, resource, resource.path(namespace), query, timeout_s + WATCH_READ_GRACE_S)

    # -- discovery --------------------------------------------------------------------------------

    def served(self, resource: Resource) -> bool:
        """Whether the API server serves ``resource`` now (its CRD is installed and established):
        its group version's discovery document (``GET /apis/<group>/<version>``, an
        ``APIResourceList``) names its plural. The core group is always served; a group version
        the server does not know answers 404, which is "no"."""
        if not resource.group:
            return True
        try:
            body = self._json("GET", f"/apis/{resource.group}/{resource.version}")
        except APINotFoundError:
            return False
        listed = body.get("resources") if isinstance(body, dict) else None
        return any(isinstance(r, dict) and r.get("name") == resource.plural for r in listed or ())

    # -- objects ----------------------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> RawObject:
        """One object by name."""
        return cast(RawObject, self._json("GET", resource.path(namespace, name)))

    def create(self, resource: Resource, namespace: str | None, body: RawObject) -> RawObject:
        """Create an object; :class:`APIConflictError` if the name is taken."""
        return cast(RawObject, self._json("POST", resource.path(namespace), body=body))

    def replace(self, resource: Resource, namespace: str | None, name: str, body: RawObject) -> RawObject:
        """Replace an object; :class:`APIConflictError` if ``body``'s metadata.resourceVersion is stale."""
        return cast(RawObject, self._json("PUT", resource.path(namespace, name), body=body))

    def get_lease(self, namespace: str, name: str) -> Lease:
        """A ``coordination.k8s.io/v1`` Lease; :class:`APINotFoundError` if absent."""
        return cast(Lease, self.get(LEASES, namespace, name))

    def create_lease(self, namespace: str, body: Lease) -> Lease:
        """Create a Lease; :class:`APIConflictError` if another replica created it first."""
        return cast(Lease, self.create(LEASES, namespace, cast(RawObject, body)))

    def replace_lease(self, namespace: str, name: str, body: Lease) -> Lease:
        """Replace a Lease, guarded by its ``metadata.resourceVersion``."""
        return cast(Lease, self.replace(LEASES, namespace, name, cast(RawObject, body)))

    def create_event(self, namespace: str, body: RawObject) -> RawObject:
        """Create a core/v1 Event (to annotate a job with what the controller found)."""
        return self.create(EVENTS, namespace, body)

    # -- logs -------------------------------------------------------------------------------------

    def read_log_tail(
        self,
        namespace: str,
        pod: str,
        container: str,
        tail_lines: int,
        limit_bytes: int,
        since_s: int | None = None,
    ) -> builtins.list[str]:
        """The last ``tail_lines`` lines of a container's current log, at most ``limit_bytes`` bytes;
        with ``since_s``, only lines written in the last ``since_s`` seconds (a progress probe)."""
        query: Query = [
            ("container", container),
            ("tailLines", str(tail_lines)),
            ("limitBytes", str(limit_bytes)),
            ("previous", "false"),
        ]
        if since_s is not None:
            query.append(("sinceSeconds", str(max(1, since_s))))
        path = PODS.path(namespace, pod, "log")
        response = self.request("GET", path, query=query, accept="text/plain")
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unavailable(f"GET {path}", exc) from exc
        return data.decode("utf-8", errors="replace").splitlines()

    def follow_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        since_time: str | None = None,
        *,
        previous: bool = False,
        read_timeout_s: float = FOLLOW_READ_TIMEOUT_S,
    ) -> LogFollow:
        """Follow a container's current log, every line stamped by the kubelet (RFC 3339 with
        nanoseconds), from ``since_time`` (whole seconds, RFC 3339) or its start; with
        ``previous``, read the log of its instance before the current one to its end instead.

        The client's ``read_namespaced_pod_log`` has no ``sinceTime`` parameter, so the same
        ``pods/log`` request goes through the one request path (its retries and errors)."""
        which = ("previous", "true") if previous else ("follow", "true")
        query: Query = [("container", container), which, ("timestamps", "true")]
        if since_time is not None:
            query.append(("sinceTime", since_time))
        return LogFollow(self, PODS.path(namespace, pod, "log"), query, read_timeout_s)
