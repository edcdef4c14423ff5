"""Subscription filters: equality-based label selectors as ``kubectl -l`` reads them, event type
wildcards, and rules/severities for findings only."""

from __future__ import annotations

import pytest

from controller.notifications import FilterError, Filters, FindingInfo, JobInfo, parse_selector
from tests.eventbuilders import T0

LABELS = {"team": "nlp", "tier": "prod", "app.kubernetes.io/part-of": "llm"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("team=nlp", True),
        ("team==nlp", True),
        ("team=cv", False),
        ("team!=cv", True),
        ("team!=nlp", False),
        ("missing!=x", True),
        ("team", True),
        ("missing", False),
        ("!missing", True),
        ("!team", False),
        ("team=nlp, tier!=dev ,app.kubernetes.io/part-of=llm", True),
        ("team=nlp,tier=dev", False),
        ("team=", False),
    ],
)
def test_a_selector_matches_as_kubectl_would(selector: str, matches: bool) -> None:
    assert parse_selector(selector).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ("team in (nlp,cv)", "only =, ==, != and existence"),
        ("team=nlp,,tier=prod", "empty requirement"),
        ("=nlp", "is not key, !key"),
        ("team=a b", "is not key, !key"),
        ("Team_=x", "not a valid label key"),
        ("team=-bad-", "not a valid label value"),
        ("!team=nlp", "'!' goes with a bare key only"),
    ],
    ids=["set-based", "empty-part", "no-key", "space-in-value", "bad-key", "bad-value", "negated-equality"],
)
def test_a_bad_selector_names_the_part_that_is_wrong(selector: str, reason: str) -> None:
    with pytest.raises(FilterError, match=reason.replace("(", r"\(")):
        parse_selector(selector)


JOB = JobInfo(uid="u", kind="MPIJob", namespace="team-a", name="pi", labels=LABELS)
OOM = FindingInfo(
    id="f",
    rule="oom",
    severity="critical",
    status="firing",
    root_cause="Worker 2 failed: out of memory",
    doc_anchor="docs/troubleshooting.md#oom",
    revision=1,
    first_seen=T0,
    last_seen=T0,
)


@pytest.mark.parametrize(
    ("filters", "job_failed", "oom_firing"),
    [
        (Filters(), True, True),
        (Filters.of("team-a", "pi", "team=nlp", ["job.*"], [], []), True, False),
        (Filters.of(None, None, None, ["finding.*"], ["oom"], ["critical"]), False, True),
        (Filters.of(None, None, None, [], ["mpi-comm"], []), True, False),
        (Filters.of(None, None, None, [], [], ["warning"]), True, False),
        (Filters.of("team-b", None, None, [], [], []), False, False),
        (Filters.of(None, "other", None, [], [], []), False, False),
        (Filters.of(None, None, "tier=dev", [], [], []), False, False),
    ],
    ids=[
        "everything",
        "job-events-of-pi",
        "critical-ooms",
        "other-rule",
        "other-severity",
        "other-ns",
        "other-name",
        "other-labels",
    ],
)
def test_filters_select_events(filters: Filters, job_failed: bool, oom_firing: bool) -> None:
    assert filters.matches("job.failed", JOB) is job_failed
    assert filters.matches("finding.firing", JOB, OOM) is oom_firing


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"event_types": ["job.exploded"]}, "unknown event types ['job.exploded']"),
        ({"rules": ["oops"]}, "unknown rules ['oops']"),
        ({"severities": ["fatal"]}, "unknown severities ['fatal']"),
    ],
    ids=["event-type", "rule", "severity"],
)
def test_unknown_names_are_refused(kwargs: dict[str, list[str]], reason: str) -> None:
    values = {"event_types": [], "rules": [], "severities": [], **kwargs}
    with pytest.raises(FilterError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        Filters.of(None, None, None, values["event_types"], values["rules"], values["severities"])
