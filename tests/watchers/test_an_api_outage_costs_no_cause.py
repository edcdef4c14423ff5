"""Drill: the Kubernetes API server answers 503 for all requests while runs fail with distinct
causes. The watcher (real client, simulated API server), the log follower, the history, the rules
and a webhook subscription run on real NATS and PostgreSQL; every container is followed when the
outage begins. Two stories:

- the outage ends the log streams (``no-retry-after``, ``retry-after-1s``): no log can be read
  while it lasts, so every run first gets the catch-all, and once the API server answers again,
  the cause its log names (from the followed log or the late tail, whichever comes first)
  supersedes it. (Before the watcher read refused tails again, those runs kept the catch-all
  for good.)
- the streams open at the outage go on (``followed``): each run printed its error before it
  failed, and the follower had stored it, so each run is told that cause while its tail is
  still refused, and no catch-all (the cause explains it).

Either way the late log tail reaches the history, and every webhook arrives once. Which story a
run of the drill told once depended on the machine's speed: on a loaded one the follows were
open when the outage began, the followed lines named the causes at once, and the catch-all
awaited by the first story never fired or was superseded before it was seen."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from controller.bus.streams import wait_until_consumed
from controller.kube.gateway import RetryPolicy
from controller.kube.resources import WATCHED
from controller.store.models import FindingRow, PodRow, PodStateRow
from controller.testing import objects as k
from controller.testing.drills import findings_on_bus
from controller.testing.notify import api_client, settled_log, subscribe, with_notify
from controller.testing.receivers import Receiver
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running, wait_for_sql, watchers_running
from tests.rules.corpus_replay import Entry, load

CAUSES = {
    "nccl": "nccl-watchdog-allreduce-timeout-llamafactory",
    "cuda": "pytorch-cuda-illegal-memory-access",
    "mpich": "mpich-hydu-sock-connect-connection-refused",
    "shm": "dataloader-dev-shm-unable-to-write-no-space",
}
"""Job name → the corpus text its failing pod logs (a real failure, with the rule it names)."""
DOOR = RetryPolicy(retries=2, backoff_s=0.05, retry_after_max_s=1)
"""The gateway's retries, shorter than the outage: the watcher must read the tails again itself."""
PATH = "outage"
BOUND_S = 180
"""How long a step may take at most: each wait ends as soon as its condition holds, so the bound
only tells a loaded machine (where this drill's first step once took over 30 s) from a defect."""
STREAMS = {"no-retry-after": (None, False), "retry-after-1s": (1, False), "followed": (None, True)}
"""Story → the outage's Retry-After, and whether the log streams open at the outage go on."""
WATCH_S = 3600
"""The watches' server-side timeout here: those open when the outage begins outlast it. A watch
that ends during it cannot resume (every request is refused), so the failures it would have
carried wait for the outage's end; with the stage's 5 s, a loaded machine slower than that
between the outage's start and the failures lost the catch-all this drill is about."""


