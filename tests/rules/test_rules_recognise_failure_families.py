"""A communication failure is recognised by who printed it and what it says about the mesh.

A line in the format of a known library (NCCL's ``NCCL WARN``, libfabric's ``libfabric:pid:…:efa:``,
PMIx's ``PMIX ERROR:``, gRPC's ``StatusCode.…``, Hydra's ``[proxy:0:0@host]``, …) that says the
mesh was refused, reset, unreachable, timed out, lost, aborted, could not spawn or could not
allocate transport memory is an ``mpi-comm`` finding whose sentence and remediation are the
library's — whether the wording is new for a known library or the failure known from another.
A message continued over lines is read whole, and a launch failure is named before the process
manager's cleanup that follows it. Lines in a known format that say nothing failed (an INFO line, a
retry, a warning of c10d) are no finding. Stall reports name the missing rank in each format
their library has printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from consumers.rules import RuleEngine
from consumers.rules.families import family_failures, logical_lines
from consumers.rules.tails import rank_failures
from controller.contract.events import BusEvent, JobSpecSummary
from controller.contract.findings import Finding
from controller.testing.events import at, job, launcher, log_seen, replay, spec, worker
from tests.rules.corpus_replay import Entry, run


def _entry(text: str, stack: str = "openmpi", expect: str | None = "mpi-comm") -> Entry:
    return Entry(id="t", file="t", stack=stack, where="log", expect=expect, text=text)  # type: ignore[arg-type]


def _comm(text: str, stack: str = "openmpi") -> Finding:
    outcome = run(_entry(text, stack))
    assert outcome.rules == {"mpi-comm"}, outcome.rules
    (finding,) = [f for f in outcome.firing if f.rule == "mpi-comm"]
    return finding


# (format shown by the line, the words the finding must say, a word of its remediation)
NEW_WORDINGS = {
    "libfabric-efa-unreachable": (
        "libfabric:4242:1700000000::efa:ep_ctrl:efa_rdm_ep_post_handshake():311<warn> Peer 10.0.3.7 is "
        "unreachable",
        "libfabric",
        "security group",
        "vpc.amazonaws.com/efa",
    ),
    "libfabric-efa-memory-registration": (
        "libfabric:4242:1700000000::efa:mr:efa_mr_reg_impl():512<warn> Unable to register MR: Cannot allocate "
        "memory",
        "libfabric",
        "memlock",
        "IPC_LOCK",
    ),
    "pmix-unreachable": (
        "[pi-worker-1:00042] PMIX ERROR: UNREACHABLE in file ../../../src/server/pmix_server.c at line 2795",
        "PMIx",
        "PMIx server",
        "prted",
    ),
    "grpc-unavailable-parameter-server": (
        "tensorflow.python.framework.errors_impl.UnavailableError: From /job:ps/replica:0/task:0: "
        "failed to connect to all addresses",
        "TensorFlow",
        "parameter server",
        "TF_CONFIG",
    ),
    "xgboost-collective-refused": (
        "xgboost.core.XGBoostError: [10:42:07] /workspace/src/collective/socket.cc:170: Failed to connect "
        "to 10.0.2.9:9091: Connection refused",
        "XGBoost",
        "tracker",
        "tracker",
    ),
    "jax-coordination-deadline": (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "checkpoint_saved_step_4000",
        "JAX",
        "coordinator",
        "coordinator_address",
    ),
    "aws-ofi-nccl-open-fabric": (
        "WARN: Function: ofi_init Line: 1102: NET/OFI Couldn't open a fabric provider. RC: -61, ERROR: No data "
        "available",
        "libfabric",
        "could not open a resource of its transport",
        "FI_PROVIDER",
    ),
    "libfabric-verbs-address-error": (
        "libfabric:4242:1700000000:ofi_rxm:verbs:ep_ctrl:vrb_eq_read_event():620<warn> "
        "RDMA_CM_EVENT_ADDR_ERROR for 10.0.3.7",
        "libfabric",
        "could not be reached",
        "FI_LOG_LEVEL",
    ),
    "mpich-ch4-address-not-available": (
        "Assertion failed in file src/mpid/ch4/netmod/ofi/ofi_impl.h at line 190: addr != FI_ADDR_NOTAVAIL",
        "MPICH",
        "FI_ADDR_NOTAVAIL",
        "MPIR_CVAR_DEBUG_SUMMARY",
    ),
    "xgboost-result-chain-connect": (
        "xgboost.core.XGBoostError: [10:42:07] /workspace/src/collective/comm.cc:85:\n"
        "- [comm.cc:85|10:42:07]: Failed to connect to the tracker.",
        "XGBoost",
        "tracker",
        "tracker",
    ),
    "intel-mpi-bootstrap-proxies": (
        "[mpiexec@pi-launcher] HYD_bstrap_setup (../../../../../src/pm/i_hydra/libhydra/bstrap/src/intel/"
        "i_hydra_bstrap.c:1065): error setting up the bootstrap proxies",
        "Intel MPI",
        "bootstrap proxy",
        "I_MPI_DEBUG",
    ),
    "tf-grpc-json-status-ps": (
        "2026-01-02 03:04:05.000001: E tensorflow/core/distributed_runtime/worker.cc:42] RecvTensor from "
        '/job:ps/replica:0/task:1 failed: {"grpc_message":"Socket closed","grpc_status":14}',
        "TensorFlow",
        "parameter server",
        "TF_CONFIG",
    ),
    "nccl-handshake-wrong-magic": (
        "pi-worker-1:42:99 [0] misc/socket.cc:420 NCCL WARN socketFinalizeAccept: wrong magic 8f3a != 1f2b",
        "NCCL",
        "wrong handshake",
        "same image",
    ),
    "nccl-error-trail-from-bootstrap": (
        "pi-worker-1:42:99 [0] NCCL INFO bootstrap.cc:73 -> 6\n"
        "pi-worker-1:42:99 [0] NCCL INFO init.cc:1201 -> 6\n"
        "pi-worker-1:42:42 [0] NCCL INFO group.cc:64 -> 6 [Async thread]",
        "NCCL",
        "error trail",
        "died first",
    ),
    "horovod-stall-inspector": (
        "[2026-01-02 03:04:05.000001: W /horovod/common/stall_inspector.cc:107] One or more tensors were "
        "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
        "ranks for more than 60 seconds.\nMissing ranks:\n0: [allreduce.noname.1]",
        "Horovod",
        "collective stalled",
        "HOROVOD_LOG_LEVEL",
    ),
    "ucx-register-memory": (
        "[1700000000.123456] [pi-worker-1:42   :0]          ib_md.c:293  UCX  ERROR ibv_reg_mr(address=0x7f, "
        "length=4096, access=0xf) failed: Cannot allocate memory",
        "UCX",
        "memlock",
        "UCX_NET_DEVICES",
    ),
}


@pytest.mark.parametrize("case", NEW_WORDINGS.values(), ids=NEW_WORDINGS.keys())
def test_a_line_of_a_known_library_saying_what_broke_is_that_librarys_communication_failure(
    case: tuple[str, str, str, str],
) -> None:
    text, library, words, step = case

    finding = _comm(text, stack="other")

    assert library in finding.root_cause
    assert words in finding.root_cause
    assert any(step in s for s in finding.remediation)


def test_an_nccl_warning_whose_reason_follows_on_the_next_line_is_read_whole() -> None:
    text = (
        "pi-worker-1:42:99 [0] NCCL WARN Last error:\n"
        "socketStartConnect: Connect to 10.0.2.9<45678> failed : Connection refused"
    )

    ((index, message, block),) = logical_lines(tuple(text.splitlines()))
    finding = _comm(text, stack="nccl")

    assert (index, block) == (0, False)
    assert message.endswith("Connection refused")
    assert "NCCL" in finding.root_cause and "refused" in finding.root_cause


def test_a_grpc_error_over_indented_lines_is_read_whole() -> None:
    text = (
        "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n"
        "\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses"'
    )

    (hit,) = family_failures(tuple(text.splitlines()))

    assert hit.group("library") == "grpc" and hit.group("verb") == "unreachable"
    assert "UNAVAILABLE" in _comm(text, stack="other").root_cause


OPEN_MPI_LAUNCH = """\
--------------------------------------------------------------------------
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /opt/train
Node: pi-worker-1

