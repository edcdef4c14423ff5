"""How early and how cleanly ``oom-predicted`` and ``straggler`` see what the series show.

The curves are recorded in ``benchmarks/data/trend_curves.json`` (``--record`` writes them again
from the seeded generators below): every one is **synthetic** — shaped after what cAdvisor and
DCGM report for a leak, a sawtooth, a page cache, a straggler, a checkpoint or an evaluation on
rank 0, with noise — and labelled so. No public DCGM or cAdvisor trace with a licence that lets
it be kept in this repository was found, so none is included.

Each curve is one value per scrape (``scrape_s``) per pod. Replayed as the leading watcher reads
it: every ``refresh_s`` a reading of the pod's life so far up to ``window_s``, in the watcher's
age classes and steps (the highest working set and the mean utilization of each step), is folded
into the real rules engine with the default thresholds. Per curve it reports whether the rule
fired and when; per rule, the detection latency from the first symptom in the series (for
``oom-predicted``: the first scrape at which the working set, at its true rate, is within the
horizon of its limit; for ``straggler``: the first scrape of the slow worker) against the target
of two scrape intervals plus the rule's window, the warning's lead before the limit is reached,
and the false positives over the near-miss curves.

    .venv/bin/python -m benchmarks.usage --trends-only      (or --record to rewrite the curves)
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.settings import UsageSettings
from controller.testing.events import at, log_seen, pod_usage, running_run, usage

CURVES = Path(__file__).parent / "data" / "trend_curves.json"
SCRAPE_S = 15.0
DURATION_S = 3600.0
LIMIT_GIB = 16.0
WORKERS = 4

Shape = Callable[[float, random.Random], float]


def _leak(start: float, onset: float, per_min: float, noise: float) -> Shape:
    return lambda t, r: start + max(0.0, t - onset) / 60 * per_min + r.uniform(-noise, noise)


def _reaches(start: float, onset: float, per_min: float) -> float:
    return onset + (LIMIT_GIB - start) / per_min * 60


MemoryCase = tuple[str, bool, Shape, float | None, float | None]
"""Name, whether a warning is due, the working set (GiB) at t, the leak's onset and when it
reaches the limit (seconds)."""


def _memory_cases() -> list[MemoryCase]:
    return [
        ("leak-slow", True, _leak(6.0, 1200, 0.25, 0.05), 1200, _reaches(6.0, 1200, 0.25)),
        ("leak-fast", True, _leak(8.0, 1800, 1.0, 0.05), 1800, _reaches(8.0, 1800, 1.0)),
        ("leak-noisy", True, _leak(5.0, 900, 0.3, 0.5), 900, _reaches(5.0, 900, 0.3)),
        (
            "leak-per-epoch-staircase",
            True,
            lambda t, r: 6.0 + 0.6 * (max(0.0, t - 600) // 120),
            600,
            _reaches(6.0, 600, 0.3),
        ),
        (
            "plateau-after-warm-up",
            False,
            lambda t, r: min(13.0, 6.0 + t / 60 * 0.7) + r.uniform(-0.1, 0.1),
            None,
            None,
        ),
        ("sawtooth-5min", False, lambda t, r: 8.0 + 6.0 * ((t % 300) / 300), None, None),
        ("alloc-free-every-scrape", False, lambda t, r: (9.0, 15.0)[int(t / SCRAPE_S) % 2], None, None),
        ("page-cache-grows-working-set-flat", False, lambda t, r: 6.0 + r.uniform(-0.05, 0.05), None, None),
        ("climb-too-slow", False, lambda t, r: 6.0 + t / 60 * 0.02, None, None),
        ("one-step-up", False, lambda t, r: 6.0 if t < 1800 else 13.0 + r.uniform(-0.05, 0.05), None, None),
        ("flat-noisy-near-limit", False, lambda t, r: 15.0 + r.uniform(-0.3, 0.3), None, None),
    ]


Util = Callable[[int, float, random.Random], float]
GpuCase = tuple[str, bool, int | None, float | None, Util]
"""Name, whether a finding is due, the slow worker and its onset, the utilization of worker w at t."""


def _busy(r: random.Random) -> float:
    return 92.0 + r.uniform(-3, 3)


def _slow_from(worker: int, onset: float, level: float) -> Util:
    return lambda w, t, r: level + r.uniform(-3, 3) if w == worker and t >= onset else _busy(r)


def _checkpoints(inner: Util) -> Util:
    return lambda w, t, r: 2.0 if t % 600 < 60 else inner(w, t, r)


def _gpu_cases() -> list[GpuCase]:
    return [
        ("straggler-at-55", True, 2, 1200.0, _slow_from(2, 1200, 55.0)),
        ("straggler-at-65", True, 1, 600.0, _slow_from(1, 600, 65.0)),
        ("straggler-through-checkpoints", True, 3, 900.0, _checkpoints(_slow_from(3, 900, 50.0))),
        ("warm-up-uneven", False, None, None, lambda w, t, r: 40.0 if w == 2 and t < 600 else _busy(r)),
        ("checkpoint-on-every-worker", False, None, None, _checkpoints(lambda w, t, r: _busy(r))),
        (
            "evaluation-on-rank-0-only",
            False,
            None,
            None,
            lambda w, t, r: _busy(r) if w == 0 or t % 900 >= 180 else 10.0 + r.uniform(-3, 3),
        ),
        ("equal-but-noisy", False, None, None, lambda w, t, r: 85.0 + r.uniform(-10, 10)),
        ("two-workers-slow", False, None, None, lambda w, t, r: 55.0 if w in (1, 2) else _busy(r)),
        (
            "slow-for-5-minutes",
            False,
            None,
            None,
            lambda w, t, r: 50.0 if w == 2 and 1800 <= t < 2100 else _busy(r),
        ),
    ]


BATCH_S = 30.0
"""How often the rules' log reader tells of a container's progress (``live_activity_s``)."""
RANKS = (0, 8, 16, 24)
"""One rank on each worker (``slotsPerWorker`` 8), printing through the launcher."""
Steps = Callable[[int, float, random.Random], float | None]
ProgressCase = tuple[str, bool, int | None, float | None, Steps]
"""Name, whether a finding is due, the slow rank and its onset, steps per second of rank r at t
(``None``: the rank prints no counter then)."""


def _rate(slow: int | None, onset: float, factor: float) -> Steps:
    return lambda r, t, rng: 2.0 * (factor if r == slow and t >= onset else 1.0) * rng.uniform(0.95, 1.05)


def _pausing(
    period: float, length: float, inner: Steps, who: Callable[[int], bool] = lambda r: True
) -> Steps:
    return lambda r, t, rng: (None if who(r) else 0.0) if t % period < length else inner(r, t, rng)


def _progress_cases() -> list[ProgressCase]:
    return [
        ("progress-rank-40pct-slower", True, 16, 1200.0, _rate(16, 1200, 0.6)),
        ("progress-rank-25pct-slower", True, 8, 600.0, _rate(8, 600, 0.75)),
        ("progress-slow-through-checkpoints", True, 24, 900.0, _pausing(600, 60, _rate(24, 900, 0.6))),
        ("progress-warm-up-uneven", False, None, None, lambda r, t, rng: 1.0 if r == 16 and t < 600 else 2.0),
        ("progress-checkpoint-on-every-rank", False, None, None, _pausing(600, 120, _rate(None, 0, 1.0))),
        (
            "progress-evaluation-on-rank-0-others-wait",
            False,
            None,
            None,
            _pausing(900, 180, _rate(None, 0, 1.0), who=lambda r: r == 0),
        ),
        ("progress-two-ranks-slow", False, None, None, lambda r, t, rng: 1.2 if r in (8, 16) else 2.0),
        ("progress-10pct-slower", False, None, None, _rate(16, 0, 0.9)),
    ]


def _counters(steps: Steps, rank: int, rng: random.Random) -> list[int | None]:
    """The counter a rank's bar shows at each batch (restarting every 1,000 steps: an epoch)."""
    total, out = 0.0, []
    for b in range(int(DURATION_S / BATCH_S)):
        rate = steps(rank, b * BATCH_S, rng)
        total += (rate or 0.0) * BATCH_S
        out.append(None if rate is None else int(total) % 1000)
    return out


