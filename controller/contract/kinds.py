"""Every Kubeflow training kind the controller follows, in one registry.

One :class:`KindSpec` per kind says where the API server serves it (group, version, plural),
which operator runs it (its *family*: how its phase, spec and pods read) and, for the
training-operator v1 kinds, under which spec field its replicas are declared and which
``training.kubeflow.org/operator-name`` its pods carry. Watching, normalizing, pod ownership,
the history's ``kind``, the API's ``kind`` filter, RBAC checks and the audit all read
:data:`KINDS`: adding a kind is one entry here (and its name in :data:`JobKind`).

Pods name their job and replica by label (checked against the operators' sources):

- mpi-operator (MPIJob ``kubeflow.org/v2beta1``): ``training.kubeflow.org/job-name``,
  ``…/job-role`` (``launcher``/``worker``), ``…/replica-index``, ``…/operator-name: mpi-operator``;
- training-operator v1 (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob ``kubeflow.org/v1``):
  ``training.kubeflow.org/job-name``, ``…/replica-type`` (the replica type lower-cased:
  ``master``, ``worker``, ``ps``, ``chief``, ``evaluator``), ``…/replica-index``,
  ``…/operator-name`` (``pytorchjob-controller``, …) and ``…/job-role: master`` on the master;
- Trainer v2 (TrainJob ``trainer.kubeflow.org/v1alpha1``, any runtime): a JobSet named after
  the TrainJob, pods labelled ``jobset.sigs.k8s.io/jobset-name``,
  ``jobset.sigs.k8s.io/replicatedjob-name`` (``launcher``, ``node``, …) and the Job's
  ``batch.kubernetes.io/job-completion-index``.

A pod's *role* stays ``launcher`` or ``worker`` (what the rules reason about: a launcher's log
speaks for every rank); its *replica* (``Master``, ``Worker``, ``PS``, …) and index name it
in findings (``Master-0``, ``Worker-3``, ``PS-1``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, get_args

__all__ = [
    "COMPLETION_INDEX",
    "JOBSET_JOB_INDEX",
    "JOBSET_NAME",
    "JOBSET_REPLICATED_JOB",
    "KINDS",
    "MPI_JOB_NAME",
    "MPI_JOB_ROLE",
    "MPI_REPLICA_INDEX",
    "OPERATOR_NAME",
    "REPLICA_TYPE",
    "TRAINJOB_ANCESTOR",
    "Family",
    "JobKind",
    "KindSpec",
    "PodOwner",
    "PodRole",
    "kind_named",
    "kind_spec",
    "owner_from_labels",
    "replica_label",
    "replica_order",
    "speaks_for_run",
]

JobKind = Literal["MPIJob", "TrainJob", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"]
"""The name of every kind in :data:`KINDS` (a test holds the two equal)."""

PodRole = Literal["launcher", "worker"]
"""What the rules reason about: a launcher's log speaks for all ranks; every other replica is a worker."""

Family = Literal["mpi-operator", "training-operator", "trainer"]
"""Which operator runs a kind: how its conditions, spec and pods read."""

# training.kubeflow.org pod labels (mpi-operator and training-operator v1)
MPI_JOB_NAME: Final = "training.kubeflow.org/job-name"
MPI_JOB_ROLE: Final = "training.kubeflow.org/job-role"
MPI_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
# Trainer v2: a JobSet named after the TrainJob
JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
TRAINJOB_ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One job kind: where it is served and how its objects and pods read."""

    kind: JobKind
    group: str
    version: str
    plural: str
    family: Family
    replica_specs: str | None = None
    """The spec field holding ``{replica type: ReplicaSpec}`` (``pytorchReplicaSpecs``); None for TrainJob."""
    operator_name: str | None = None
    """``training.kubeflow.org/operator-name`` on its pods (told apart from other kinds by it)."""

    @property
    def api_version(self) -> str:
        """``group/version``, as objects carry it in ``apiVersion``."""
        return f"{self.group}/{self.version}"

    @property
    def pod_label(self) -> str:
        """The label naming the job on its pods (what the pod watch selects on)."""
        return JOBSET_NAME if self.family == "trainer" else MPI_JOB_NAME


def _v1(kind: JobKind, plural: str, replica_specs: str, operator: str) -> KindSpec:
    return KindSpec(kind, "kubeflow.org", "v1", plural, "training-operator", replica_specs, operator)


KINDS: Final[tuple[KindSpec, ...]] = (
    KindSpec(
        "MPIJob", "kubeflow.org", "v2beta1", "mpijobs", "mpi-operator", "mpiReplicaSpecs", "mpi-operator"
    ),
    KindSpec("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", "trainer"),
    _v1("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorchjob-controller"),
    _v1("TFJob", "tfjobs", "tfReplicaSpecs", "tfjob-controller"),
    _v1("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", "xgboostjob-controller"),
    _v1("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddlejob-controller"),
    _v1("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jaxjob-controller"),
)
"""Every kind followed, in the order they are listed and documented."""

_BY_NAME: Final[dict[str, KindSpec]] = {spec.kind: spec for spec in KINDS}
_BY_OPERATOR: Final[dict[str, KindSpec]] = {s.operator_name: s for s in KINDS if s.operator_name}
assert tuple(_BY_NAME) == get_args(JobKind), "JobKind must name every entry of KINDS, in order"


def kind_spec(kind: JobKind) -> KindSpec:
    """The registry entry of ``kind``."""
    return _BY_NAME[kind]


def kind_named(name: object) -> KindSpec | None:
    """The registry entry of a kind named by an object's ``kind`` (or a query), ``None`` if not followed."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


