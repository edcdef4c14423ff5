"""A pending finding (what a running job printed, not a verdict) is ``finding.observed``: told only
to a subscription that names that type, never to Alertmanager, written as a ``Normal`` Kubernetes
Event; it becomes ``finding.firing`` once confirmed, and one the run recovered from ends silently."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.kube_events import event_for
from consumers.notify import Notifier, NotifyMetrics
from consumers.notify.consumer import finding_occurrence
from controller.contract.notifications import Filters, JobInfo
from controller.contract.settings import AlertmanagerSettings, Settings
from controller.metrics import PipelineMetrics
from controller.store.models import NotifyAlert, NotifyFinding
from controller.testing.drills import rows_in
from controller.testing.notify import finding, job, with_notify

RUNNING = job("Running")
INFO = JobInfo(**RUNNING.ref.model_dump())


@pytest.mark.parametrize(
    ("types", "wanted"),
    [
        ((), False),
        (("finding.*",), False),
        (("finding.observed",), True),
        (("finding.*", "finding.observed"), True),
    ],
    ids=["any", "finding-wildcard", "named", "wildcard-and-named"],
)
def test_only_a_subscription_naming_finding_observed_gets_it(types: tuple[str, ...], wanted: bool) -> None:
    filters = Filters.of(None, None, None, types, (), ())

    assert filters.wants_type("finding.observed") is wanted
    assert filters.wants_type("finding.firing") is (types != ("finding.observed",))


@pytest.mark.parametrize(
    ("was", "now", "told"),
    [
        (None, "pending", "finding.observed"),
        ("pending", "pending", None),
        ("pending", "firing", "finding.firing"),
        ("pending", "resolved", None),
        ("firing", "resolved", "finding.resolved"),
        ("resolved", "pending", "finding.observed"),
    ],
    ids=["observed", "still-observed", "confirmed", "recovered", "resolved", "observed-again"],
)
def test_what_each_change_of_status_tells(was: str | None, now: str, told: str | None) -> None:
    previous = NotifyFinding(id="f", status=was, revision=1) if was is not None else None

    occurrence, _ = finding_occurrence(previous, finding(RUNNING, "gpu-oom", status=now, revision=2), INFO)

    assert (occurrence.type if occurrence is not None else None) == told


def test_a_pending_finding_is_a_normal_kubernetes_event_marked_observed() -> None:
    event = event_for(finding(RUNNING, "gpu-oom", status="pending", severity="warning"), "rules-0")

    assert event["type"] == "Normal" and event["message"].startswith("[observed] ")
    assert event_for(finding(RUNNING, "gpu-oom"), "rules-0")["type"] == "Warning"


async def test_alertmanager_hears_of_a_finding_only_once_it_fires(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, alertmanager=AlertmanagerSettings(urls=["http://alertmanager.invalid:9093"]))
    notifier = Notifier(engine, settings.notify, NotifyMetrics.on(metrics.registry))

    await notifier.observe_findings([finding(RUNNING, "gpu-oom", status="pending", revision=1)])
    await notifier.observe_findings([finding(RUNNING, "gpu-oom", status="resolved", revision=2)])
    recovered = await rows_in(engine, NotifyAlert)
    await notifier.observe_findings([finding(RUNNING, "gpu-oom", status="pending", revision=3)])
    await notifier.observe_findings([finding(RUNNING, "gpu-oom", status="firing", revision=4)])

    assert (recovered, await rows_in(engine, NotifyAlert)) == (0, 1)
