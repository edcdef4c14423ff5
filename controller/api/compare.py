"""Runs side by side (``/api/v1/compare?runs=a,b[,c…]``): spec differences, durations, outcome, pods."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query, Request

from controller.api import models
from controller.api.auth import may_read
from controller.api.deps import engine_of
from controller.api.params import MAX_COMPARED, MAX_UID, UID, errors
from controller.api.routing import Caller, api_router
from controller.store import queries

router = api_router("/api/v1", "compare", 400)

_UID_BODY = UID.strip("^$")
RUN_LIST = rf"^{_UID_BODY}(,{_UID_BODY}){{1,{MAX_COMPARED - 1}}}$"


def _summary(run: queries.ComparedRunRecord) -> models.ComparedRun:
    return models.ComparedRun(
        run=models.RunSummary.model_validate(run.run),
        outcome=run.run.phase,
        durations=models.Durations.model_validate(run.durations),
        failure_causes=[models.FailureCause.model_validate(f) for f in run.failure_causes],
        pods=[models.PodSummary.model_validate(p) for p in run.pods],
    )


@router.get("/compare", responses=errors(404))
async def compare(
    request: Request,
    principal: Caller,
    runs: Annotated[
        str,
        Query(
            pattern=RUN_LIST,
            max_length=MAX_COMPARED * (MAX_UID + 1),
            description=f"2 to {MAX_COMPARED} run uids, comma-separated, in the order to show them.",
        ),
    ],
) -> models.Comparison:
    """Spec diff, durations (queued, to all workers running, running, total), outcome, failure causes
    and per-pod restarts and terminations of 2 to 5 runs.

    A run in a namespace the caller may not read is answered as if it did not exist (404); runs of
    different kinds (an MPIJob and a PyTorchJob: their specs share no fields) are refused (400)."""
    uids = runs.split(",")
    if len(set(uids)) != len(uids):
        raise HTTPException(400, "runs: each uid may appear once")
    if any(len(uid) > MAX_UID for uid in uids):
        raise HTTPException(422, f"runs: a uid has at most {MAX_UID} characters")
    async with engine_of(request).connect() as conn:
        found = await queries.get_runs(conn, uids)
        readable = {
            namespace: await may_read(request, principal, namespace)
            for namespace in sorted({run.namespace for run in found.values()})
        }
        missing = [uid for uid in uids if uid not in found or not readable[found[uid].namespace]]
        if missing:
            raise HTTPException(404, f"no run with uid {', '.join(map(repr, missing))}")
        kinds = {found[uid].kind for uid in uids}
        if len(kinds) > 1:
            named = ", ".join(f"{uid} is a {found[uid].kind}" for uid in uids)
            raise HTTPException(400, f"runs: compare runs of one kind only ({named})")
        comparison = await queries.compare_runs(conn, uids)
    spec = [models.SpecField(path=f.path, values=list(f.values), differs=f.differs) for f in comparison.spec]
    return models.Comparison(
        runs=[_summary(run) for run in comparison.runs],
        spec=spec,
        differences=[f.path for f in spec if f.differs],
        usage=[
            models.UsageLine(
                slot=line.slot,
                memory_peaks=list(line.peaks),
                gpu_util_mean_pct=list(line.gpu_util_mean_pct),
                sentence=line.sentence,
            )
            for line in comparison.usage
        ],
    )
