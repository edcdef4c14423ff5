"""The captured-shape scenario files under ``examples/scenarios`` are valid capture files.

Every line is one watch event as ``capture`` writes it (``{"type", "object", "observed_at", "logs"?}``);
these checks keep hand-edited or regenerated files honest: real Kubernetes object identity
(uid, strictly increasing resourceVersion), parseable RFC 3339 timestamps, and the labels and
owner references that mpi-operator and JobSet actually put on the pods they create.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from controller.contract.kinds import KINDS, kind_named

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
FILES = sorted(SCENARIOS.glob("*.jsonl"))

EXPECTED = {
    "mpijob-succeeded.jsonl",
    "mpijob-worker-oomkilled.jsonl",
    "mpijob-imagepullbackoff.jsonl",
    "mpijob-unschedulable-gpus.jsonl",
    "trainjob-mpi-succeeded.jsonl",
    "trainjob-torch-rank-failed.jsonl",
    "mpijob-gpu-oom.jsonl",
    "mpijob-train-retried.jsonl",
    "mpijob-ssh-connection-refused.jsonl",
    "mpijob-mpi-abort.jsonl",
    "mpijob-hydra-failure.jsonl",
    "mpijob-crashloop.jsonl",
    "mpijob-evicted.jsonl",
    "mpijob-node-lost.jsonl",
    "mpijob-pending-long.jsonl",
    "nearmiss-sigkill-not-oom.jsonl",
    "nearmiss-slow-but-progressing.jsonl",
    "nearmiss-kueue-queued.jsonl",
    "pytorchjob-succeeded.jsonl",
    "pytorchjob-rendezvous-timeout.jsonl",
    "tfjob-succeeded.jsonl",
    "tfjob-ps-oomkilled.jsonl",
    "xgboostjob-succeeded.jsonl",
    "xgboostjob-imagepullbackoff.jsonl",
    "paddlejob-succeeded.jsonl",
    "paddlejob-unschedulable-gpus.jsonl",
    "jaxjob-succeeded.jsonl",
    "jaxjob-worker-error.jsonl",
}
CHANGES = {"ADDED", "MODIFIED", "DELETED"}
API_VERSIONS = {
    **{spec.kind: spec.api_version for spec in KINDS},
    "Pod": "v1",
    "Event": "v1",
}
# RFC 3339 as the API server writes it: seconds (metav1.Time) or microseconds (MicroTime), UTC "Z"
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
TIME_KEYS = re.compile(r"(Time|Timestamp|At|_at)$")

MPI_JOB_NAME = "training.kubeflow.org/job-name"
MPI_JOB_ROLE = "training.kubeflow.org/job-role"
MPI_OPERATOR = "training.kubeflow.org/operator-name"
MPI_INDEX = "training.kubeflow.org/replica-index"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        assert line.strip(), f"{path.name}:{number}: blank line"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:  # pragma: no cover - the assertion message is the point
            pytest.fail(f"{path.name}:{number}: not JSON: {exc}")
        assert isinstance(record, dict), f"{path.name}:{number}: not a JSON object"
        records.append(record)
    return records


def _parse_time(value: str, where: str) -> datetime:
    assert isinstance(value, str) and RFC3339.match(value), (
        f"{where}: not an RFC 3339 UTC timestamp: {value!r}"
    )
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _timestamps(node: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, value) whose key names a time (…Time, …Timestamp, …At, observed_at)."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else key
            if TIME_KEYS.search(key) and not isinstance(value, dict | list):
                found.append((here, value))
            else:
                found.extend(_timestamps(value, here))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_timestamps(value, f"{path}[{i}]"))
    return found


def _is_uuid(value: Any) -> bool:
    try:
        parsed = uuid.UUID(str(value))
    except ValueError:
        return False
    return str(parsed) == value and parsed.variant == uuid.RFC_4122


def test_every_expected_scenario_is_present() -> None:
    assert {f.name for f in FILES} >= EXPECTED


def test_the_readme_describes_every_scenario() -> None:
    readme = (SCENARIOS / "README.md").read_text()
    missing = [f.name for f in FILES if f.name not in readme]
    assert not missing, f"README.md does not describe {missing}"


@pytest.fixture(params=FILES, ids=[f.name for f in FILES])
def records(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    path: Path = request.param
    return path.name, _records(path)


def test_lines_are_watch_events_of_full_objects(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    assert 10 <= len(recs) <= 80, f"{name}: {len(recs)} lines"
    for number, rec in enumerate(recs, start=1):
        where = f"{name}:{number}"
        assert set(rec) <= {"type", "object", "observed_at", "logs"}, f"{where}: unexpected keys {set(rec)}"
        assert rec.get("type") in CHANGES, f"{where}: type {rec.get('type')!r}"
        obj = rec.get("object")
        assert isinstance(obj, dict), f"{where}: object is not a JSON object"
        kind = obj.get("kind")
        assert kind in API_VERSIONS, f"{where}: unexpected kind {kind!r}"
        assert obj.get("apiVersion") == API_VERSIONS[kind], f"{where}: apiVersion {obj.get('apiVersion')!r}"
        meta = obj.get("metadata")
        assert isinstance(meta, dict), f"{where}: no metadata"
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp"):
            assert isinstance(meta.get(key), str) and meta[key], f"{where}: metadata.{key} missing"
        assert _is_uuid(meta["uid"]), f"{where}: metadata.uid {meta['uid']!r} is not an RFC 4122 UUID"
        assert meta["resourceVersion"].isdigit(), f"{where}: resourceVersion {meta['resourceVersion']!r}"


def test_resource_versions_increase_strictly(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    previous = 0
    for number, rec in enumerate(recs, start=1):
        rv = int(rec["object"]["metadata"]["resourceVersion"])
        assert rv > previous, f"{name}:{number}: resourceVersion {rv} after {previous}"
        previous = rv


def test_timestamps_parse_and_observation_is_chronological(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    last = None
    for number, rec in enumerate(recs, start=1):
        where = f"{name}:{number}"
        observed = _parse_time(rec.get("observed_at"), f"{where}: observed_at")
        assert last is None or observed >= last, f"{where}: observed_at goes back in time"
        last = observed
        created = _parse_time(rec["object"]["metadata"]["creationTimestamp"], f"{where}: creationTimestamp")
        assert created <= observed, f"{where}: observed before it was created"
        for path, value in _timestamps(rec["object"]):
            if value is not None:
                _parse_time(value, f"{where}: {path}")


def test_uids_are_stable_per_object(records: tuple[str, list[dict[str, Any]]]) -> None:
    """One uid per (kind, namespace, name) — a new one only after the old object was DELETED."""
    name, recs = records
    live: dict[tuple[str, str, str], str] = {}
    gone: set[str] = set()
    for number, rec in enumerate(recs, start=1):
        where = f"{name}:{number}"
        obj = rec["object"]
        meta = obj["metadata"]
        key = (obj["kind"], meta["namespace"], meta["name"])
        uid = meta["uid"]
        assert uid not in gone, f"{where}: {key} reuses the uid of a deleted object"
        if key in live:
            assert live[key] == uid, f"{where}: {key} changed uid without being deleted"
            assert rec["type"] != "ADDED", f"{where}: {key} ADDED twice"
        else:
            assert rec["type"] == "ADDED", f"{where}: first sight of {key} is {rec['type']}, not ADDED"
            live[key] = uid
        if rec["type"] == "DELETED":
            del live[key]
            gone.add(uid)


def test_events_look_like_core_v1_events(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    for number, rec in enumerate(recs, start=1):
        obj = rec["object"]
        if obj["kind"] != "Event":
            continue
        where = f"{name}:{number}"
        involved = obj.get("involvedObject") or {}
        for key in ("kind", "name", "uid", "apiVersion"):
            assert involved.get(key), f"{where}: involvedObject.{key} missing"
        assert re.fullmatch(re.escape(involved["name"]) + r"\.[0-9a-f]{16}", obj["metadata"]["name"]), (
            f"{where}: event name {obj['metadata']['name']!r} is not <involvedObject>.<hex>"
        )
        assert obj.get("type") in {"Normal", "Warning"}, f"{where}: type {obj.get('type')!r}"
        assert obj.get("reason") and isinstance(obj.get("message"), str), f"{where}: reason/message missing"
        assert obj.get("reportingComponent"), f"{where}: reportingComponent missing"
        if obj.get("eventTime"):
            # written through events.k8s.io (kube-scheduler): no count/first/lastTimestamp, maybe a series
            assert obj.get("firstTimestamp") is None and obj.get("action"), f"{where}: events.k8s.io shape"
        else:
            assert obj.get("firstTimestamp") and obj.get("lastTimestamp"), f"{where}: timestamps missing"
            assert isinstance(obj.get("count"), int) and obj["count"] >= 1, f"{where}: count"
            assert (obj.get("source") or {}).get("component"), f"{where}: source.component missing"


def _jobs(recs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["object"]["metadata"]["name"]: r["object"] for r in recs if r["object"]["kind"] == kind}


def test_mpijob_pods_carry_mpi_operator_labels_and_owners(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    mpijobs: dict[str, dict[str, Any]] = {}  # each name's MPIJob as of this line (a job applied again)
    for number, rec in enumerate(recs, start=1):
        pod = rec["object"]
        if pod["kind"] == "MPIJob":
            mpijobs[pod["metadata"]["name"]] = pod
        labels = pod["metadata"].get("labels") or {}
        if pod["kind"] != "Pod" or JOBSET_NAME in labels or labels.get(MPI_OPERATOR) != "mpi-operator":
            continue
        where = f"{name}:{number} {pod['metadata']['name']}"
        labels = pod["metadata"].get("labels") or {}
        job = labels.get(MPI_JOB_NAME)
        assert job in mpijobs, f"{where}: {MPI_JOB_NAME}={job!r} names no MPIJob in the file"
        assert labels.get(MPI_OPERATOR) == "mpi-operator", f"{where}: {MPI_OPERATOR}"
        role = labels.get(MPI_JOB_ROLE)
        owners = pod["metadata"].get("ownerReferences") or []
        controller = [o for o in owners if o.get("controller")]
        assert len(controller) == 1, f"{where}: needs exactly one controller ownerReference"
        owner = controller[0]
        if role == "worker":
            index = labels.get(MPI_INDEX)
            assert index is not None and index.isdigit(), f"{where}: {MPI_INDEX} missing"
            assert pod["metadata"]["name"] == f"{job}-worker-{index}", f"{where}: worker name/index mismatch"
            assert int(index) < mpijobs[job]["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"], (
                f"{where}: index"
            )
            assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"]) == (
                "kubeflow.org/v2beta1",
                "MPIJob",
                job,
                mpijobs[job]["metadata"]["uid"],
            ), f"{where}: worker must be owned by its MPIJob"
            assert pod["spec"].get("hostname") == pod["metadata"]["name"], f"{where}: hostname"
            assert pod["spec"].get("subdomain") == f"{job}-worker", f"{where}: subdomain"
        elif role == "launcher":
            assert MPI_INDEX not in labels, f"{where}: the launcher has no replica index"
            assert re.fullmatch(
                rf"{re.escape(job)}-launcher-[bcdfghjklmnpqrstvwxz2456789]{{5}}", pod["metadata"]["name"]
            ), f"{where}: launcher pod name"
            assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
                "batch/v1",
                "Job",
                f"{job}-launcher",
            ), f"{where}: the launcher pod is owned by the launcher batch/v1 Job"
            assert labels.get("batch.kubernetes.io/job-name") == f"{job}-launcher", f"{where}: job-name label"
            assert labels.get("batch.kubernetes.io/controller-uid") == owner["uid"], (
                f"{where}: controller-uid"
            )
        else:
            pytest.fail(f"{where}: {MPI_JOB_ROLE}={role!r}")


def test_training_operator_pods_carry_its_labels_and_owners(
    records: tuple[str, list[dict[str, Any]]],
) -> None:
    """The training-operator labels each replica's pod with the job, the replica type (lower-cased)
    and index and its controller's name, and owns it by the job; the master (or chief) also
    carries ``job-role: master``."""
    name, recs = records
    for number, rec in enumerate(recs, start=1):
        pod = rec["object"]
        labels = pod["metadata"].get("labels") or {}
        if pod["kind"] != "Pod" or JOBSET_NAME in labels or labels.get(MPI_OPERATOR) == "mpi-operator":
            continue
        where = f"{name}:{number} {pod['metadata']['name']}"
        kind = next((s for s in KINDS if s.operator_name == labels.get(MPI_OPERATOR)), None)
        assert kind is not None and kind.replica_specs, (
            f"{where}: {MPI_OPERATOR}={labels.get(MPI_OPERATOR)!r}"
        )
        jobs = _jobs(recs, kind.kind)
        job = labels.get(MPI_JOB_NAME)
        assert job in jobs, f"{where}: {MPI_JOB_NAME}={job!r} names no {kind.kind} in the file"
        replica, index = labels.get(REPLICA_TYPE), labels.get(MPI_INDEX)
        specs = jobs[job]["spec"][kind.replica_specs]
        declared = {r.lower(): r for r in specs}
        assert replica in declared, (
            f"{where}: {REPLICA_TYPE}={replica!r} is not lower-case of {sorted(specs)}"
        )
        assert index is not None and int(index) < specs[declared[replica]]["replicas"], f"{where}: index"
        assert pod["metadata"]["name"] == f"{job}-{replica}-{index}", f"{where}: name"
        assert (labels.get(MPI_JOB_ROLE) == "master") == (replica in {"master", "chief"}), (
            f"{where}: job-role"
        )
        (owner,) = [o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")]
        assert kind_named(owner["kind"]) == kind and owner["uid"] == jobs[job]["metadata"]["uid"], (
            f"{where}: owner"
        )


def test_trainjob_pods_carry_jobset_labels(records: tuple[str, list[dict[str, Any]]]) -> None:
    name, recs = records
    trainjobs = _jobs(recs, "TrainJob")
    for number, rec in enumerate(recs, start=1):
        pod = rec["object"]
        labels = pod["metadata"].get("labels") or {}
        if pod["kind"] != "Pod" or JOBSET_NAME not in labels:
            continue
        where = f"{name}:{number} {pod['metadata']['name']}"
        job = labels[JOBSET_NAME]
        assert job in trainjobs, f"{where}: {JOBSET_NAME}={job!r} names no TrainJob in the file"
        rjob = labels.get(JOBSET_RJOB)
        assert rjob in {"launcher", "node"}, f"{where}: {JOBSET_RJOB}={rjob!r}"
        index, completion = labels.get(JOBSET_JOB_INDEX), labels.get(COMPLETION_INDEX)
        assert index is not None and completion is not None, f"{where}: job/completion index labels"
        assert pod["metadata"]["name"].startswith(f"{job}-{rjob}-{index}-{completion}-"), f"{where}: pod name"
        owner = next(o for o in pod["metadata"]["ownerReferences"] if o.get("controller"))
        assert (owner["kind"], owner["name"]) == ("Job", f"{job}-{rjob}-{index}"), f"{where}: owner Job"


def test_logs_only_where_a_container_terminated_with_an_error(
    records: tuple[str, list[dict[str, Any]]],
) -> None:
    name, recs = records
    for number, rec in enumerate(recs, start=1):
        if "logs" not in rec:
            continue
        where = f"{name}:{number}"
        obj = rec["object"]
        assert obj["kind"] == "Pod" and rec["type"] == "MODIFIED", (
            f"{where}: logs on a {rec['type']} {obj['kind']}"
        )
        failed = {
            s["name"]
            for s in obj["status"].get("containerStatuses") or []
            if (s.get("state", {}).get("terminated") or {}).get("exitCode", 0) != 0
        }
        assert rec["logs"] and set(rec["logs"]) <= failed, (
            f"{where}: logs for {set(rec['logs'])}, failed {failed}"
        )
        assert all(isinstance(v, str) and v for v in rec["logs"].values()), f"{where}: empty log"
