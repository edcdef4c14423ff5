"""The quota check counts what a training-operator job will create: every replica type of its own
spec field, one pod per replica when ``replicas`` is left out (the training-operator's default)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from controller.contract.kinds import JobKind
from controller.testing import objects as k
from watchers.admission.demand import demand


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"])
def test_every_replica_type_counts(kind: JobKind) -> None:
    job = k.training_job(kind, "demo", replicas={"Master": 1, "Worker": 3}, memory="16Gi", gpus=2)
    asked = demand(kind, job)
    assert {(g.role, g.replicas) for g in asked.groups} == {("Master", 1), ("Worker", 3)}
    assert asked.total["nvidia.com/gpu"] == Decimal(8)
    assert asked.total["memory"] == Decimal(4 * 16 * 2**30)


def test_replicas_default_to_one() -> None:
    job = k.training_job("PyTorchJob", "demo", replicas={"Master": 1, "Worker": 2})
    del job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    assert {(g.role, g.replicas) for g in demand("PyTorchJob", job).groups} == {("Master", 1), ("Worker", 2)}