while attempting to start process rank 2.
--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 0 on node pi-worker-1 exited on signal 9 (Killed)."""

HYDRA_LAUNCH = """\
[proxy:0:1@pi-worker-1] HYDU_create_process (utils/launch/launch.c:74): execvp error on file /opt/train (No such file or directory)
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 2 PID 4242 RUNNING AT pi-worker-1
=   KILLED BY SIGNAL: 9 (Killed)
==================================================================================="""


@pytest.mark.parametrize(
    ("text", "library"), [(OPEN_MPI_LAUNCH, "Open MPI"), (HYDRA_LAUNCH, "Hydra")], ids=["open-mpi", "hydra"]
)
def test_a_launch_failure_is_named_not_the_process_managers_kill_that_follows(
    text: str, library: str
) -> None:
    finding = _comm(text)

    assert library in finding.root_cause
    assert "could not launch" in finding.root_cause
    assert "signal 9" not in finding.root_cause


NOT_FAILURES = {
    "nccl-info-retry": "pi-worker-1:42:99 [0] NCCL INFO Call to connect returned Connection refused, retrying",
    "c10d-warning": "[W socket.cpp:601] [c10d] The client socket has failed to connect to [pi-master-0]:29500 "
    "(errno: 111 - Connection refused).",
    "ucx-info": "[1700000000.1] [pi-worker-1:42:0] ucp_worker.c:1777 UCX  INFO  ep_cfg[1]: tag(tcp/eth0) "
    "connection timed out",
    "nccl-interface-setting": "pi-worker-1:42:42 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "efa-hint": "libfabric:4242:1700000000::efa:core:efa_prov_info():99<warn> A missing security group rule may "
    "cause Connection timed out",
}


@pytest.mark.parametrize("text", NOT_FAILURES.values(), ids=NOT_FAILURES.keys())
def test_a_line_of_a_known_library_that_reports_no_failure_is_none(text: str) -> None:
    assert family_failures((text,)) == ()
    assert run(_entry(text, expect=None)).rules <= {"failed"}


DOCS = Path(__file__).parents[2] / "docs" / "troubleshooting.md"
DOCUMENTED = {  # the first words of a row of the families table, and the library key it stands for
    "NCCL": "nccl",
    "Open MPI / ORTE": "ompi",
    "Open MPI's PRRTE": "prrte",
    "Open MPI's OFI MTL": "ompi-ofi",
    "Charm++": "charm",
    "MPICH's Hydra": "hydra",
    "Intel MPI": "intel-mpi",
    "MVAPICH": "mvapich",
    "PMIx": "pmix",
    "UCX": "ucx",
    "libfabric": "efa",
    "Gloo": "gloo",
    "gRPC": "grpc",
    "XGBoost's": "xgboost",
    "Horovod": "horovod",
    "ps-lite": "pslite",
    "Ray Train": "ray",
    "torch.distributed": "torch",
    "oneCCL": "oneccl",
    "HCCL": "hccl",
    "Slurm's": "slurm",
    "DeepSpeed": "launcher",
    "TensorFlow's": "tf",
    "JAX's": "jax",
    "the TensorFlow / JAX coordination": "coordination",
}


def _documented_examples() -> dict[str, tuple[str, str]]:
    """Each row of the documented families table: its library key and its example's lines."""
    rows: dict[str, tuple[str, str]] = {}
    for line in DOCS.read_text().splitlines():
        cells = line.split(" | ")
        if len(cells) != 2 or not line.startswith("| "):
            continue
        family = cells[0].removeprefix("| ")
        key = next((k for prefix, k in DOCUMENTED.items() if family.startswith(prefix)), None)
        if key is not None and key not in [k for k, _ in rows.values()]:
            spans = re.findall(r"`([^`]+)`", cells[1].split(" (in a ")[0])
            rows[family] = (key, "\n".join(spans))
    return rows


