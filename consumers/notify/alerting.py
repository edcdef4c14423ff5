"""What Alertmanager is told of a finding: its labels, annotations and times.

Labels (what routes, silences, inhibitions and grouping match on; one alert per label set):

================  ========================================================================
``alertname``     per rule: ``TrainingJob`` and the rule in CamelCase (:func:`alertname`:
                  ``oom`` → ``TrainingJobOOM``, ``hang-progress`` → ``TrainingJobHangProgress``)
``namespace``     the job's namespace
``training_job``  the job's name (not ``job``: Prometheus gives that label its scrape job)
``kind``          the job's kind (``MPIJob``, ``PyTorchJob``, ``TrainJob``…)
``uid``           the run (job uid): two attempts of one job are two alerts
``rule``          the finding's rule (``oom``, ``image-pull``…)
``severity``      ``info``, ``warning`` or ``critical``
``cluster``       ``notify.cluster``
================  ========================================================================

Annotations: ``summary`` and ``description`` (the root cause; ``description`` adds the
remediation steps), ``remediation``, ``runbook_url`` (the troubleshooting section) and
``run_url`` (the run in this API, also the alert's ``generatorURL``).

A firing alert says it ends four resend intervals after it was sent (``endsAt``), as
Prometheus does, so an Alertmanager that stops hearing of it resolves it by itself; a
resolved one carries the time the finding resolved.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from controller.contract.findings import Finding
from controller.contract.notifications import JobInfo, links
from controller.contract.settings import NotifySettings
from controller.store.alerts import Alert

ALERTNAME_PREFIX = "TrainingJob"
_ACRONYMS = {"oom": "OOM", "gpu": "GPU", "mpi": "MPI"}
VALID_FOR = 4
"""A firing alert is valid this many resend intervals (Prometheus' rule too)."""


def alertname(rule: str) -> str:
    """The alert's name for ``rule``: ``gpu-oom`` → ``TrainingJobGPUOOM``."""
    words = (_ACRONYMS.get(word, word.capitalize()) for word in rule.split("-"))
    return ALERTNAME_PREFIX + "".join(words)


def alert_row(
    finding: Finding, job: JobInfo, settings: NotifySettings, now: datetime, *, again: bool = False
) -> dict[str, Any]:
    """The stored alert of a firing finding (see :func:`controller.store.alerts.fire`); ``again``:
    it fires again after resolving, a new episode that starts when it was last seen."""
    to = links(settings.public_url, settings.docs_url, job.uid, finding.doc_anchor)
    remediation = "\n".join(f"- {step}" for step in finding.remediation)
    annotations = {
        "summary": finding.root_cause,
        "description": f"{finding.root_cause}\n{remediation}".strip(),
        "remediation": remediation,
        "runbook_url": to.docs or "",
        "run_url": to.run,
    }
    labels = {
        "alertname": alertname(finding.rule),
        "namespace": job.namespace,
        "training_job": job.name,
        "kind": job.kind,
        "uid": job.uid,
        "rule": finding.rule,
        "severity": finding.severity,
        "cluster": settings.cluster,
    }
    return {
        "finding_id": finding.id,
        "labels": labels,
        "annotations": {k: v for k, v in annotations.items() if v},
        "generator_url": to.run,
        "starts_at": finding.last_seen if again else finding.first_seen,
        "updated_at": now,
    }


def payload(alert: Alert, now: datetime, resend_interval_s: float) -> dict[str, Any]:
    """One entry of ``POST /api/v2/alerts`` (Alertmanager's ``postableAlert``)."""
    ends = alert.ends_at or now + timedelta(seconds=VALID_FOR * resend_interval_s)
    return {
        "labels": alert.labels,
        "annotations": alert.annotations,
        "startsAt": alert.starts_at.isoformat(),
        "endsAt": ends.isoformat(),
        "generatorURL": alert.generator_url,
    }