def failing_pod(sim: SimCluster, name: str, entry: Entry) -> dict[str, object]:
    """MPIJob ``name`` running a launcher and one worker; the one whose log the text is in."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # just created: no run waits for long
    job = sim.create(
        k.with_conditions(k.mpijob(name, workers=1, created=now), ("Running", "MPIJobRunning", now))
    )
    launcher = sim.create(k.pod(job, "launcher", created=now))
    worker = sim.create(k.pod(job, "worker", 0, created=now))
    running = {"running": {"startedAt": now}}
    for pod in (launcher, worker):
        sim.update(k.with_container_state(pod, running, phase="Running", ready=True))
    return sim.get(launcher if entry.on_launcher else worker) or {}


def follows(sim: SimCluster) -> int:
    return sum(sim.open_log_follows().values())


def log_refused(sim: SimCluster, pod: str) -> int:
    return sum(1 for r in sim.refused if r.path.endswith(f"/pods/{pod}/log"))


async def wait_for_findings(stage: Stage, statuses: str, rules: dict[str, str]) -> None:
    """Until the findings in one of ``statuses`` (SQL) are one per job, of the rule ``rules`` names."""
    await wait_for_sql(
        stage.engine,
        "SELECT string_agg(job_name || ':' || rule, ' ' ORDER BY job_name, rule) FROM findings "
        f"WHERE status IN ({statuses})",
        " ".join(f"{job}:{rule}" for job, rule in sorted(rules.items())),
        BOUND_S,
    )


async def fail_runs(
    sim: SimCluster,
    stage: Stage,
    failing: dict[str, dict[str, object]],
    texts: dict[str, str],
    told: dict[str, str],
    followed: bool,
) -> None:
    """During the outage each job's ``failing`` pod logs its text and fails, then the job. With
    ``followed`` the follows open go on, and the rules have read each error (``told`` each run
    while it ran) before its pod fails; else the follows end first (none can open again while
    every request is refused), and the pods fail with logs only a tail read would see."""
    logs = {
        ("team-a", str(pod["metadata"]["name"]), str(pod["spec"]["containers"][0]["name"])): texts[name]  # type: ignore[index]
        for name, pod in failing.items()
    }
    if followed:
        sim.append_logs(logs)
        await wait_for_findings(stage, "'pending', 'firing'", told)
    else:
        sim.end_log_follows()
        await until(lambda: follows(sim) == 0, BOUND_S, sim.open_log_follows)
        for (namespace, name, container), text in logs.items():
            sim.set_log(namespace, name, container, text)
    for name, pod in failing.items():
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ended = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now}}
        sim.update(k.with_container_state(pod, ended, phase="Failed"))
        job = sim.get(k.mpijob(name)) or {}
        sim.update(k.with_conditions(job, ("Failed", "MPIJobFailed", now)))


def delivered(rx: Receiver) -> dict[tuple[str, str, str], set[str]]:
    """Webhook ids received per (event type, job, rule of the finding)."""
    ids: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for request in rx.at(PATH):
        rule = (request.payload["data"].get("finding") or {}).get("rule", "")
        ids[(request.payload["type"], request.payload["data"]["job"]["name"], rule)].add(request.webhook_id)
    return ids


@pytest.mark.parametrize("story", list(STREAMS))
async def test_runs_failing_during_an_api_outage_are_told_their_cause(
    sim: SimCluster,
    stage: Stage,
    story: str,
) -> None:
    retry_after_s, followed = STREAMS[story]
    corpus = {entry.id: entry for entry in load()}
    entries = {name: corpus[entry_id] for name, entry_id in CAUSES.items()}
    told = {name: str(entry.expect) if followed else "failed" for name, entry in entries.items()}
    stage.settings.watcher.log_tail_retry_s = 60
    stage.settings.watcher.watch_timeout_s = WATCH_S
    with_notify(stage.settings)
    async with (
        Receiver() as rx,
        api_client(stage.settings, stage.engine, stage.metrics) as api,
        consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics),
        watchers_running(stage.settings, sim, stage.js, stage.topology, stage.metrics, DOOR),
    ):
        sub = await subscribe(api, rx, PATH, event_types=["job.failed", "finding.firing", "finding.resolved"])
        await until(
            lambda: sum(sim.open_watches().values()) == len(WATCHED), 10, lambda: str(sim.open_watches())
        )
        failing = {name: failing_pod(sim, name, entry) for name, entry in entries.items()}
        await wait_for_sql(
            stage.engine, "SELECT count(*) FROM pods WHERE phase = 'Running'", 2 * len(entries)
        )
        await wait_for_sql(stage.engine, "SELECT count(*) FROM runs WHERE phase = 'Running'", len(entries))

        # every container followed, as on a machine slow enough (the race this drill once lost)
        await until(lambda: follows(sim) == 2 * len(entries), BOUND_S, sim.open_log_follows)
        sim.outage(retry_after_s=retry_after_s)
        await fail_runs(
            sim, stage, failing, {name: entry.text for name, entry in entries.items()}, told, followed
        )
        names = {name: str(pod["metadata"]["name"]) for name, pod in failing.items()}  # type: ignore[index]
        await until(  # the gateway gave up on a read, and every tail was refused at least once
            lambda: (
                all(log_refused(sim, pod) for pod in names.values())
                and max(log_refused(sim, pod) for pod in names.values()) > DOOR.retries
            ),
            BOUND_S,
            lambda: {pod: log_refused(sim, pod) for pod in names.values()},
        )
        # what each run was told while its tail was refused
        await wait_for_findings(stage, "'firing'", told)
        sim.end_outage()

        expected = {
            (kind, name, rule)
            for name, entry in entries.items()
            for kind, rule in [
                ("job.failed", ""),
                ("finding.firing", "failed"),
                ("finding.firing", str(entry.expect)),
                ("finding.resolved", "failed"),
            ]
            if not (followed and rule == "failed")
        }
        await until(
            lambda: expected <= delivered(rx).keys(), BOUND_S, lambda: sorted(expected - delivered(rx).keys())
        )
        await wait_for_sql(  # the late tails reach the history too, though the followed log may name the cause first
            stage.engine,
            "SELECT count(*) FROM pod_states WHERE phase = 'Failed' AND jsonb_array_length(log_tail) > 0",
            len(entries),
            BOUND_S,
        )
        for durable in ("history", "rules", "notify"):
            await wait_until_consumed(
                stage.js, stage.topology.stream("jobs"), stage.topology.durable(durable), BOUND_S
            )
        await settled_log(api, sub["id"], len(expected))
        findings = await findings_on_bus(stage.js, stage.topology)
        dead = (await stage.js.stream_info(stage.topology.stream("dlq"))).state.messages

    got = delivered(rx)
    assert got.keys() == expected, sorted(got.keys() ^ expected)
    assert all(len(ids) == 1 for ids in got.values()), "each webhook once"
    assert all(r.verified for r in rx.at(PATH))
    assert dead == 0

    revisions = [(f.id, f.revision) for f in findings]
    assert len(set(revisions)) == len(revisions), "each change of a finding published once"
    last = {(f.job.name, f.rule): f for f in sorted(findings, key=lambda f: f.revision)}
    superseded = (
        {} if followed else {(name, "failed"): ("resolved", entry.expect) for name, entry in entries.items()}
    )
    assert {key: (f.status, f.superseded_by) for key, f in last.items()} == {
        **superseded,
        **{(name, str(entry.expect)): ("firing", None) for name, entry in entries.items()},
    }

    async with stage.engine.connect() as conn:
        rows = (await conn.execute(select(FindingRow.job_name, FindingRow.rule, FindingRow.status))).all()
        tails = dict(
            (
                await conn.execute(
                    select(PodRow.name, PodStateRow.log_tail)
                    .join(PodStateRow, PodStateRow.pod_uid == PodRow.uid)
                    .where(PodStateRow.phase == "Failed")
                )
            ).all()
        )
    assert sorted(rows) == sorted(
        [(name, entry.expect, "firing") for name, entry in entries.items()]
        + [(name, "failed", "resolved") for name in entries if not followed]
    )
    for name, entry in entries.items():
        assert tails[names[name]] == entry.text.splitlines()[-50:], name
