"""The Configuration tab shows each attempt's job as submitted (YAML, through the watcher's
manifest and the history), secrets redacted; Compare diffs two attempts' manifests line by line;
a run stored before manifests were kept shows its spec summary; an observation without a
manifest (an older watcher) keeps the stored one."""

from __future__ import annotations

import dataclasses
import re
from html import unescape
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store.history import apply_events
from controller.store.models import Run
from tests.api_fixtures import T0, job_story, store
from tests.ui.test_pages_sign_in_safely import SAME_SITE, _client
from watchers.correlating import Correlator, Observation


def _with_env(story: list[Observation], env: list[dict[str, Any]]) -> list[Observation]:
    """The story with ``env`` in the worker's container and kubectl's managedFields on the job."""
    for o in story:
        if o.kind == "job":
            job: Any = o.object  # each observation's own dict
            worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
            worker["env"] = env
            job["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    return story


def _pre(page: str, element_id: str) -> str:
    found = re.search(rf'<pre class="yaml" id="{element_id}"[^>]*>(.*?)</pre>', page, re.S)
    assert found is not None, page
    return unescape(found.group(1))


async def test_each_attempt_shows_its_submitted_spec_and_compare_diffs_them(engine: AsyncEngine) -> None:
    first, story = job_story("llm", workers=2, memory="32Gi", start=T0)
    await store(engine, _with_env(story, [{"name": "WANDB_API_KEY", "value": "0123456789abcdef"}]))
    second, story = job_story("llm", workers=2, memory="16Gi", start=T0.replace(hour=12), outcome="Failed")
    await store(engine, _with_env(story, [{"name": "NCCL_DEBUG", "value": "INFO"}]))
    async with _client(engine) as client:
        await client.post("/ui/sign-in", data={"token": "token-alice"}, headers=SAME_SITE)
        shown = {uid: (await client.get(f"/ui/runs/{uid}?tab=configuration")).text for uid in (first, second)}
        compared = (await client.get(f"/ui/compare?runs={first},{second}")).text

    one, two = _pre(shown[first], "manifest"), _pre(shown[second], "manifest")
    assert one.startswith("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata:\n  name: llm\n")
    assert "memory: 32Gi" in one and "memory: 16Gi" in two  # each attempt its own
    assert "- name: WANDB_API_KEY\n              value: '[REDACTED]'" in one and "0123456789abcdef" not in one
    assert "status" not in one and "managedFields" not in one and "conditions" not in one
    assert "truncated" not in shown[first]

    diff = re.search(r'<pre class="yaml manifest-diff"[^>]*>(.*?)</pre>', compared, re.S)
    assert diff is not None
    changed = re.findall(r'<span class="(add|del)">(.*?)</span>', diff.group(1))
    assert ("del", "-                memory: 32Gi") in changed and (
        "add",
        "+                memory: 16Gi",
    ) in changed
    assert ("del", "-            - name: WANDB_API_KEY") in changed
    assert ("add", "+            - name: NCCL_DEBUG") in changed
    assert all(line[1:].strip() for _, line in changed)  # only lines that changed, no blank noise


async def test_a_run_without_a_manifest_shows_its_summary_and_an_older_watcher_keeps_the_stored_one(
    engine: AsyncEngine,
) -> None:
    uid, story = job_story("llm", workers=2)
    await store(engine, story)
    async with engine.begin() as conn:
        kept = (await conn.execute(select(Run.manifest).where(Run.uid == uid))).scalar_one()
    assert kept is not None and "replicas: 2" in kept
    # an observation of a newer version without a manifest (an older watcher): the stored one stays
    later = dataclasses.replace(
        story[-1],
        object={**story[-1].object, "metadata": {**story[-1].object["metadata"], "resourceVersion": "99999"}},
    )

    events = [e.model_copy(update={"manifest": None}) for e in Correlator(30, lambda: 0.0).observe(later)]
    async with engine.begin() as conn:
        await apply_events(conn, events)
        assert (await conn.execute(select(Run.manifest).where(Run.uid == uid))).scalar_one() == kept
        await conn.execute(Run.__table__.update().where(Run.uid == uid).values(manifest=None))
    async with _client(engine) as client:
        await client.post("/ui/sign-in", data={"token": "token-alice"}, headers=SAME_SITE)
        page = (await client.get(f"/ui/runs/{uid}?tab=configuration")).text
    assert 'id="manifest"' not in page and "stored before the whole spec was kept" in page
    assert 'aria-label="Spec in YAML"' in page
