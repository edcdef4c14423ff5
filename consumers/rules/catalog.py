"""The rule catalog: every rule, in the order findings are reported, and what explains what.

One failure shows up in several places: a worker killed for memory makes mpirun report
"rank 5 exited on signal 9" and may make the launcher lose its daemon. Each rule lists
the rules whose finding *explains* it (``explained_by``); when both hold, only the
explanation is reported, and an already-firing symptom is resolved with
``superseded_by`` naming it. The relation must stay acyclic (a test checks it).

- MPI symptoms (``mpi-comm``, ``mpi-abort``) are explained by any pod-level cause;
  a lost daemon also explains the ranks it took down.
- Stalls are explained by any cause that says why the run cannot move on, and by the
  stalls before them (a mesh that never formed explains a lack of progress).
- One exception: ``unschedulable`` does not hide ``hang-pending``. Waiting for capacity
  may end by itself; the first says why the run waits, the second for how long
  ("Pending 20m: waiting for 8 GPUs").
"""

from __future__ import annotations

from dataclasses import replace

from consumers.rules.containers import CRASHLOOP, IMAGE_PULL
from consumers.rules.memory import GPU_OOM, OOM
from consumers.rules.mpi import MPI_ABORT, MPI_COMM
from consumers.rules.nodes import EVICTED, NODE_LOST
from consumers.rules.rule import Rule
from consumers.rules.scheduling import UNSCHEDULABLE
from consumers.rules.stalls import FAILURE_PROPAGATION, HANG_INIT, HANG_PENDING, HANG_PROGRESS
from controller.contract.findings import RuleId

POD_CAUSES: frozenset[RuleId] = frozenset(
    {"oom", "gpu-oom", "image-pull", "unschedulable", "crashloop", "evicted", "node-lost"}
)
CAUSES: frozenset[RuleId] = POD_CAUSES | {"mpi-comm", "mpi-abort"}

CATALOG: tuple[Rule, ...] = (
    OOM,
    GPU_OOM,
    IMAGE_PULL,
    UNSCHEDULABLE,
    CRASHLOOP,
    EVICTED,
    NODE_LOST,
    replace(MPI_COMM, explained_by=POD_CAUSES),
    replace(MPI_ABORT, explained_by=POD_CAUSES | {"mpi-comm"}),
    FAILURE_PROPAGATION,
    replace(HANG_INIT, explained_by=CAUSES | {"failure-propagation"}),
    replace(HANG_PENDING, explained_by=(CAUSES - {"unschedulable"}) | {"failure-propagation", "hang-init"}),
    replace(HANG_PROGRESS, explained_by=CAUSES | {"failure-propagation", "hang-init", "hang-pending"}),
)

RULES: dict[RuleId, Rule] = {rule.id: rule for rule in CATALOG}
