"""The retry schedule: delays from the configured list, scaled by jitter, never earlier than a
Retry-After (capped), and nothing after the last entry; what each HTTP status means."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from consumers.notify.sending import RetrySchedule, parse_retry_after, verdict_of


def test_delays_follow_the_schedule_with_jitter_then_stop() -> None:
    backoff = RetrySchedule([5.0, 300.0], jitter=0.2, max_retry_after_s=3600, rng=random.Random(7))
    firsts = [backoff.delay(1) for _ in range(200)]
    assert all(d is not None and 4.0 <= d <= 6.0 for d in firsts)
    assert len({round(d or 0, 3) for d in firsts}) > 100  # spread, not lockstep
    second = backoff.delay(2)
    assert second is not None and 240 <= second <= 360
    assert backoff.delay(3) is None and backoff.attempts == 3


def test_retry_after_wins_when_later_and_is_capped() -> None:
    backoff = RetrySchedule([1.0], jitter=0.0, max_retry_after_s=60, rng=random.Random(1))
    assert backoff.delay(1, retry_after_s=30) == 30
    assert backoff.delay(1, retry_after_s=0.5) == 1.0
    assert backoff.delay(1, retry_after_s=86400) == 60


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120
    assert parse_retry_after("Fri, 20 Nov 2026 10:01:30 GMT", now) == 90
    assert parse_retry_after("Fri, 20 Nov 2026 09:00:00 GMT", now) == 0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, "delivered"),
        (204, "delivered"),
        (301, "failed"),
        (400, "failed"),
        (404, "failed"),
        (408, "retry"),
        (410, "gone"),
        (429, "retry"),
        (500, "retry"),
        (502, "retry"),
        (504, "retry"),
    ],
)
def test_each_status_has_its_meaning(status: int, verdict: str) -> None:
    assert verdict_of(status) == verdict
