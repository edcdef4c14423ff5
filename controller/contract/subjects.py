"""Every NATS subject, stream and durable consumer name, built in one place.

Subjects (``docs/architecture.md``, "Flow"):

- ``jobs.<ns>.<job>.<type>`` (``job``, ``pod``, ``event``, ``log``, ``usage``) — observations from the
  watchers (stream ``JOBS``); the rules split them into partitions by a stable hash of
  ``<ns>.<job>`` (:meth:`Topology.job_partition`). A pod that failed or a Warning event has
  the type token ``urgent`` instead (:func:`urgent`): the rules read those through a lane
  of their own as well, so a failure does not wait behind a relist of thousands of pods
- ``findings.<ns>.<job>.<rule>`` — findings from the rules consumer (stream ``FINDINGS``)
- ``audit.<ns>`` — audit records (stream ``AUDIT``)
- ``dlq.<consumer>`` — dead letters with the original payload and the error (stream ``DLQ``)
- ``logs.<ns>.<job>.<run uid>.<pod>.<container>`` — batches of a followed container's log lines
  (stream ``LOGS``, :mod:`controller.contract.logs`); the last message of a subject is where
  following that container resumes

Kubernetes names may contain ``.``, which NATS treats as a token separator. A token is
escaped reversibly: ``[a-z0-9-]`` stays, ``.`` becomes ``_`` (never valid in a Kubernetes
name), anything else becomes ``~`` and two hex digits per UTF-8 byte.

A :class:`Topology` carries an optional prefix so several installations or test runs can
share one NATS server: prefix ``t1`` gives subjects ``t1.jobs.…`` and streams ``t1_JOBS``.

Durable consumer names (before :meth:`Topology.durable` adds the prefix) are the ``*_DURABLE``
constants below: the consumers that read through them, the bus permissions that let them, and
the drills and benchmarks that wait on them all name them from here.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from typing import Final, Literal

from controller.contract.events import BusEvent, K8sEventObserved, PodObserved, job_of

HISTORY_DURABLE: Final = "history"
"""The history's durable on JOBS."""
HISTORY_FINDINGS_DURABLE: Final = "history-findings"
"""The history's durable on FINDINGS."""
RULES_DURABLE: Final = "rules"
"""The rules' durable on JOBS (its partitions: :meth:`Topology.partition_durable`)."""
RULES_LOGS_DURABLE: Final = "rules-logs"
"""The rules' log reader's durable on LOGS."""
NOTIFY_DURABLE: Final = "notify"
"""The notify consumer's durable on JOBS."""
NOTIFY_FINDINGS_DURABLE: Final = "notify-findings"
"""The notify consumer's durable on FINDINGS."""
AUDIT_DURABLE: Final = "audit"
"""The audit consumer's durable on AUDIT."""
AUDIT_LIFECYCLE_DURABLE: Final = "audit-lifecycle"
"""The audit consumer's durable on JOBS (the lifecycle records it publishes)."""
K8S_EVENTS_DURABLE: Final = "k8s-events"
"""The Kubernetes-events consumer's durable on FINDINGS."""

_PLAIN = re.compile(r"[a-z0-9-]")
_PLAIN_TOKEN = re.compile(r"[a-z0-9-]+")

StreamFamily = Literal["jobs", "findings", "audit", "dlq", "logs"]


@functools.lru_cache(maxsize=65_536)  # namespaces and job names repeat with every event of a run
def escape_token(value: str) -> str:
    """Make ``value`` one NATS subject token, reversibly: ``.`` as ``_``, every other byte that is
    not plain as ``~xx``, the empty string as ``~``."""
    if not value:
        return "~"
    if _PLAIN_TOKEN.fullmatch(value):
        return value
    out: list[str] = []
    for char in value:
        if _PLAIN.fullmatch(char):
            out.append(char)
        elif char == ".":
            out.append("_")
        else:
            out.extend(f"~{byte:02x}" for byte in char.encode())
    return "".join(out)


URGENT = "urgent"
"""Type token of the subjects of failure signals (:func:`urgent`)."""


def urgent(event: BusEvent) -> bool:
    """Whether ``event`` signals a failure the rules should see before any backlog: a pod that
    failed or has a container that ended non-zero (or OOMKilled), or a Warning event. Job
    observations keep their ``job`` subject, which the notify consumer filters on."""
    if isinstance(event, K8sEventObserved):
        return event.event_type == "Warning"
    if isinstance(event, PodObserved):
        return event.phase == "Failed" or any(
            (c.state == "terminated" and (c.exit_code or 0) != 0) or c.reason == "OOMKilled"
            for c in event.containers
        )
    return False


