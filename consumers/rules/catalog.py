"""The rule catalog: every rule, in the order findings are reported, and what explains what.

One failure shows up in several places: a worker killed for memory makes mpirun report
"rank 5 exited on signal 9" and may make the launcher lose its daemon. Each rule lists
the rules whose finding *explains* it (``explained_by``); when both hold, only the
explanation is reported, and an already-firing symptom is resolved with
``superseded_by`` naming it (the first explanation in catalog order, so the most specific
cause is named). The relation must stay acyclic (a test checks it).

- A rendezvous that failed (``rendezvous``: torchrun's processes never met) is explained by any
  pod-level cause (a peer that could not start), and explains the ranks that exited of it
  (``mpi-abort``) and the communication errors around it (``mpi-comm``).
- ``restarting`` (the operator restarts a failed replica) is explained by nothing: each restart
  is told once, beside the replica's own cause.
- Communication symptoms (``mpi-comm``, ``mpi-abort``) are explained by any pod-level
  cause: an OOM kill, a GPU out of memory or failing, a segfault, a full disk, a quota
  refusal, an image that cannot be pulled, a lost or evicted pod. A segfault or a GPU error
  reported through NCCL's watchdog or mpirun's abort summary is that error; an NCCL timeout
  on the surviving ranks is explained by the peer's own cause. A broken mesh also explains
  the ranks it took down.
- Stalls are explained by any cause that says why the run cannot move on, and by the
  stalls before them (a mesh that never formed explains a lack of progress).
- One exception: ``unschedulable`` does not hide ``hang-pending``. Waiting for capacity
  may end by itself; the first says why the run waits, the second for how long
  ("Pending 20m: waiting for 8 GPUs").
- A GPU's own fault (``gpu-fault``, from DCGM) explains what the program printed of it
  (``gpu-error``: a CUDA error on a GPU that reported an Xid is the hardware's) and, as a pod
  cause, the communication symptoms and stalls it brings; ``gpu-throttled`` steps aside for
  any other cause (a fault on one GPU says nothing of another's clocks).
- ``evicted`` steps aside for ``disk-full`` where the kubelet evicted the pod for ephemeral storage:
  the same eviction, told by the disk that filled and with its remedy.
- ``node-degraded`` (a bad condition of a pod's node: a kernel deadlock, a read-only filesystem,
  pressure) is a pod cause like the others; it steps aside for ``node-lost`` and ``evicted``,
  which tell the same node's trouble by what it did to the pod. A GPU condition of the node is
  ``gpu-fault``'s.
- The usage warnings step aside for what they warn of: ``memory-near-limit`` for the ``oom``
  that came, ``gpu-idle`` for any cause that explains why a worker stopped working.
- ``oom-predicted`` steps aside for the ``oom`` it foresaw (which then says how early it was
  seen); ``straggler`` for any cause or stall that explains a worker falling behind, and for
  ``gpu-idle`` (a worker stopped, not slowed) — not for ``node-degraded``: a node under memory
  pressure slows a worker without stopping it, and the straggler names it as its likely reason.
- The catch-all ``failed`` is explained by every other rule: it speaks only when nothing
  more specific does, and steps aside when a specific finding arrives later.
"""

from __future__ import annotations

from dataclasses import replace

from consumers.rules.catchall import FAILED
from consumers.rules.containers import CRASHLOOP, IMAGE_PULL
from consumers.rules.disks import DISK_FULL
from consumers.rules.forecast import OOM_PREDICTED
from consumers.rules.gpu import GPU_ERROR
from consumers.rules.gpuhealth import GPU_FAULT, GPU_THROTTLED
from consumers.rules.memory import GPU_OOM, OOM
from consumers.rules.mpi import MPI_ABORT, MPI_COMM
from consumers.rules.nodeconditions import NODE_DEGRADED
from consumers.rules.nodes import EVICTED, NODE_LOST
from consumers.rules.quota import QUOTA
from consumers.rules.rendezvous import RENDEZVOUS
from consumers.rules.restarts import RESTARTING
from consumers.rules.rule import Rule
from consumers.rules.scheduling import UNSCHEDULABLE
from consumers.rules.segfaults import SEGFAULT
from consumers.rules.stalls import FAILURE_PROPAGATION, HANG_INIT, HANG_PENDING, HANG_PROGRESS
from consumers.rules.stragglers import STRAGGLER
from consumers.rules.usage import GPU_IDLE, MEMORY_NEAR_LIMIT
from controller.contract.findings import RuleId

_POD_RULES: tuple[Rule, ...] = (
    OOM,
    GPU_OOM,
    GPU_FAULT,
    replace(GPU_ERROR, explained_by=frozenset({"gpu-fault"})),
    SEGFAULT,
    DISK_FULL,
    QUOTA,
    IMAGE_PULL,
    UNSCHEDULABLE,
    CRASHLOOP,
    replace(EVICTED, explained_by=frozenset({"disk-full"})),
    NODE_LOST,
    replace(NODE_DEGRADED, explained_by=frozenset({"node-lost", "evicted"})),
)
"""The rules of a pod's own cause, first in the catalog."""
POD_CAUSES: frozenset[RuleId] = frozenset(rule.id for rule in _POD_RULES)
CAUSES: frozenset[RuleId] = POD_CAUSES | {"rendezvous", "mpi-comm", "mpi-abort"}
STALLS: frozenset[RuleId] = frozenset(
    {"failure-propagation", "restarting", "hang-init", "hang-pending", "hang-progress"}
)

CATALOG: tuple[Rule, ...] = (
    *_POD_RULES,
    replace(RENDEZVOUS, explained_by=POD_CAUSES),
    replace(MPI_COMM, explained_by=POD_CAUSES | {"rendezvous"}),
    replace(MPI_ABORT, explained_by=POD_CAUSES | {"rendezvous", "mpi-comm"}),
    FAILURE_PROPAGATION,
    RESTARTING,
    replace(HANG_INIT, explained_by=CAUSES | {"failure-propagation"}),
    replace(HANG_PENDING, explained_by=(CAUSES - {"unschedulable"}) | {"failure-propagation", "hang-init"}),
    replace(HANG_PROGRESS, explained_by=CAUSES | {"failure-propagation", "hang-init", "hang-pending"}),
    replace(GPU_IDLE, explained_by=CAUSES | {"failure-propagation", "hang-init"}),
    replace(GPU_THROTTLED, explained_by=(CAUSES - {"gpu-fault"}) | {"failure-propagation"}),
    replace(MEMORY_NEAR_LIMIT, explained_by=frozenset({"oom"})),
    replace(OOM_PREDICTED, explained_by=frozenset({"oom"})),
    replace(
        STRAGGLER,
        explained_by=(CAUSES - {"node-degraded"}) | {"failure-propagation", "hang-init", "gpu-idle"},
    ),
    replace(FAILED, explained_by=CAUSES | STALLS),
)

RULES: dict[RuleId, Rule] = {rule.id: rule for rule in CATALOG}
