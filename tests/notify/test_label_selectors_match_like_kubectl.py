"""Subscription filters: label selectors as ``kubectl -l`` reads them, event type wildcards, and
rules/severities for findings only."""

from __future__ import annotations

import pytest

from controller.contract.notifications import FilterError, Filters, FindingInfo, JobInfo
from controller.contract.selectors import MAX_LENGTH, SelectorError, parse_selector
from controller.testing.events import T0

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
        ("team in (nlp,cv)", True),
        ("team in (cv)", False),
        ("team notin (cv, vision)", True),
        ("missing notin (x)", True),
        ("team in (nlp),tier=prod", True),
    ],
)
def test_a_selector_matches_as_kubectl_would(selector: str, matches: bool) -> None:
    assert parse_selector(selector).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ("team in (nlp,cv", "is not key, !key"),
        ("team=nlp,,tier=prod", "empty requirement"),
        ("=nlp", "is not key, !key"),
        ("team=a b", "is not key, !key"),
        ("Team_=x", "not a valid label key"),
        ("team=-bad-", "not a valid label value"),
        ("!team=nlp", "'!' goes with a bare key only"),
    ],
    ids=[
        "unclosed-set",
        "empty-part",
        "no-key",
        "space-in-value",
        "bad-key",
        "bad-value",
        "negated-equality",
    ],
)
def test_a_bad_selector_names_the_part_that_is_wrong(selector: str, reason: str) -> None:
    with pytest.raises(SelectorError, match=reason.replace("(", r"\(")):
        parse_selector(selector)


def test_a_subscription_filter_names_the_bad_selector() -> None:
    with pytest.raises(FilterError, match="not a valid label key"):
        Filters.of(None, None, "Team_=x", [], [], [])


@pytest.mark.parametrize("text", [" " * 30_000, "a" * 30_000, "!" + " " * 30_000, "a=b," * 8_000])
def test_a_long_selector_is_refused_by_its_length(text: str) -> None:
    with pytest.raises(SelectorError, match=f"at most {MAX_LENGTH}"):
        parse_selector(text)


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