def _case(
    name: str,
    rule: str,
    positive: bool,
    worker: int | None,
    onset: float | None,
    source: str | None = None,
    **curves: Any,
) -> dict[str, Any]:
    """One recorded case: what it is, then its curves."""
    head = {"name": name, "rule": rule, **({"source": source} if source else {}), "synthetic": True}
    return head | {"positive": positive, "worker": worker, "onset_s": onset, **curves}


def record() -> None:
    """Write the synthetic curves (seeded by name: the same file every time)."""
    times = [i * SCRAPE_S for i in range(int(DURATION_S / SCRAPE_S))]
    cases: list[dict[str, Any]] = []
    for name, positive, shape, onset, limit_at in _memory_cases():
        rng = random.Random(name)
        memory = {"1": [round(shape(t, rng), 3) for t in times]}
        worker = 1 if positive else None
        cases.append(
            _case(name, "oom-predicted", positive, worker, onset, limit_at_s=limit_at, memory_gib=memory)
        )
    for name, positive, worker, onset, util in _gpu_cases():
        rng = random.Random(name)
        gpu = {str(w): [round(util(w, t, rng), 1) for t in times] for w in range(WORKERS)}
        cases.append(_case(name, "straggler", positive, worker, onset, gpu_util=gpu))
    for name, positive, slow, onset, steps in _progress_cases():
        rng = random.Random(name)
        counters = {str(r): _counters(steps, r, rng) for r in RANKS}
        cases.append(
            _case(name, "straggler", positive, slow, onset, "progress", batch_s=BATCH_S, steps=counters)
        )
    CURVES.parent.mkdir(exist_ok=True)
    header = {"scrape_s": SCRAPE_S, "limit_gib": LIMIT_GIB, "duration_s": DURATION_S, "synthetic": True}
    CURVES.write_text(json.dumps({**header, "cases": cases}) + "\n")