EXAMPLES = _documented_examples()


def test_every_family_is_documented_with_an_example() -> None:
    assert sorted(k for k, _ in EXAMPLES.values()) == sorted(DOCUMENTED.values())


@pytest.mark.parametrize("row", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_each_documented_example_lands_in_its_family(row: tuple[str, str]) -> None:
    key, example = row

    hits = family_failures(tuple(example.splitlines()))

    assert [h.group("library") for h in hits][:1] == [key]


# ------------------------------------------------------------------ stalls


def _four_ranks() -> list[BusEvent]:
    small = JobSpecSummary.model_validate({**spec(workers=2).model_dump(), "slots_per_worker": 2})
    return [job("Running", job_spec=small), launcher(), worker(0), worker(1)]


HOROVOD_HEADLINE = (
    "[1,1]<stderr>:[2019-05-02 10:19:07.345988: W horovod/common/operations.cc:588] One or more tensors "
    "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
    "remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to "
    "submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. "
)
FLIGHT_RECORDER = (
    "[1,{rank}]<stderr>:[rank{rank}]:[E703 15:37:17.178057290 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
    "0(default_pg) Rank {rank}] Received a dump signal due to a collective timeout from  rank 0 and we will "
    "try our best to dump the debug info. Last enqueued NCCL work: 62, last completed NCCL work: 61."
)
STALLS = {
    "horovod-0.13-stalled-ops": (
        (
            HOROVOD_HEADLINE,
            "[1,1]<stderr>:Stalled ops:",
            "[1,1]<stderr>:HorovodAllreduce_grads_0 [missing ranks: 3]",
        ),
        "Horovod's stall inspector names rank 3",
    ),
    "horovod-0.16-stalled-ranks": (
        (HOROVOD_HEADLINE, "[1,1]<stderr>:Stalled ranks:", "[1,1]<stderr>:3!: [HorovodAllreduce_grads_0]"),
        "Horovod's stall inspector names rank 3",
    ),
    "horovod-0.21-missing-ranks": (
        (HOROVOD_HEADLINE, "[1,1]<stderr>:Missing ranks:", "[1,1]<stderr>:3: [HorovodAllreduce_grads_0]"),
        "Horovod's stall inspector names rank 3",
    ),
    "torch-monitored-barrier": (
        ("[1,0]<stderr>:RuntimeError: [Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 30000 ms",),
        "ranks 2 and 3 did not reach torch's monitored barrier within 30s",
    ),
    "torch-heartbeat-monitor-watchdog-stuck": (
        (
            "[1,2]<stderr>:[rank2]:[E1111 17:10:53.000000000 ProcessGroupNCCL.cpp:1500] [PG ID 0 PG GUID "
            "0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress "
            "in monitoring enqueued collectives.",
        ),
        "the NCCL watchdog of rank 2 got stuck for 480s",
    ),
    "nccl-flight-recorder": (
        tuple(FLIGHT_RECORDER.format(rank=r) for r in (0, 1, 3)),
        "rank 2 never reported the collective",
    ),
    "torch-elastic-timer-tagged": (
        (
            "[rank3]:[I1128 10:00:00.000 local_timer.py:101] Reaping worker_pid=[5151]. Expired timers: ['fwd']",
        ),
        "torch elastic's timer server reaped rank 3 (process 5151) (expired timers: ['fwd'])",
    ),
    "torch-elastic-timer-root-cause-block": (
        (
            "INFO:torch.distributed.elastic.timer.file_based_local_timer:Reaping worker_pid=[5151]. Expired "
            "timers: ['data_load']",
            "  rank      : 2 (local_rank: 0)",
            "  exitcode  : -9 (pid: 5151)",
        ),
        "torch elastic's timer server reaped rank 2 (process 5151)",
    ),
    "torch-elastic-timer-pid-only": (
        (
            "INFO:torch.distributed.elastic.timer.local_timer:Reaping worker_pid=[5151]. Expired timers: ['step']",
        ),
        "reaped process 5151 (its rank is not in the output)",
    ),
}


@pytest.mark.parametrize("case", STALLS.values(), ids=STALLS.keys())
def test_a_stall_report_names_the_missing_rank_in_each_format(case: tuple[tuple[str, ...], str]) -> None:
    lines, words = case
    engine = RuleEngine()
    replay(engine, _four_ranks())
    engine.observe(log_seen(*(f"[1,{r}]<stdout>:step 7" for r in range(4)), observed_at=at(1)), at(1))
    changes: list[Finding] = []
    for minute in range(5, 45, 5):  # a stall report, repeated: no progress
        changes += engine.observe(log_seen(*lines, observed_at=at(minute)), at(minute))

    (hang,) = [f for f in changes if f.rule == "hang-progress" and f.status == "firing"]
    assert words in hang.root_cause


def test_a_failed_start_up_registration_with_the_coordination_service_is_a_missed_rendezvous() -> None:
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Failed to connect to coordination service. The "
        "first task may not be up yet."
    )

    outcome = run(_entry(text, stack="jax", expect="rendezvous"))

    assert outcome.rules == {"rendezvous"}
    (finding,) = [f for f in outcome.firing if f.rule == "rendezvous"]
    assert "coordination service" in finding.root_cause


def test_the_process_managers_noise_after_an_abort_note_is_its_cleanup() -> None:
    text = (
        "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n"
        "You may or may not see output from other processes, depending on\n"
        "exactly when Open MPI kills them.\n"
        "[pi-worker-1:00099] PMIX ERROR: PMIX_ERR_UNREACH in file ../src/mca/ptl/base/ptl_base_sendrecv.c at "
        "line 123"
    )

    assert run(_entry(text, expect="mpi-abort")).rules == {"mpi-abort"}


@pytest.mark.parametrize(
    ("line", "how", "local"),
    [
        (
            "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 (pid: "
            "4242) of binary: /usr/bin/python3",
            "killed",
            0,
        ),
        (
            "E1111 10:00:00.000000 4242 torch/distributed/elastic/multiprocessing/api.py:826] failed "
            "(exitcode: 2) local_rank: 1 (pid: 4243) of binary: /usr/bin/python",
            "exited",
            1,
        ),
    ],
    ids=["bracketed-level", "glog"],
)
def test_torch_elastics_failed_worker_is_read_in_each_log_format(line: str, how: str, local: int) -> None:
    (failure,) = rank_failures((line,))

    assert (failure.how, failure.local_rank, failure.launcher) == (how, local, "torch elastic")