REPLICA_TYPES: Final[dict[str, str]] = {
    "launcher": "Launcher",
    "master": "Master",
    "chief": "Chief",
    "worker": "Worker",
    "ps": "PS",
    "evaluator": "Evaluator",
}
"""training-operator's replica types by their lower-cased pod label, as its specs spell them."""

_ORDER: Final[tuple[str, ...]] = ("Launcher", "Master", "Chief", "Worker", "PS", "Evaluator")


def replica_order(replica: str | None) -> int:
    """Where a replica type comes when pods are named in turn: launcher, master or chief,
    workers, parameter servers, evaluators."""
    return _ORDER.index(replica) if replica in _ORDER else len(_ORDER)


def replica_label(replica: str | None, index: int | None) -> str | None:
    """``Master-0``, ``Worker-3``, ``PS-1``; ``None`` without a replica type."""
    if replica is None:
        return None
    return replica if index is None else f"{replica}-{index}"


class PodOwner(TypedDict):
    """Which job a pod belongs to, and which replica of it it is, read from its labels."""

    kind: JobKind
    name: str
    role: PodRole
    replica: str | None
    index: int | None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _controller_kind(owners: Sequence[Mapping[str, Any]]) -> KindSpec | None:
    return next((kind_named(o.get("kind")) for o in owners if kind_named(o.get("kind"))), None)


def owner_from_labels(labels: Mapping[str, str], owners: Sequence[Mapping[str, Any]] = ()) -> PodOwner | None:
    """The job a pod with ``labels`` (and ``ownerReferences`` ``owners``) belongs to; ``None``
    for any other pod (a TrainJob's dataset or model initializer included)."""
    if MPI_JOB_NAME in labels:
        spec = _BY_OPERATOR.get(labels.get(OPERATOR_NAME, "")) or _controller_kind(owners) or KINDS[0]
        if spec.family == "mpi-operator":
            role: PodRole = "launcher" if labels.get(MPI_JOB_ROLE) == "launcher" else "worker"
            index = _int(labels.get(MPI_REPLICA_INDEX)) if role == "worker" else None
            name = labels[MPI_JOB_NAME]
            return {"kind": spec.kind, "name": name, "role": role, "replica": None, "index": index}
        raw = labels.get(REPLICA_TYPE, "worker").lower()
        replica = REPLICA_TYPES.get(raw, raw.capitalize())
        return {
            "kind": spec.kind,
            "name": labels[MPI_JOB_NAME],
            "role": "launcher" if replica == "Launcher" else "worker",
            "replica": replica,
            "index": _int(labels.get(MPI_REPLICA_INDEX)),
        }
    if JOBSET_NAME in labels and labels.get(TRAINJOB_ANCESTOR, "trainer") == "trainer":
        replicated = labels.get(JOBSET_REPLICATED_JOB, "")
        role = "launcher" if replicated == "launcher" else "worker"
        return {
            "kind": "TrainJob",
            "name": labels[JOBSET_NAME],
            "role": role,
            "replica": None,
            "index": _int(labels.get(COMPLETION_INDEX)) if role == "worker" else None,
        }
    return None


_RANK_ZERO: Final = frozenset({"Master", "Chief", "Worker"})


def speaks_for_run(owner: PodOwner) -> bool:
    """Whether a pod's log tells whether its run makes progress: a launcher (mpirun carries
    every rank's output), else the first replica of a launcher-less run — ``Master-0``,
    ``Chief-0`` or ``Worker-0`` of a training-operator job, node 0 of a TrainJob (rank 0 of
    torchrun or JAX). At most a few pods per run, whatever its size."""
    if owner["role"] == "launcher":
        return True
    if owner["index"] != 0:
        return False
    return owner["replica"] in _RANK_ZERO if owner["replica"] is not None else owner["kind"] == "TrainJob"