@dataclass(frozen=True)
class Topology:
    """Names on the bus for one installation."""

    prefix: str = ""

    def _subject(self, *tokens: str) -> str:
        return ".".join((self.prefix, *tokens) if self.prefix else tokens)

    def stream(self, family: StreamFamily) -> str:
        """JetStream stream name of a subject family."""
        name = family.upper()
        return f"{self.prefix}_{name}" if self.prefix else name

    def wildcard(self, family: StreamFamily) -> str:
        """All subjects of a family, e.g. ``jobs.>``."""
        return self._subject(family, ">")

    def job_observations(self) -> str:
        """Subjects of job observations only (no pods, no Kubernetes events): ``jobs.*.*.job``."""
        return self._subject("jobs", "*", "*", "job")

    def job_event(self, event: BusEvent) -> str:
        """Subject of a watcher observation: ``jobs.<ns>.<job>.<type>`` (type ``urgent`` for a
        failure signal)."""
        job = job_of(event)
        kind = URGENT if urgent(event) else event.type
        return self._subject("jobs", escape_token(job.namespace), escape_token(job.name), kind)

    def log_probes(self) -> str:
        """Subjects of progress probes only (:class:`~controller.contract.events.LogProbed`):
        ``jobs.*.*.log``."""
        return self._subject("jobs", "*", "*", "log")

    def urgent_job_events(self) -> str:
        """Subjects of failure signals only: ``jobs.*.*.urgent``."""
        return self._subject("jobs", "*", "*", URGENT)

    def finding(self, namespace: str, job: str, rule: str) -> str:
        """Subject of a finding: ``findings.<ns>.<job>.<rule>``."""
        return self._subject("findings", escape_token(namespace), escape_token(job), escape_token(rule))

    def audit(self, namespace: str) -> str:
        """Subject of an audit record: ``audit.<ns>``."""
        return self._subject("audit", escape_token(namespace))

    def dead_letter(self, consumer: str) -> str:
        """Dead-letter subject of one durable consumer: ``dlq.<consumer>``."""
        return self._subject("dlq", escape_token(consumer))

    def log_subject(self, namespace: str, job: str, run_uid: str, pod: str, container: str) -> str:
        """Subject of one container's log lines: ``logs.<ns>.<job>.<run uid>.<pod>.<container>``."""
        tokens = (namespace, job, run_uid, pod, container)
        return self._subject("logs", *(escape_token(token) for token in tokens))

    def namespace_logs(self, namespace: str) -> str:
        """Subjects of every log line of one namespace: ``logs.<ns>.>``."""
        return self._subject("logs", escape_token(namespace), ">")

    def run_logs(self, namespace: str, job: str, run_uid: str, pod: str | None = None) -> str:
        """Subjects of one run's logs (of one of its pods): ``logs.<ns>.<job>.<run uid>.>``."""
        head = ("logs", escape_token(namespace), escape_token(job), escape_token(run_uid))
        return self._subject(*head, escape_token(pod), "*") if pod is not None else self._subject(*head, ">")

    def durable(self, consumer: str) -> str:
        """Durable consumer name (no dots allowed by JetStream)."""
        return f"{self.prefix}_{consumer}" if self.prefix else consumer

    def partition_durable(self, consumer: str, partition: int) -> str:
        """Durable of one partition of a partitioned consumer: ``<consumer>_p<partition>``."""
        return self.durable(f"{consumer}_p{partition}")

    def job_partition(self, subject: str, count: int) -> int | None:
        """The partition (of ``count``) a ``jobs.<ns>.<job>.<type>`` subject belongs to.

        A stable hash (CRC-32) of the escaped ``<ns>.<job>`` tokens, so every event of a job,
        whichever run or type, lands in one partition, in every process and every version.
        ``None`` for a subject that is not a job observation of this installation."""
        tokens = subject.split(".")
        if self.prefix:
            if not tokens or tokens[0] != self.prefix:
                return None
            tokens = tokens[1:]
        if len(tokens) != 4 or tokens[0] != "jobs" or count < 1:
            return None
        return zlib.crc32(f"{tokens[1]}.{tokens[2]}".encode()) % count

    def partition_of(self, namespace: str, job: str, count: int) -> int:
        """The partition (of ``count``) of job ``namespace/job``; as :meth:`job_partition`."""
        return zlib.crc32(f"{escape_token(namespace)}.{escape_token(job)}".encode()) % max(count, 1)

    def bucket(self, name: str) -> str:
        """JetStream key-value bucket name, e.g. ``published`` → ``t1_published``
        (``rules-state``, ``rules-leases``: the rules' snapshots and partition leases)."""
        return f"{self.prefix}_{name}" if self.prefix else name
