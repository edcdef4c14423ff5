"""The OpenAPI schema's model names are published: clients generated from ``/openapi.json`` name
their types after them, so none may vanish or change by a rename in the code.

Pydantic names a schema after its class (a ``title`` does not change the name), so a response
model renamed in Python renames its schema, and two classes of one name in the schema come out
as long, module-qualified names. Names may be added; a removal or rename must be deliberate (a
new API version), and this list changes with it.
"""

from __future__ import annotations

from controller.api.app import create_app
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine

ENGINE = "postgresql://nobody@127.0.0.1:1/none"

PUBLISHED = frozenset(
    {
        "AuditLink", "AuditPage", "BrokenLink", "ChainVerification", "ComparedRun", "Comparison",
        "Condition", "ContainerState", "CreatedSubscription", "Delivery", "DeliveryAttempt",
        "DeliveryJob", "DeliveryPage", "DurationStats", "Durations", "Evidence", "FailureCause",
        "Finding", "FindingList", "GpuUsage", "InvalidField", "JobSpecSummary", "K8sEvent",
        "LogEntry", "LogPage", "Notice", "Pod", "PodHistory", "PodStateEntry", "PodSummary",
        "PodUsage", "Problem", "Resources", "RoleSpec", "RotatedSecret", "RunDetail", "RunPage",
        "RunSummary", "SpecField", "Status", "Subscription", "SubscriptionDetail", "SubscriptionIn",
        "SubscriptionPage", "SubscriptionPatch", "Termination", "Timeline", "TimelineEntry", "Trend",
        "TrendPoint", "Unprocessable", "UsageLine",
    }
)  # fmt: skip


def test_every_published_schema_name_is_still_there() -> None:
    schemas = create_app(make_engine(ENGINE), PipelineMetrics()).openapi()["components"]["schemas"]
    assert PUBLISHED - set(schemas) == set()