def _chunks(
    values: list[float], scrape_s: float, now_s: float, s: UsageSettings
) -> tuple[list[list[float]], float]:
    """The scrapes the watcher would read at ``now_s`` (pods started at 0), grouped by its steps:
    its age class gives the span, the span its step (as :mod:`watchers.usage` does)."""
    bucket = max(s.step_s, s.window_s / 12)
    span = min(s.window_s, max(math.ceil(now_s / bucket), 1) * bucket)
    step = max(s.step_s, math.ceil(span / s.curve_points))
    ends = [now_s - step * k for k in range(int(min(span, now_s) // step) + 1)][::-1]
    chunks = [[v for i, v in enumerate(values) if end - step < i * scrape_s <= end] for end in ends]
    return [c for c in chunks if c], step


def _replay_progress(case: dict[str, Any], th: RuleThresholds) -> float | None:
    """Seconds into the run at which ``straggler`` first fired on the ranks' progress lines, told
    as the rules' log reader tells them (one batch of the launcher's output per ``batch_s``)."""
    engine = RuleEngine(th)
    for event in running_run(workers=WORKERS):
        engine.observe(event, at(0))
    batch_s = float(case["batch_s"])
    counters: dict[str, list[int | None]] = case["steps"]
    for b in range(len(next(iter(counters.values())))):
        lines = [
            f"[1,{rank}]<stdout>:Epoch 0: |#####     | {n}/1000 [00:30<00:30,  2.00it/s]"
            for rank, series in counters.items()
            if (n := series[b]) is not None
        ]
        lines.append("[1,0]<stdout>:loss=0.42")
        now = at(seconds=b * batch_s)
        if any(
            f.rule == "straggler" and f.status == "firing"
            for f in engine.observe(log_seen(*lines, observed_at=now), now)
        ):
            return b * batch_s
    return None


def _replay(case: dict[str, Any], scrape_s: float, s: UsageSettings, th: RuleThresholds) -> float | None:
    """Seconds into the curve at which the case's rule first fired; ``None`` if never."""
    if case.get("source") == "progress":
        return _replay_progress(case, th)
    engine = RuleEngine(th)
    for event in running_run(workers=WORKERS):
        engine.observe(event, at(0))
    scrapes = int(DURATION_S / scrape_s)
    now_s = s.refresh_s
    while now_s <= DURATION_S:
        pods = []
        for w in range(WORKERS):
            memory = case.get("memory_gib", {}).get(str(w), [6.0] * scrapes)
            util = case.get("gpu_util", {}).get(str(w), [90.0] * scrapes)
            mem_chunks, step = _chunks(memory, scrape_s, now_s, s)
            util_chunks, _ = _chunks(util, scrape_s, now_s, s)
            pods.append(
                pod_usage(
                    w,
                    util=[statistics.fmean(c) for c in util_chunks],
                    memory_gib=[max(c) for c in mem_chunks],
                    end=at(seconds=now_s),
                    step_s=step,
                    limit_gib=LIMIT_GIB,
                )
            )
        changes = engine.observe(usage(*pods, observed_at=at(seconds=now_s)), at(seconds=now_s))
        if any(f.rule == case["rule"] and f.status == "firing" for f in changes):
            return now_s
        now_s += s.refresh_s
    return None


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def measure(
    settings: UsageSettings | None = None, thresholds: RuleThresholds | None = None
) -> dict[str, Any]:
    """Every recorded curve replayed (see the module docstring); per rule, latency and precision."""
    s = settings or UsageSettings(url="http://prometheus.invalid:9090")
    th = thresholds or RuleThresholds()
    data = json.loads(CURVES.read_text())
    scrape_s = float(data["scrape_s"])
    windows = {"oom-predicted": th.oom_trend_s, "straggler": th.straggler_s}
    kinds = {"oom-predicted": "oom-predicted", "straggler": "straggler", "straggler-progress": "straggler"}
    result: dict[str, Any] = {
        "curves": str(CURVES.relative_to(Path(__file__).parent.parent)),
        "synthetic": data["synthetic"],
        "scrape_s": scrape_s,
        "refresh_s": s.refresh_s,
        "window_s": s.window_s,
        "curve_points": s.curve_points,
        "rules": {},
    }
    for label, rule in kinds.items():
        window = windows[rule]
        progress = label.endswith("-progress")
        cases = [
            c for c in data["cases"] if c["rule"] == rule and (c.get("source") == "progress") == progress
        ]
        gap = float(cases[0].get("batch_s", scrape_s)) if cases else scrape_s
        per_case: dict[str, Any] = {}
        latencies: list[float] = []
        leads: list[float] = []
        for case in cases:
            fired = _replay(case, scrape_s, s, th)
            entry: dict[str, Any] = {"positive": case["positive"], "fired_at_s": fired}
            if case["positive"] and fired is not None:
                symptom = case["onset_s"]
                if case.get("limit_at_s") is not None:
                    symptom = max(symptom, case["limit_at_s"] - th.oom_horizon_s)
                    entry["lead_before_limit_s"] = round(case["limit_at_s"] - fired, 1)
                    leads.append(entry["lead_before_limit_s"])
                entry["first_symptom_s"] = round(symptom, 1)
                entry["latency_s"] = round(fired - symptom, 1)
                latencies.append(entry["latency_s"])
            per_case[case["name"]] = entry
        true_pos = sum(1 for e in per_case.values() if e["positive"] and e["fired_at_s"] is not None)
        false_pos = sum(1 for e in per_case.values() if not e["positive"] and e["fired_at_s"] is not None)
        positives = sum(1 for e in per_case.values() if e["positive"])
        result["rules"][label] = {
            "cases": per_case,
            "true_positives": true_pos,
            "positives": positives,
            "false_positives": false_pos,
            "near_misses": len(per_case) - positives,
            "precision": true_pos / (true_pos + false_pos) if true_pos + false_pos else None,
            "recall": true_pos / positives if positives else None,
            "latency_s": _summary(latencies),
            "latency_target_s": 2 * gap + window,
            "latency_target_plus_refresh_s": 2 * gap + window + (0 if progress else s.refresh_s),
            "lead_before_limit_s": _summary(leads),
        }
    return result
