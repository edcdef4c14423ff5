"""Signatures of failures in log text beyond MPI's own words, one family per rule.

A :class:`Signature` is one stable wording of one failure by one library, with the library
named and the failure said in plain words. The readers return :class:`Hit` s, one per line
at most (the first signature of the family that matches), in log order:

- :func:`transport_failures` (``mpi-comm``) — communication between ranks broke, as NCCL
  (watchdog timeouts, ``ncclRemoteError``, ``ncclSystemError``, socket and InfiniBand
  errors, its ``/dev/shm`` segments), Gloo, Horovod, UCX, InfiniBand verbs, libfabric and
  aws-ofi-nccl say it. A ``Bus error`` in a tail that shows NCCL at work is NCCL's
  shared-memory transport hitting a too-small ``/dev/shm``, not a crash of its own. What no
  wording here names is read by family — who printed a line and what it says about the mesh
  (:mod:`consumers.rules.families`);
- :func:`native_crashes` (``segfault``) — SIGSEGV / SIGBUS in native code, as UCX, Open
  MPI, Python's faulthandler, the shell, mpirun, Hydra and the kernel report it;
- :func:`gpu_errors` (``gpu-error``) — the GPU or a kernel on it failed: illegal memory
  access, launch failure, device-side assert, ECC errors, NVLink errors, Xid events, a GPU
  fallen off the bus. GPU *memory* running out is ``gpu-oom`` (:mod:`consumers.rules.tails`);
- :func:`disk_full` (``disk-full``) — ``ENOSPC`` / ``EDQUOT`` while writing, and PyTorch
  DataLoader workers filling ``/dev/shm``. NCCL's own ``/dev/shm`` failures belong to
  :func:`transport_failures`;
- :func:`kernel_oom` (``oom``) — the kernel's OOM killer (cgroup or whole node), and
  Slurm's and Talos's account of it, printed into a log or a node Event; a batch scheduler (PBS,
  LSF, Grid Engine) killing the job for the memory it was granted;
- :data:`QUOTA_REFUSAL` (``quota``) — the API server's quota refusal as a program printed it.

Like every pattern of the package, these start with a literal and use bounded quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from consumers.rules.tails import (
    bounded,
    gpu_oom_lines,
    handled,
    is_hint,
    is_mention,
    output_rank,
    went_on,
)
from controller.contract.xids import xid as xid_entry


@dataclass(frozen=True)
class Signature:
    """One wording of one failure: which library says it, what it means."""

    name: str
    library: str
    what: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Hit:
    """A line of a tail that matched a signature."""

    signature: Signature
    line: str
    index: int
    rank: int | None
    groups: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return self.signature.name

    def group(self, name: str) -> str | None:
        """A named group of the match, if it took part in it."""
        return next((value for key, value in self.groups if key == name), None)


_JOB_NUMBERED = frozenset({"zsh"})
"""Signatures whose line opens with a shell's job number in brackets (zsh's ``[1]    83815 segmentation
fault``): no rank's output tag."""


def _scan(tail: tuple[str, ...], family: tuple[Signature, ...]) -> tuple[Hit, ...]:
    found: list[Hit] = []
    lines = bounded(tail)
    for i, line in enumerate(lines):
        whole = _wrapped(lines, i)  # once per line, not once per signature that missed it
        for signature in family:
            text, match = line, signature.pattern.search(line)
            if match is None and whole is not None:
                # a message a console wrapped at its width, read whole: only a match across the break counts
                across = signature.pattern.search(whole)
                if across is not None and across.end() > len(line):
                    text, match = whole, across
            if match is not None:
                groups = tuple((k, v) for k, v in match.groupdict().items() if v is not None)
                rank = None if signature.name in _JOB_NUMBERED else output_rank(text)
                found.append(
                    Hit(signature, text, i, rank if rank is not None else message_rank(text), groups)
                )
                break
    return tuple(found)


_CONSOLE_WIDTH = 80
"""The width a console (a terminal, a pasted log) wraps a long message at, cutting a word where it falls."""


def _wrapped(lines: tuple[str, ...], index: int) -> str | None:
    """``lines[index]`` and the next line joined, where the line fills the console's width exactly and the
    next carries it on (not indented: not a frame or a block of its own); else ``None``."""
    if len(lines[index]) != _CONSOLE_WIDTH or index + 1 >= len(lines):
        return None
    after = lines[index + 1]
    return lines[index] + after if after[:1].strip() else None


_MESSAGE_RANK = re.compile(r"\[(?:PG [^\]]{0,60}? )?Rank (\d{1,7})\]")


def message_rank(line: str) -> int | None:
    """The rank NCCL's watchdog names in its message (``[Rank 3] Watchdog caught …``)."""
    match = _MESSAGE_RANK.search(line[:400])
    return int(match.group(1)) if match is not None else None


# ----------------------------------------------------------------- transports

_NCCL_AT_WORK = re.compile(r"NCCL (?:INFO|WARN)|NCCL version|ProcessGroupNCCL|ncclCommInit")

NCCL_SHM = Signature(
    "nccl-shm",
    "NCCL",
    "/dev/shm is too small for NCCL's shared-memory transport",
    re.compile(
        r"NCCL WARN (?:Error: failed to extend (?P<path>/dev/shm/\S{1,200}) to (?P<bytes>\d{1,15}) bytes"
        r"|Error while creating shared memory segment (?P<segment>\S{1,200})"
        r"|Call to posix_fallocate failed)"
    ),
)
NCCL_SHM_BUS = Signature(
    "nccl-shm-bus",
    "NCCL",
    "/dev/shm is too small for NCCL's shared-memory transport (a Bus error while NCCL ran)",
    re.compile(r"Bus error"),
)

TRANSPORTS: tuple[Signature, ...] = (
    NCCL_SHM,
    Signature(
        "nccl-ib",
        "NCCL over InfiniBand",
        "an InfiniBand work completion failed: the peer or the link went away",
        re.compile(  # ``with error 12, opcode …`` (older NCCL) or ``with status=12 opcode=…`` (newer)
            r"NET/IB ?: Got completion (?:from peer (?P<peer>\S{1,100}) )?"
            r"with (?:error |status=)(?P<status>\d{1,4})"
        ),
    ),
    Signature(
        "nccl-ibv",
        "NCCL over InfiniBand",
        "an InfiniBand verbs call failed",
        re.compile(r"NCCL WARN Call to (?P<call>ibv_\w{1,40}) failed"),
    ),
    Signature(
        "nccl-ofi",
        "NCCL over libfabric / aws-ofi-nccl",
        "the libfabric / EFA network plugin failed",
        re.compile(r"NCCL WARN NET/OFI (?P<detail>.{1,200})"),
    ),
    # the same status (ibv_wc_status_str()'s words) in libfabric's verbs provider's log line
    # (``libfabric:pid:time::verbs:cq:vrb_poll_cq():NN<warn> Work completion status: transport retry counter
    # exceeded (12)``, prov/verbs/src/verbs_cq.c): libfabric's, not UCX's
    Signature(
        "verbs-retry",
        "libfabric's verbs provider (InfiniBand / RoCE)",
        "InfiniBand transport retries ran out: the peer or the link stopped answering",
        re.compile(
            r"libfabric:\d{1,10}:\d{1,20}:[\w-]{0,40}:verbs:[^\n]{0,300}?"
            r"[Tt]ransport retry (?:count(?:er)? )?exceeded"
        ),
    ),
    Signature(
        "ucx-retry",
        "UCX over InfiniBand / RoCE",
        "InfiniBand transport retries ran out: the peer or the link stopped answering",
        # ibv_wc_status_str()'s words, or the same words without ``count`` as UCX's users retell them
        re.compile(r"[Tt]ransport retry (?:count(?:er)? )?exceeded(?: on (?P<device>\S{1,60}))?"),
    ),
    # rdma-core's providers failing to create a queue pair in the kernel (mlx5's ``create qp: failed on
    # ibv_cmd_create_qp with 12``, its extended call's ``ibv_cmd_create_qp_ex2``): no connection to a peer
    # can be made without one
    Signature(
        "ibv-create-qp",
        "InfiniBand verbs (rdma-core)",
        "the InfiniBand verbs provider could not create a queue pair (ibv_cmd_create_qp failed), so no "
        "connection to another rank could be made",
        re.compile(r"create (?:qp|QP): failed on ibv_cmd_create_qp(?:_ex2?)? with (?P<errno>\d{1,4})"),
    ),
    Signature(
        "ib-completion",
        "InfiniBand verbs",
        "an InfiniBand work completion failed: the peer or the link went away",
        re.compile(r"(?i:got completion with error)(?: (?P<status>\d{1,4}))?"),
    ),
    Signature(
        "openib-cq",
        "Open MPI over InfiniBand (openib)",
        "an InfiniBand work completion failed: the peer or the link went away",
        re.compile(r"error polling [HL]P CQ with status [A-Z ]{1,60} status number (?P<status>\d{1,4})"),
    ),
    Signature(
        "ibv-wc",
        "InfiniBand verbs",
        "an InfiniBand work completion failed: the peer or the link went away",
        re.compile(r"\bIBV_WC_(?P<wc>[A-Z_]{1,30}_ERR)\b"),
    ),
    Signature(
        "libfabric-cq",
        "libfabric",
        "a libfabric completion failed",
        re.compile(r"fi_cq_readerr: err: \d{1,6}, prov_err: (?P<detail>[^\n]{1,100})"),
    ),
    Signature(
        "nccl-socket",
        "NCCL",
        "a socket to another rank failed",
        re.compile(
            r"(?:NCCL WARN (?:Net|NET/Socket) ?: |socketProgress\w{0,20}: |include/socket\.h:\d{1,5} WARN )"
            r"(?:Call to \w{1,20} (?:(?:from|to) (?P<peer>\S{1,200}) )?failed ?: (?P<detail>[^\n]{1,100})"
            r"|(?P<closed>Connection closed by remote peer))"
        ),
    ),
    Signature(
        "ompi-tcp",
        "Open MPI over TCP",
        "a TCP connection to another rank failed (the peer process died or the network dropped it)",
        re.compile(
            r"mca_btl_tcp_\w{1,40}\]? (?:mca_btl_tcp_\w{1,40}: )?"
            r"(?:\w{1,20}\(\d{1,6}\) failed|readv failed|writev failed)"
            r": (?P<detail>Connection (?:reset by peer|refused|timed out)|No route to host|Broken pipe)"
        ),
    ),
    Signature(
        "gloo-mesh",
        "Gloo",
        "Gloo could not connect all ranks (connectFullMesh failed)",
        re.compile(r"Gloo connectFullMesh failed"),
    ),
    # Horovod's coordinator finding the ranks' requests for one tensor at odds (horovod/common/controller.cc:
    # ``Mismatched ALLGATHER CPU/GPU device selection: One rank specified device CPU, but another rank …``,
    # ``Mismatched data types: One rank had type float32, but another rank had type float16.``, ``Mismatched
    # MPI operations: One rank did an allreduce, but another rank did a broadcast``)
    Signature(
        "horovod-mismatch",
        "Horovod",
        "the ranks asked Horovod for the same tensor with different requests (device, data type, shape or "
        "operation), so its coordinator refused the collective",
        re.compile(
            r"Mismatched (?:[A-Z_]{3,20} CPU/GPU device selection|data types|MPI operations"
            r"|[A-Za-z_]{3,20} tensor shapes|[A-Z_]{3,20} (?:prescale|postscale) factors?)[^\n]{0,10}?: "
            r"One rank (?:specified|had|did|sent)\b"
        ),
    ),
    # Open MPI's shared-memory segment (opal's shmem mmap component) that could not be created for the
    # ranks on a node: its backing file's directory (the session directory in /tmp or /dev/shm) full,
    # not writable or on a file system it refuses
    Signature(
        "ompi-shmem-mmap",
        "Open MPI (its shmem mmap component)",
        "Open MPI could not create its shared-memory segment for the ranks on a node (shmem: mmap)",
        re.compile(
            r"shmem: mmap: an error occurred while determining whether or not \S{1,400} could be created"
        ),
    ),
    # a message longer than the buffer posted for it (the MPI standard's error class MPI_ERR_TRUNCATE): Open
    # MPI's fatal handler ``*** MPI_ERR_TRUNCATE: message truncated``, MPICH's error stack ``Message from rank
    # 0 and tag 7 truncated; 64 bytes received but buffer size is 32`` (src/mpi/errhan/errnames.txt)
    Signature(
        "mpi-truncate",
        "MPI (a message truncated)",
        "a rank received a message longer than the buffer it posted for it (MPI_ERR_TRUNCATE): the ranks "
        "disagree on the size, count or type of a message or collective",
        re.compile(
            # (its error string as MPI_Error_string gives it, after Open MPI's ``***``, mpi4py's
            # ``mpi4py.MPI.Exception: `` or a C++ wrapper's ``MPI Error 15: ``)
            r"\bMPI_ERR_TRUNCATE: message truncated"
            r"|\bMessage from rank \d{1,7} and tag -?\d{1,10} truncated; \d{1,20} bytes received "
            r"but buffer size is"
            # MPICH's ch3 unpacking an unexpected message into the buffer posted (its error stack's last
            # frame, ``MPIDI_CH3U_Request_unpack_uebuf(599): Message truncated; 1536 bytes received but
            # buffer size is 1024``)
            r"|\bMessage truncated; \d{1,20} bytes received but buffer size is \d"
        ),
    ),
    # perftest's bandwidth and latency tools (ib_write_bw, ib_read_bw, ib_send_bw …) on a work completion
    # that failed (``Completion with error at client`` / ``Failed status 4: wr_id 0 syndrom 0x51``: the
    # ibv_wc_status and the HCA's vendor syndrome)
    Signature(
        "perftest-completion",
        "perftest (ib_write_bw and the InfiniBand benchmarks)",
        "an InfiniBand work completion failed in perftest's test",
        re.compile(r"\bFailed status (?P<status>\d{1,3}): wr_id \d{1,20} syndrom e?0x[0-9a-fA-F]{1,4}"),
    ),
    # the mlx5 driver (the kernel's, for ConnectX HCAs) on an error event of a completion queue (``mlx5_core
    # 0000:02:00.0: mlx5_eq_int:556:(pid 0): CQ error on CQN 0x40a, syndrom 0x1``: 0x1 an overrun, 0x2 an
    # access violation), as libfabric's or a verbs program's queue fails with it
    Signature(
        "mlx5-cq-error",
        "the mlx5 driver (ConnectX InfiniBand / RoCE)",
        "the HCA reported an error event on a completion queue (a CQ error: the queue overran or was "
        "misused, and the program using it lost its completions)",
        re.compile(
            r"\bmlx5_core [0-9a-fA-F:.]{1,20}: mlx5_eq_int:\d{1,6}:\(pid \d{1,10}\): CQ error on CQN "
            r"0x[0-9a-fA-F]{1,8}, syndrome? (?P<syndrome>0x[0-9a-fA-F]{1,4})"
        ),
    ),
    # IBM Spectrum MPI's PAMI reading another rank's buffer by cross-memory attach (CMA, process_vm_readv) in
    # its shared-memory device and getting nothing (``CMAShaddr.h:164: size_t
    # PAMI::Device::Shmem::CMAShaddr::read_impl(…): Assertion `cbytes > 0' failed.``, errno 1 before it)
    Signature(
        "pami-cma",
        "IBM Spectrum MPI (PAMI)",
        "PAMI could not read another rank's memory by cross-memory attach (CMA: process_vm_readv refused, "
        "as between ranks without ptrace permission on each other, in a container) and its shared-memory "
        "device asserted",
        re.compile(r"\bPAMI::Device::Shmem::CMAShaddr::read_impl\("),
    ),
    # a process of the communicator failed (the MPI 4.x fault tolerance's error classes, ULFM's): Open MPI's
    # fatal handler ``*** MPI_ERR_PROC_FAILED: Process Failure`` (ompi/errhandler/errcode.c), the
    # communicator revoked after it, MPICH's ``MPIX_ERR_PROC_FAILED`` (src/mpi/errhan/errnames.txt)
    Signature(
        "mpi-proc-failed",
        "MPI (a process of the communicator failed)",
        "a process of the communicator failed (MPI_ERR_PROC_FAILED, or MPI_ERR_REVOKED on the communicator "
        "revoked after it): a rank died or its node became unreachable, and the others' calls with it failed",
        re.compile(
            r"\*\*\* MPI_ERR_(?:PROC_FAILED(?:_PENDING)?|REVOKED): "
            r"|\bMPIX_ERR_(?:PROC_FAILED(?:_PENDING)?|REVOKED)\b"
        ),
    ),
    # NCCL's bootstrap and socket transport receiving a longer message than the one it posted (``NCCL WARN
    # Message truncated : received 1024 bytes instead of 256``: bootstrap.cc's bootstrapNetRecv,
    # transport/net_socket.cc): the peer at the other end does not speak the same exchange
    Signature(
        "nccl-truncate",
        "NCCL",
        "NCCL received a longer message than it expected from a peer (Message truncated, in its bootstrap or "
        "socket exchange): the ranks run different NCCL versions or settings, or a process of another run "
        "reached this one's port",
        re.compile(r"NCCL WARN Message truncated : received \d{1,20} bytes instead of \d"),
    ),
    # NCCL's bootstrap root (the rank holding the unique id's listening socket; RCCL's and MSCCL++'s bootstrap
    # alike, bootstrap.cc's bootstrapRoot) refusing a check-in: a second process claiming a rank already in,
    # or processes that disagree on the number of ranks (``NCCL WARN Bootstrap Root : rank 3 of 8 ranks has
    # already checked in``, ``… mismatch in rank count from procs 8 : 4``, newer releases' ``mismatch in
    # info from procs, nranks …``); not its progress note (``… rank 3 of 8 ranks checked in``)
    Signature(
        "nccl-bootstrap-root",
        "NCCL's bootstrap",
        "NCCL's bootstrap root refused a rank's check-in (a rank already checked in, or ranks that disagree "
        "on how many there are): two processes were given the same rank or world size differs between them, "
        "or two runs share one unique id's address (MASTER_ADDR / MASTER_PORT)",
        re.compile(
            r"\bBootstrap Root : (?:rank \d{1,7} of \d{1,7} ranks has already checked in"
            r"|mismatch in (?:rank count|info) from procs\b)"
        ),
    ),
    # MPICH's simple PMI client (src/pmi/simple/simple_pmiutil.c), a rank unable to talk to its process
    # manager over the PMI_FD socket Hydra (or another PMI-1 server) handed it: ``[cli_3]: write_line
    # error; fd=9 buf=:cmd=get_appnum`` with its ``system msg for write_line failure : …``, ``Unable to
    # write to PMI_fd``
    Signature(
        "pmi-simple",
        "MPICH's PMI client",
        "a rank could not talk to its process manager over PMI (the PMI_FD socket): the rank was started "
        "outside mpiexec, or its process manager is gone or is another MPI's",
        # PMI-1's commands of a rank meeting the others, not ``cmd=abort`` (the client failing to pass on a
        # rank's own abort, which is the cause)
        re.compile(
            r"\bwrite_line error; fd=-?\d{1,6} buf=:cmd=(?:init|get|put|barrier_in|finalize|kvs)"
            r"|\bUnable to write to PMI_fd\b"
        ),
    ),
    # Slurm's mpi/pmix plugin (slurmstepd's PMIx server for srun --mpi=pmix) on its collective between the
    # nodes failing: PMIx's error handler called with a status, its fence's ring or tree state dumped
    Signature(
        "slurm-pmix",
        "Slurm's mpi/pmix plugin",
        "Slurm's PMIx server (mpi/pmix) failed in its collective between the nodes (PMIx fence), so the "
        "ranks could not exchange their addresses",
        re.compile(
            r"\bmpi/pmix(?:_v\d)?: ERROR: (?:Error handler invoked: status = -\d{1,5}\b"
            r"|[^\n]{0,80}?\bCOLL_FENCE_(?:RING|TREE) state\b)"
        ),
    ),
    # Gloo named with its connection failing, in any language a thread's title or a person tells it in
    # (``Gloo connect failed``, ``gloo: connection refused``, ``gloo 连接被拒绝``)
    Signature(
        "gloo-connect",
        "Gloo",
        "a TCP connection between ranks failed (Gloo could not connect to a peer)",
        re.compile(
            r"\b(?:gloo|Gloo|GLOO)(?:[^A-Za-z\n][^\n]{0,40}?)?"
            r"(?:[Cc]onnection refused|[Cc]onnect(?:ion)? failed|连接失败|连接被拒绝|拒绝连接)"
        ),
    ),
    Signature(
        "gloo-pair",
        "Gloo",
        "a TCP connection between ranks failed",
        re.compile(r"gloo/transport/tcp/pair\.cc:\d{1,6}\] (?P<detail>[^\n]{1,200})"),
    ),
    Signature(
        "ucx-diag",
        "UCX",
        "an endpoint to another rank failed",
        re.compile(r"UCX {1,3}DIAG {1,3}ep \S{1,40}: error '(?P<detail>[^']{1,100})'"),
    ),
    Signature(
        "ucx-error", "UCX", "a UCX transport error", re.compile(r"UCX {1,3}ERROR (?P<detail>.{1,300})")
    ),
    Signature(
        "ompi-ucx",
        "Open MPI over UCX",
        "the UCX transport failed",
        re.compile(r"pml_ucx\.c:\d{1,6} {1,4}Error: (?P<detail>.{1,200})"),
    ),
    Signature(
        "nccl-remote",
        "NCCL",
        "a peer rank exited or the network between ranks failed (ncclRemoteError)",
        re.compile(r"remote process exited or there was a network error|ncclRemoteError"),
    ),
    Signature(
        "nccl-system",
        "NCCL",
        "a system call failed (ncclSystemError: sockets, shared memory or another OS resource)",
        re.compile(r"unhandled system error|ncclSystemError"),
    ),
    # NCCL's own error class for a CUDA call of its own that failed (``ncclUnhandledCudaError``, printed
    # ``unhandled cuda error`` by torch's c10d, PaddlePaddle's ``ExternalError: Nccl error, unhandled cuda
    # error (at …collective_helper.cc:…)``, Horovod's): the communicator's failure, as NCCL's other errors
    # are; a GPU's fault its ``Last error:`` names (illegal address, ECC) is ``gpu-error``'s instead
    Signature(
        "nccl-cuda",
        "NCCL",
        "a CUDA call inside NCCL failed (ncclUnhandledCudaError)",
        re.compile(r"unhandled cuda error|ncclUnhandledCudaError"),
    ),
    Signature(
        "nccl-timeout",
        "NCCL",
        "a collective timed out: a peer rank stopped taking part",
        re.compile(
            # torch's watchdog over NCCL (``WorkNCCL``), or torch_npu's over HCCL on Ascend (``WorkHCCL``);
            # the rank's own wait under NCCL_BLOCKING_WAIT in PyTorch 1.7-1.10 (``[Rank 3] Caught …``)
            r"(?:Watchdog caught|\] Caught) collective operation timeout: "
            r"Work(?P<ccl>[NH])CCL\((?P<work>.{0,300}?)"
            # or a terminal wrapped the line inside the work's fields (before ``Timeout(ms)=``)
            # (a title may cut it after the count: ``ran for 1800834 m``)
            r"(?:\) ran for (?P<ms>\d{1,12})(?: m| ?$)|,\s{0,4}$)"
        ),
    ),
    Signature(
        "nccl-watchdog",
        "NCCL",
        "the NCCL watchdog saw a collective fail or time out",
        # its own words, or c10d's line as the watchdog takes the process down after it (``Some NCCL
        # operations have failed or timed out. … we are taking the entire process down.``): the watchdog's
        # aftermath, a peer's symptom, not a timeout of c10d's own; and its counters where they stand alone
        # (torch 2.3 on, ProcessGroupNCCL.cpp's watchdogHandler: ``[PG 0 Rank 2] Timeout at NCCL work: 2, last
        # enqueued NCCL work: 2, last completed NCCL work: 1.``), the timeout's own line cut from the tail
        re.compile(
            r"detected by watchdog|Some NCCL operations have failed or timed out\b"
            r"|\bTimeout at NCCL work: \d{1,19}, last enqueued NCCL work: -?\d"
        ),
    ),
    Signature(
        "horovod-shutdown",
        "Horovod",
        "Horovod shut down because a rank failed or left early",
        re.compile(r"Horovod has been shut down"),
    ),
)
"""In order of preference: the first family member found in a tail is its root cause."""

_SHM_SIGNATURES = frozenset({"nccl-shm", "nccl-shm-bus"})
_PEER_SYMPTOMS = frozenset({"nccl-timeout", "nccl-watchdog", "nccl-remote", "horovod-shutdown", "gloo-pair"})


def is_shared_memory(hit: Hit) -> bool:
    """Whether a transport failure is NCCL's ``/dev/shm`` being too small."""
    return hit.name in _SHM_SIGNATURES


def is_peer_symptom(hit: Hit) -> bool:
    """Whether a transport failure typically means *another* rank died first."""
    return hit.name in _PEER_SYMPTOMS


_NCCL_CHOSE_NETWORK = re.compile(r"NCCL INFO (?:Using network \w|NET/(?:Socket|IB) ?: Using )")
"""NCCL naming the network it uses, once, at start-up: a network plugin that failed before it is one
NCCL fell back from (aws-ofi-nccl not initialised, then ``Using network Socket``)."""


@lru_cache(maxsize=512)
def transport_failures(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """Communication failures between ranks carried by NCCL, Gloo, Horovod, UCX, verbs, libfabric
    (not a network plugin NCCL fell back from, nor an error the run went on past to its results)."""
    lines = bounded(tail)
    hits = [
        h
        for h in _scan(tail, TRANSPORTS)
        if not (h.name == "nccl-ofi" and fell_back(tail, h.index))
        and not (h.name == "nccl-cuda" and (gpu_errors(tail) or gpu_oom_lines(tail)))
        and not went_on(lines, h.index)
    ]
    if _nccl_at_work(tail):
        hits.extend(
            Hit(NCCL_SHM_BUS, h.line, h.index, h.rank, h.groups)
            for h in _scan(tail, CRASHES)
            if _bus_error(h)
        )
    return tuple(sorted(hits, key=lambda h: h.index))


def fell_back(tail: tuple[str, ...], index: int) -> bool:
    """Whether NCCL chose its network after line ``index`` (a network plugin failing there is one NCCL
    fell back from)."""
    return any(_NCCL_CHOSE_NETWORK.search(line) for line in bounded(tail)[index + 1 :])


def _nccl_at_work(tail: tuple[str, ...]) -> bool:
    return any(_NCCL_AT_WORK.search(line) for line in bounded(tail))


# ------------------------------------------------------------------- crashes

CRASHES: tuple[Signature, ...] = (
    Signature(
        "ucx-signal",
        "UCX",
        "",
        re.compile(r"Caught signal (?P<signal>\d{1,3}) \((?P<kind>Segmentation fault|Bus error)"),
    ),
    Signature(
        "ompi-signal",
        "Open MPI",
        "",
        # strsignal()'s wording: ``Segmentation fault`` (glibc), ``Segmentation fault: 11`` (macOS)
        re.compile(r"Signal: (?P<kind>Segmentation fault|Bus error)(?:: \d{1,2})? \((?P<signal>\d{1,3})\)"),
    ),
    # Julia's own handler for the signal: ``signal (11): Segmentation fault`` (``signal (11.1)`` with the
    # siginfo code since 1.6, under ``[pid]`` since 1.7, ``signal (7): Bus error``), before its backtrace and
    # the ``in expression starting at file.jl:N`` (older: ``while loading …, in expression starting on
    # line N``)
    Signature(
        "julia",
        "Julia",
        "",
        re.compile(
            r"(?:^|\[\d{1,10}\] |\s)signal \((?P<signal>11|7)(?:\.\d{1,3})?\): "
            r"(?P<kind>Segmentation fault|Bus error)"
        ),
    ),
    # Charm++'s converse layer on a processor (a PE) that caught the signal (its KillOnAllSigs:
    # ``------------- Processor 0 Exiting: Caught Signal ------------`` then ``Reason: segmentation
    # violation``, ``Reason: bus error``), the reason on its own line under the banner
    Signature(
        "charm",
        "Charm++",
        "",
        re.compile(r"^\s{0,8}Reason: (?P<kind>segmentation violation|bus error)\s{0,4}$"),
    ),
    # PETSc's signal handler (``[0]PETSC ERROR: Caught signal number 11 SEGV: Segmentation Violation, probably
    # memory access out of range``; ``Caught signal number 7 BUS: Bus Error, possibly illegal memory access``)
    Signature(
        "petsc",
        "PETSc",
        "",
        re.compile(r"PETSC ERROR: Caught signal number (?P<signal>11|7) (?P<kind>SEGV|BUS): "),
    ),
    # R's own handler for the signal (``*** caught segfault ***`` / ``*** caught bus error ***``, then
    # ``address 0x…, cause 'memory not mapped'`` and R's traceback)
    Signature("r", "R", "", re.compile(r"\*\*\* caught (?P<kind>segfault|bus error) \*\*\*")),
    # a sanitizer's report of the signal it caught (compiler-rt's ``==PID==ERROR: AddressSanitizer: SEGV on
    # unknown address 0x… (pc … bp … sp … T0)``, ``BUS on unknown address``, ThreadSanitizer's,
    # MemorySanitizer's, UBSan's and HWASan's in the same words; a stack overflow is its SIGSEGV too), not
    # its ``AddressSanitizer:DEADLYSIGNAL`` header alone, which it prints for SIGFPE and SIGILL as well
    Signature(
        "sanitizer",
        "a sanitizer",
        "",
        re.compile(
            r"(?P<tool>(?:HWAddress|Address|Thread|Memory|UndefinedBehavior)Sanitizer): "
            r"(?:(?P<kind>SEGV|BUS) on unknown address\b|(?P<overflow>stack-overflow) on address\b)"
        ),
    ),
    Signature(
        "python",
        "Python",
        "",
        # mpirun tags each write of faulthandler's, so its tag may come again inside the line; since Python
        # 3.9 the function that raised it comes first (``Fatal Python error: func: …``), and an extension's
        # own handler names itself (pygame's ``Fatal Python error: (pygame parachute) Segmentation Fault``)
        re.compile(
            r"Fatal Python error: (?:\[\d{1,7},\d{1,7}\]<std(?:err|out)>:)?(?:\w{1,60}: )?"
            r"(?:\([\w .-]{1,40}\) )?(?P<kind>Segmentation [Ff]ault|Bus [Ee]rror)"
            # its handler on Windows, where the access violation is SIGSEGV's (faulthandler.c's table)
            r"|^Windows fatal exception: access violation\b"
        ),
    ),
    # (either, with its words set in markdown emphasis where a thread pasted it: ``**Segmentation fault**``)
    Signature(
        "shell", "", "", re.compile(r"(?P<kind>Segmentation fault|Bus error)(?:\*\*)? {1,8}\(core dumped\)")
    ),
    Signature(
        "mpirun-signal",
        "",
        "",
        re.compile(
            r"(?:exited on\s{1,4}|^\s{0,4})signal (?P<signal>11|7) "
            r"\((?P<kind>Segmentation fault|Bus error)\)"
            # mpirun's account of the rank itself (``mpirun noticed that process rank 5 with PID 6637 on node
            # n7 exited on signal 11``, older ORTE's ``with OID``): signal 11 is SIGSEGV whatever words follow
            # (a name in lower case, on the next line where the log wrapped it, or none), the node's name
            # empty where the daemon never learnt it (``… on node exited on signal 11``)
            r"|\bnoticed that process rank \d{1,7} with (?:PID|OID) \d{1,10} on\s{1,10}node (?:\S{1,253} )?"
            r"exited on signal 11\b"
        ),
    ),
    Signature(
        "hydra-signal",
        "",
        "",
        re.compile(
            r"KILLED BY SIGNAL: (?P<signal>11|7) \((?P<kind>Segmentation fault|Bus error)\)"
            # the same block's older lines: the shell's exit status 139 (128 + SIGSEGV), or the exit
            # string that names the signal
            r"|^\s{0,4}=\s{1,8}EXIT CODE: 139\b"
            r"|EXIT STRING: (?P<kind2>Segmentation fault|Bus error)\b"
        ),
    ),
    # The signal's name counts where a process is said to have received it or died of it —
    # not where a banner, a handler table or a hint merely names it.
    Signature(
        "signal-name",
        "",
        "",
        re.compile(
            r"(?:[Rr]eceived|[Cc]aught|[Gg]ot|[Kk]illed by|[Tt]erminated (?:by|with)|[Ee]xited (?:on|with)"
            r"|[Dd]ied (?:of|with)|[Ff]atal)"
            r"(?: signal)?:? {0,2}<?(?:Signals\.)?SIG(?P<kind>SEGV|BUS)\b"
        ),
    ),
    Signature(
        "signal-name-after",
        "",
        "",
        re.compile(
            r"\bSIG(?P<kind>SEGV|BUS)(?: \(@| \(0x[0-9a-f]{1,4}\)|: segmentation violation|: bus error code="
            r"| received)"
            r"|[Ss]ignal \d{1,2} \(SIG(?P<kind2>SEGV|BUS)\)"
        ),
    ),
    # A runtime's or launcher's account of a process that died of signal 11 by number: Cray's
    # walk-back (``Process died with signal 11``), HPE PALS (``rank 3 died from signal 11``), MPD
    # (``Exit status of rank 0: killed by signal 11``), ``Exiting due to signal 11``; or by name,
    # ALPS's ``PE RANK 5 exit signal Segmentation fault``.
    Signature(
        "died-of-signal",
        "",
        "",
        re.compile(
            r"(?:\b(?:[Pp]rocess(?:es)?|[Rr]ank|[Tt]ask|[Cc]hild)(?: \d{1,10})?(?: \(pid \d{1,10}\))?:? "
            r"(?:has )?(?:died|was killed|terminated|exited) (?:with|by|on|from) signal"
            r"|[Kk]illed by signal|[Ee]xiting due to signal) (?P<signal>11)\b"
            r"|PE RANK \d{1,7} exit signal (?P<kind>Segmentation fault|Bus error)"
        ),
    ),
    Signature("kernel", "", "", re.compile(r"segfault at [0-9a-f]{1,16} ip ")),
    # strsignal()'s words alone on a line, as a signal handler or a shell prints them for the process that
    # died: MXNet's (dmlc-core's) handler before its ``Stack trace:`` / ``Stack trace returned N entries:``
    # and ``[bt]`` frames, PaddlePaddle's glog handler, macOS's shell (``Segmentation fault: 11``,
    # ``Bus error: 10``), under mpirun's tag or not
    Signature(
        "alone",
        "",
        "",
        re.compile(
            r"^\s{0,8}(?:\[\d{1,7},\d{1,7}\]<std(?:err|out)>:\s{0,4})?"
            r"(?P<kind>Segmentation fault|Bus error)(?:: (?P<signal>11|10|7))?\s{0,4}$"
        ),
    ),
    # bash reporting a command of a script that died of the signal: ``./train.sh: line 207: 10558
    # Segmentation fault      cmd …`` (its job's number, then strsignal()'s words and the command)
    Signature(
        "shell-job",
        "",
        "",
        re.compile(
            r": line \d{1,7}: {1,4}\d{1,10} (?:\*\*)?(?P<kind>Segmentation fault|Bus error)(?:\*\*)?"
            r"(?: {2}|\s{0,4}$)"
        ),
    ),
    # torch elastic's agent on a worker process that died of a signal: the exit code is minus the
    # signal, SIGSEGV's 11 (``failed (exitcode: -11) local_rank: 0``, the Root Cause block's
    # ``exitcode : -11``)
    Signature(
        "elastic-signal",
        "torch elastic",
        "",
        re.compile(
            r"failed \(exitcode: -(?P<signal>11)\) local_rank: \d"
            r"|^\s{0,8}exitcode\s{0,10}: -11 \(pid: \d"
        ),
    ),
    # DeepSpeed's launcher on a rank that died of a signal, minus the signal as torch elastic writes it
    # (``[launch.py:N:sigkill_handler] [cmd…] exits with return code = -11``)
    Signature(
        "deepspeed-signal",
        "DeepSpeed's launcher",
        "",
        re.compile(r"exits with return code = -(?P<signal>11)\b"),
    ),
    # Python's subprocess on a child dead of the signal, minus the signal in its exit status
    # (``CalledProcessError: Command '…' returned non-zero exit status -11``, since 3.6 ``died with
    # <Signals.SIGSEGV: 11>``), and torch.multiprocessing's spawn (``process 1 terminated with signal
    # SIGSEGV``)
    Signature(
        "child-signal",
        "Python",
        "",
        re.compile(
            r"CalledProcessError: Command [^\n]{0,400}?(?:returned non-zero exit status -(?P<signal>11)\b"
            r"|died with <Signals\.(?P<kind>SIGSEGV|SIGBUS): \d{1,2}>)"
            r"|\bprocess \d{1,7} terminated with signal (?P<kind2>SIGSEGV|SIGBUS)\b"
        ),
    ),
    # a launcher's or a scheduler's account of a task a signal ended, in strsignal()'s words: Slurm's srun
    # (src/srun/srun_job.c / step_launch.c: ``srun: error: node12: task 3: Segmentation fault``, without
    # the ``(core dumped)`` its other releases add), Flux's flux-job (src/cmd/job/attach.c: ``flux-job:
    # task(s) Segmentation fault``, the job shell's 128+signal in words)
    Signature(
        "srun-signal",
        "Slurm's srun",
        "",
        re.compile(
            r"srun: error: (?P<host>[\w.-]{1,253}): tasks? (?P<task>\d{1,7})[\d,-]{0,200}: "
            r"(?P<kind>Segmentation fault|Bus error)\s{0,4}$"
        ),
    ),
    Signature(
        "flux-signal",
        "Flux's flux-job",
        "",
        re.compile(r"\bflux-job: task\(s\) (?P<kind>Segmentation fault|Bus error)\b"),
    ),
    # the .NET runtime ending a process whose native code faulted: an access violation (SIGSEGV on Linux)
    # it cannot let managed code catch (src/coreclr/vm/excep.cpp: ``Fatal error.
    # System.AccessViolationException: Attempted to read or write protected memory.``)
    Signature(
        "dotnet-access-violation",
        ".NET",
        "",
        re.compile(
            r"(?:Fatal error\.|Unhandled [Ee]xception\.) System\.AccessViolationException: "
            r"Attempted to read or write protected memory"
        ),
    ),
    # the Intel Fortran runtime's severe error for the signal (``forrtl: severe (174): SIGSEGV, segmentation
    # fault occurred``, before its ``Image  PC  Routine  Line  Source`` traceback table)
    Signature(
        "forrtl",
        "the Intel Fortran runtime",
        "",
        re.compile(r"forrtl: severe \(174\): (?P<kind>SIGSEGV), segmentation fault occurred"),
    ),
    # OpenFOAM's own SIGSEGV handler printing the solver's stack (``#1  Foam::sigSegv::sigHandler(int) at
    # ??:?``, under each processor's ``[N]`` in a parallel run), before it raises the signal again
    Signature("foam", "OpenFOAM", "", re.compile(r"\bFoam::sigSegv::sigHandler\(int\)")),
    # glibc's psiginfo (and the handlers that call it, backward-cpp's among them): the signal's name, then the
    # kernel's si_code in words and the faulting address, ``(nil)`` for NULL (``Segmentation fault (Invalid
    # permissions for mapped object [0x7f3c2a000000])``, ``Bus error (Nonexistent physical address [0x…])``)
    Signature(
        "psiginfo",
        "",
        "",
        re.compile(
            r"\b(?:(?P<kind>Bus error) \((?:Invalid address alignment|Nonexistent physical address"
            r"|Object-specific hardware error)|Segmentation fault \((?:Address not mapped to object"
            r"|Invalid permissions for mapped object))(?: \[(?:0x[0-9a-fA-F]{1,16}|\(nil\))\])?\)"
        ),
    ),
    # an IDE's run console on the process it started (JetBrains': ``Process finished with exit code 139
    # (interrupted by signal 11: SIGSEGV)``; on macOS SIGBUS is signal 10, exit code 138)
    Signature(
        "ide-exit",
        "",
        "",
        re.compile(
            r"Process finished with exit code 1(?:39|35|38) \(interrupted by signal "
            r"(?:11: SIGSEGV|(?:7|10): SIG(?P<kind>BUS))\)"
        ),
    ),
    # Rust's report of a child that a signal ended (std's ExitStatus: ``signal: 11 (SIGSEGV) (core dumped)``,
    # with or without the core; SIGBUS's 10 on macOS), and Cargo's around it for the program it ran
    # (``process didn't exit successfully: `target/…` (signal: 11, SIGSEGV: invalid memory reference)``)
    Signature(
        "rust-exit",
        "",
        "",
        re.compile(
            r"process didn't exit successfully: `[^`\n]{1,300}` \(signal: "
            r"(?:11, SIGSEGV|7, SIG(?P<kind>BUS)): "
            r"|\bsignal: (?:11 \(SIGSEGV\)|(?:7|10) \(SIG(?P<kind2>BUS)\))"
        ),
    ),
    # zsh's report of a job a signal ended, in its own lower-case words (``zsh: segmentation fault (core
    # dumped)  python train.py``, ``zsh: bus error  ./solver``; Src/signames2.awk, jobs.c), or as its job
    # table prints it, the job's number and its pid first (jobs.c's printjob on a job's notification:
    # ``[1]    83815 segmentation fault  python train.py``, ``[2]  + 4242 bus error (core dumped)  ./solver``)
    Signature(
        "zsh",
        "",
        "",
        re.compile(
            r"^(?:zsh: |\[\d{1,4}\] {1,8}[+-]? {0,8}\d{1,10} )(?:segmentation fault|(?P<kind>bus error))"
            r"(?: \(core dumped\))? {1,4}\S"
        ),
    ),
    # the usual hand-written handler of a native module (``fprintf(stderr, "Error: signal %d:\n", sig)``
    # then glibc's backtrace_symbols_fd, whose frames follow): the line alone, as the handler writes it
    Signature(
        "backtrace-handler",
        "",
        "",
        re.compile(r"^\s{0,8}Error: signal 11:\s{0,4}$"),
    ),
    # gdb's account of the signal that ended the program, read from its core file or seen live (gdb/infrun.c,
    # gdb/corelow.c: ``Program terminated with signal SIGSEGV, Segmentation fault.``, older releases the
    # signal's number, ``Program terminated with signal 11, Segmentation fault.``; ``Program received signal
    # SIGBUS, Bus error.`` where it stopped the program on it), at the start of its line
    Signature(
        "gdb",
        "gdb",
        "",
        re.compile(
            r"^\s{0,8}Program (?:terminated with|received) signal (?:11|7|10|SIGSEGV|SIGBUS), "
            r"(?P<kind>Segmentation fault|Bus error)\."
        ),
    ),
    # c10's (formerly Caffe2's) fatal signal handler, which PyTorch installs on Linux: the signal's name and
    # number, the process and the thread, then c10's backtrace, for each of the process's threads
    # (c10/util/signal_handler.cpp, FatalSignalHandler::stacktraceSignalHandler: ``SIGSEGV(11), PID: 4711,
    # Thread 4712:``), at the start of its line
    Signature(
        "c10-fatal-signal",
        "PyTorch's (c10's) fatal signal handler",
        "",
        re.compile(r"^\s{0,8}SIG(?P<kind>SEGV|BUS)\((?P<signal>11|7)\), PID: \d{1,10}, Thread \d{1,10}:"),
    ),
    Signature(  # a DataLoader worker process died of SIGSEGV (its bus errors are /dev/shm: disk-full)
        "dataloader",
        "PyTorch DataLoader",
        "",
        re.compile(
            r"DataLoader worker \(pids? [^)]{1,100}\) is killed by signal: (?P<kind>Segmentation fault)"
            r"|Unexpected (?P<kind2>segmentation fault) encountered in worker"
        ),
    ),
)
_FRAME_PY = re.compile(r"File \"(?P<file>[^\"]{1,300})\", line (?P<line>\d{1,7}) in (?P<func>[\w<>.]{1,100})")
_FRAME_NATIVE = re.compile(r"^\s{0,8}\d{1,3} {1,4}0x[0-9a-f]{1,16} (?P<func>[\w:~<>.]{1,200})\(\)")
_SIGNAL_FRAMES = (
    "__sigaction",
    "__funlockfile",
    "__restore_rt",
    "ucs_",
    "killpg",
    "__GI_raise",
    "<signal handler",
)


_HOST_PREFIX = re.compile(r"^\s{0,8}\[(?P<host>[A-Za-z][\w.-]{0,252}):\d{1,10}[:\] ]")


def crash_host(hit: Hit) -> str | None:
    """The host a UCX or Open MPI crash line names in its ``[host:pid…]`` prefix."""
    match = _HOST_PREFIX.match(hit.line)
    return match.group("host") if match is not None else None


def _bus_error(hit: Hit) -> bool:
    return (hit.group("kind") or hit.group("kind2") or "").upper() in ("BUS ERROR", "BUS")


@lru_cache(maxsize=512)
def native_crashes(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """Segmentation faults and bus errors (unless NCCL's ``/dev/shm`` explains the bus error; not a
    tip naming one, nor a crash the run went on past: a worker's, its loop's counter passing on after it)."""
    lines = bounded(tail)
    hits = tuple(h for h in _scan(tail, CRASHES) if not _mention(h) and not went_on(lines, h.index))
    if _nccl_at_work(tail):
        hits = tuple(h for h in hits if not _bus_error(h))
    return hits


def crash_is_bus_error(hit: Hit) -> bool:
    """SIGBUS rather than SIGSEGV."""
    return _bus_error(hit)


@lru_cache(maxsize=512)
def crash_frame(tail: tuple[str, ...], index: int) -> str | None:
    """Where it crashed, from the backtrace after line ``index``: the first native frame
    that is not the signal handler, or the innermost Python frame of faulthandler's dump."""
    after = bounded(tail)[index + 1 : index + 40]
    current = next((i for i, line in enumerate(after) if line.startswith("Current thread")), None)
    for line in after[current or 0 :]:
        if (native := _FRAME_NATIVE.match(line)) is not None:
            if not native.group("func").startswith(_SIGNAL_FRAMES):
                return f"{native.group('func')}()"
        elif (python := _FRAME_PY.search(line)) is not None:
            path = "/".join(python.group("file").split("/")[-4:])
            return f"{python.group('func')} ({path}:{python.group('line')})"
    return None


# --------------------------------------------------------------------- GPUs

_CUDA_GDB = r"(?:CUDA Exception: |CUDA_EXCEPTION_\d{1,2}, )"
"""cuda-gdb's report of an exception the GPU raised, or the signal it stops the thread with for it."""
GPU_ERRORS: tuple[Signature, ...] = (
    Signature(
        "xid",
        "NVIDIA driver",
        "",
        re.compile(
            # (older drivers print the address without ``PCI:``: ``NVRM: Xid (0000:01:00): 13, 0005 …``)
            r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]{1,20})\): (?P<xid>\d{1,4})"
            r"(?:.{0,200}?caused by previous Xid (?P<previous>\d{1,4}))?"
        ),
    ),
    Signature(
        "off-bus",
        "NVIDIA driver",
        "the GPU fell off the bus and no longer answers (PCIe, power or hardware fault)",
        re.compile(r"fallen off the bus"),
    ),
    Signature(
        "gpu-lost",
        "NVIDIA driver",
        "the GPU is lost and no longer answers (hardware or driver fault)",
        re.compile(r"GPU is lost|Unable to determine the device handle for GPU|\bNVML_ERROR_GPU_IS_LOST\b"),
    ),
    # nvidia-smi (NVML) with no driver to talk to: the kernel module not loaded, or not matching the
    # user-space libraries (``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
    # driver. Make sure that the latest NVIDIA driver is installed and running.``)
    Signature(
        "no-driver",
        "nvidia-smi",
        "nvidia-smi could not reach the NVIDIA driver: its kernel module is not loaded on the node, or the "
        "device plugin did not give the container the GPU and its driver",
        re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ),
    Signature(
        "ecc",
        "CUDA",
        "uncorrectable ECC error: the GPU's memory is failing (hardware)",
        re.compile(r"uncorrectable ECC error|ECC_UNCORRECTABLE|cudaErrorECCUncorrectable"),
    ),
    Signature(
        "nvlink",
        "CUDA",
        "uncorrectable NVLink error (hardware or link fault)",
        re.compile(r"uncorrectable NVLink error|NVLINK_UNCORRECTABLE"),
    ),
    Signature(
        "device-assert",
        "CUDA",
        "an assertion failed inside a GPU kernel (device-side assert), typically an index or a "
        "class label out of range",
        re.compile(
            # the kernel's function as the compiler names it: a plain name, a functor's ``operator()``, a
            # template's whole signature with its spaces (``void indexSelectLargeIndex<float, long, …>(…)``)
            r"device-side assert triggered|\.(?:cu|cuh|h|hpp):\d{1,6}: (?:[^\n]{1,600}?: )?"
            r"block: \[\d{1,6},\d{1,6},\d{1,6}\], thread: \[\d{1,6},\d{1,6},\d{1,6}\] Assertion"
        ),
    ),
    Signature(
        "illegal-address",
        "CUDA",
        "illegal memory access: a GPU kernel read or wrote memory it does not own, usually a bug "
        "in a kernel or an extension (wrong index or shape), sometimes failing hardware",
        # the driver API's name (``CUDA_ERROR_ILLEGAL_ADDRESS``), the runtime's (``cudaErrorIllegalAddress``)
        # and .NET's ManagedCuda enum's (``CUResult.ErrorIllegalAddress``), as each binding raises it
        re.compile(
            r"illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress"
            r"|\bErrorIllegalAddress\b"
            # cuda-gdb stopping on the exception the GPU raised, by its scope (a lane, a warp, the device),
            # in its report or as the signal it stops the thread with (``signal CUDA_EXCEPTION_14, …``)
            rf"|{_CUDA_GDB}(?:Lane|Warp|Device) (?:Illegal|Out-of-range) Address\b"
        ),
    ),
    Signature(
        "illegal-instruction",
        "CUDA",
        "a GPU kernel executed an illegal instruction (a kernel built for another GPU, or a bug)",
        re.compile(
            r"illegal instruction was encountered|CUDA_ERROR_ILLEGAL_INSTRUCTION"
            rf"|{_CUDA_GDB}Warp Illegal Instruction\b"
            r"|\b(?:cuda)?ErrorIllegalInstruction\b"
        ),
    ),
    Signature(  # ROCm's runtime (ROCr) on an AMD GPU: a queue's hardware exception, a page fault
        "rocm-hw-exception",
        "ROCm",
        "the GPU raised a hardware exception (ROCm's runtime: a GPU hang, a kernel that never finished, or a "
        "device fault)",
        # and the queue's callback aborting on HSA's status for it (``Callback: Queue 0x… aborting with
        # error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.``)
        re.compile(r"HW Exception by GPU node-\d{1,4}\b|\bHSA_STATUS_ERROR_EXCEPTION\b"),
    ),
    Signature(
        "rocm-memory-fault",
        "ROCm",
        "a GPU kernel accessed memory it does not own (ROCm's memory access fault), usually a bug in a "
        "kernel or an extension",
        # the node as ROCm prints it, or emphasised where a page or an issue kept the line (``**node-2**``);
        # HSA's status for it where a runtime raised it instead
        re.compile(
            # (``Fault`` capitalised where MIGraphX's users and pages retell it)
            r"Memory access [Ff]ault by GPU (?:\*\*|`|_)?node-\d{1,4}\b"
            r"|HSA_STATUS_ERROR_MEMORY_(?:APERTURE_VIOLATION|FAULT)\b"
        ),
    ),
    Signature(
        "misaligned",
        "CUDA",
        "a GPU kernel made a misaligned memory access (a bug in a kernel)",
        re.compile(
            r"misaligned address|CUDA_ERROR_MISALIGNED_ADDRESS|\b(?:cuda)?ErrorMisalignedAddress\b"
            rf"|{_CUDA_GDB}(?:Lane|Warp) Misaligned Address\b"
        ),
    ),
    Signature(
        "launch-failure",
        "CUDA",
        "a GPU kernel crashed (unspecified launch failure)",
        re.compile(
            r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure"
            r"|\bErrorLaunchFailed\b"
        ),
    ),
    # cuBLAS on a routine whose GPU kernel failed to run (cublasStatus_t 13): PyTorch's ``CUDA error:
    # CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( … )` ``, CNTK's ``CUBLAS failure 13:
    # CUBLAS_STATUS_EXECUTION_FAILED ; GPU=1 ; hostname=… ; expr=cublas_gemm(…)``; DeepSpeed's GEMM wrappers
    # printing the status by its number (csrc/transformer/cublas_wrappers.cu and its inference kernels'
    # copy: ``!!!! kernel execution error. (m: 384, n: 384, k: 64, error: 13)``, batched GEMMs alike)
    Signature(
        "cublas-execution",
        "cuBLAS",
        "a cuBLAS routine's GPU kernel failed to run (CUBLAS_STATUS_EXECUTION_FAILED)",
        re.compile(
            r"\bCUBLAS_STATUS_EXECUTION_FAILED\b|\bCUBLAS failure 13\b"
            r"|!!!! kernel execution error\. \([^)\n]{0,120}\berror: 13\)"
        ),
    ),
    # cuDNN on a routine whose GPU kernel failed to run (cudnnStatus_t 8): PyTorch's ``cuDNN error:
    # CUDNN_STATUS_EXECUTION_FAILED``, TensorFlow 1.x's stream executor (cuda_dnn.cc) logging the status alone
    Signature(
        "cudnn-execution",
        "cuDNN",
        "a cuDNN routine's GPU kernel failed to run (CUDNN_STATUS_EXECUTION_FAILED)",
        re.compile(r"\bCUDNN_STATUS_EXECUTION_FAILED\b"),
    ),
    # the rest of CUDA's catalog of a kernel that failed on the device (cudaGetErrorString's texts in the
    # runtime, cuGetErrorName's CUresult names in the driver, and HIP's hipError names after them): the
    # kernel's call stack failing, a jump to an invalid address, a kernel the watchdog ended
    Signature(
        "address-space",
        "CUDA",
        "a GPU kernel used an address in a memory space the operation does not support (a generic address "
        "passed where global or shared memory was expected: a bug in a kernel)",
        re.compile(
            r"operation not supported on global/shared address space|CUDA_ERROR_INVALID_ADDRESS_SPACE\b"
            r"|\bcudaErrorInvalidAddressSpace\b"
        ),
    ),
    Signature(
        "hardware-stack",
        "CUDA",
        "a GPU kernel's call stack failed (hardware stack error: deep recursion or large local arrays "
        "overflowing it, or a kernel that corrupted it)",
        re.compile(
            r"hardware stack error|CUDA_ERROR_HARDWARE_STACK_ERROR|\b(?:cuda|hip)ErrorHardwareStackError\b"
        ),
    ),
    Signature(
        "invalid-pc",
        "CUDA",
        "a GPU kernel jumped to an invalid program counter (a corrupted kernel image or a bug in a kernel)",
        re.compile(r"invalid program counter|CUDA_ERROR_INVALID_PC\b|\b(?:cuda|hip)ErrorInvalidPc\b"),
    ),
    # a kernel launched with a shape the GPU cannot run (cudaErrorInvalidConfiguration, 9: more threads per
    # block, shared memory or grid dimensions than it allows), by its runtime text or its names, as CUDA's
    # checks print it: PyTorch's ``CUDA error: invalid configuration argument``, ggml's CUDA_CHECK on its own
    # line (``CUDA error 9 at ggml-cuda.cu:6863: invalid configuration argument``), HIP's
    # hipErrorInvalidConfiguration
    Signature(
        "invalid-configuration",
        "CUDA",
        "a GPU kernel was launched with a configuration the GPU cannot run (more threads per block, shared "
        "memory or grid blocks than it allows: a shape too large for the kernel, or a bug in its launch)",
        re.compile(r"invalid configuration argument|\b(?:cuda|hip)ErrorInvalidConfiguration\b"),
    ),
    Signature(
        "launch-timeout",
        "CUDA",
        "a GPU kernel ran longer than the driver's watchdog allows and was terminated (a hung or runaway "
        "kernel)",
        re.compile(
            r"the launch timed out and was terminated|CUDA_ERROR_LAUNCH_TIMEOUT\b"
            r"|\b(?:cudaErrorLaunchTimeout|hipErrorLaunchTimeOut)\b"
        ),
    ),
    # the devices the runtime found (or failed to): none visible to the process (cudaErrorNoDevice,
    # hipErrorNoDevice), or all of them held by another process or failed (cudaErrorDevicesUnavailable)
    Signature(
        "no-device",
        "CUDA",
        "the process saw no usable GPU (no CUDA-capable device): the device plugin gave the container none, "
        "CUDA_VISIBLE_DEVICES hides them, or the driver lost the GPU",
        re.compile(
            r"no CUDA-capable device is detected|CUDA_ERROR_NO_DEVICE\b|\bcudaErrorNoDevice\b"
            r"|no ROCm-capable device is detected|\bhipErrorNoDevice\b"
        ),
    ),
    # the other accelerators' runtimes finding none: rocBLAS's Tensile host with no AMD GPU
    # (``rocBLAS error: Could not initialize Tensile host: No devices found``), Habana's SynapseAI acquiring
    # a Gaudi (``synStatus=8 [Device not found] Device acquire failed.``)
    Signature(
        "no-accelerator",
        "ROCm / SynapseAI",
        "the process saw no usable accelerator: the device plugin gave the container none (amd.com/gpu, "
        "habana.ai/gaudi), the visible-devices variable hides them, or the driver lost the device",
        re.compile(
            r"Could not initialize Tensile host: No devices found"
            r"|synStatus=8 \[Device not found\]"
        ),
    ),
    # the program's build against what the node offers: a CUDA runtime newer than the node's driver
    # (cudaErrorInsufficientDriver, PyTorch 1.x's THC ``cuda runtime error (35)``), a binary with no code for
    # the GPU's architecture (cudaErrorNoKernelImageForDevice, HIP's hipErrorNoBinaryForGpu)
    Signature(
        "driver-too-old",
        "CUDA",
        "the CUDA runtime the program was built with needs a newer driver than the node's "
        "(cudaErrorInsufficientDriver)",
        re.compile(
            r"CUDA driver version is insufficient for CUDA runtime version|\bcudaErrorInsufficientDriver\b"
        ),
    ),
    Signature(
        "no-kernel-image",
        "CUDA / HIP",
        "the program's GPU code was not built for this GPU's architecture (no kernel image for the device)",
        re.compile(
            r"no kernel image is available for execution on the device|\bcudaErrorNoKernelImageForDevice\b"
            r"|\bhipErrorNoBinaryForGpu\b"
        ),
    ),
    Signature(
        "devices-unavailable",
        "CUDA",
        "the GPU was busy or unavailable: another process holds it in exclusive-process compute mode, or the "
        "driver has it in a failed state",
        re.compile(
            r"CUDA-capable device\(s\) is/are busy or unavailable|CUDA_ERROR_DEVICE_UNAVAILABLE\b"
            r"|\bcudaErrorDevicesUnavailable\b"
        ),
    ),
    Signature(
        "cuda-unknown",
        "CUDA",
        "the CUDA driver returned an unknown error (cudaErrorUnknown), as a rule a fault of the GPU or its "
        "driver rather than of the program",
        re.compile(
            r"\bCUDA error: unknown error\b|\bCUDA_ERROR_UNKNOWN\b|\bcudaErrorUnknown\b"
            # PyTorch 1.x's THC check on it (``cuda runtime error (30) : unknown error at …``)
            r"|\bcuda runtime error \(30\) : unknown error\b"
            # NCCL's CUDACHECK on it (src/include/checks.h: ``Cuda failure %d '%s'``, the code before 2.12
            # not printed), in its WARN line or in the ``Last error:`` torch relays under
            # ncclUnhandledCudaError
            r"|\bCuda failure (?:999 )?'unknown error'"
        ),
    ),
    # Intel's compute runtime (NEO, under Level Zero and OpenCL:
    # shared/source/os_interface/linux/drm_neo.cpp) reading the i915 / xe driver's fault info of a context
    # the driver banned: ``Segmentation fault from GPU at 0x…, ctx_id: 1 (CCS) type: 0 (NotPresent), level: 0
    # (PTE), access: 0 (Read), banned: 1, aborting.``
    Signature(
        "intel-gpu-page-fault",
        "Intel's compute runtime (Level Zero)",
        "the GPU faulted on an address its context had not mapped and the driver banned the context: usually "
        "a bug in a kernel or an extension (a wrong index or a freed buffer)",
        re.compile(r"\bSegmentation fault from GPU at 0x[0-9a-fA-F]{1,16}, ctx_id: \d{1,10}\b"),
    ),
    # the amdgpu kernel driver on a GPU's memory hub taking a page fault for a process (``amdgpu
    # 0000:03:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:3 pasid:32769, …``, ``[mmhub]
    # no-retry page fault``): a kernel touched an address its process never mapped on the GPU
    Signature(
        "amdgpu-page-fault",
        "the amdgpu driver",
        "the amdgpu driver reported a GPU page fault: a kernel accessed GPU memory its process had not "
        "mapped, usually a bug in a kernel or an extension (a wrong index or a freed buffer)",
        re.compile(
            r"\[(?:gfxhub|mmhub)\d?\] (?:retry |no-retry )?page fault \(src_id:\d"
            # the same fault's status register, where the log kept the lines under the first (``amdgpu:
            # GCVM_L2_PROTECTION_FAULT_STATUS:0x00801031`` on gfx10 and later, ``VM_L2_…`` before,
            # ``MMVM_L2_…`` for the memory hub)
            r"|\bamdgpu: (?:GC|MM)?VM_L2_PROTECTION_FAULT_STATUS:0x[0-9a-fA-F]{1,8}"
        ),
    ),
    # the amdgpu driver's scheduler giving up on a job of a ring (``[drm:amdgpu_job_timedout [amdgpu]] *ERROR*
    # ring sdma0 timeout, signaled seq=…, emitted seq=…``) before it resets the GPU; not a timeout it
    # recovered from in place (``ring comp_1.0.0 timeout, but soft recovered``)
    Signature(
        "amdgpu-ring-timeout",
        "the amdgpu driver",
        "the amdgpu driver found a job on a GPU ring that never finished (a hung GPU) and reset the GPU",
        re.compile(r"\bring [\w.]{1,30} timeout, signaled seq=\d"),
    ),
    # Intel's GPU stack (Level Zero, and SYCL's Unified Runtime over it) reporting the device lost, as IPEX
    # and torch.xpu raise it (``Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)``,
    # ``ZE_RESULT_ERROR_DEVICE_LOST``)
    Signature(
        "xpu-device-lost",
        "Intel's Level Zero",
        "the Intel GPU was lost (Level Zero's DEVICE_LOST: the GPU hung or was reset under the job, by the "
        "driver's hang check or a hardware fault)",
        re.compile(r"\b(?:UR_RESULT|ZE_RESULT|PI)_ERROR_DEVICE_LOST\b"),
    ),
    # CANN's runtime on an Ascend NPU's core that faulted running a kernel (``The error from device(2), serial
    # number is 17, there is an aicore error, core id is 5, error code = …``; its vector core's ``aivec``)
    Signature(
        "ascend-core-error",
        "CANN",
        "an Ascend NPU's AI core faulted running a kernel (CANN's aicore / aivec error: an illegal "
        "instruction or address in an operator, usually a bug in the operator or a build for another chip)",
        re.compile(
            r"The error from device\((?:chipId:)?\d{1,4}(?:, dieId:\d{1,4})?\), serial number is \d{1,10}, "
            r"there is an? (?:aicore|aivec|aic|aiv) error\b"
        ),
    ),
    # ROCm's runtime (ROCclr's rocdevice.cpp) on a hardware queue the GPU aborted, with HSA's status for why
    # (``Callback: Queue 0x7f… aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted
    # in a hardware exception. code: 0x1016``; newer releases ``Aborting``,
    # ``HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION``);
    # named by its status, not the queue's own resources running out (``HSA_STATUS_ERROR_OUT_OF_RESOURCES``)
    Signature(
        "rocm-queue-abort",
        "ROCm",
        "the AMD GPU aborted a kernel's hardware queue (ROCm's runtime: a hardware exception, an illegal "
        "instruction or a trap in a kernel, usually a bug in a kernel or a build for another gfx target)",
        re.compile(
            r"Callback: Queue 0x[0-9a-fA-F]{1,16} [Aa]borting with error : "
            r"HSA_STATUS_ERROR_(?:EXCEPTION|ILLEGAL_INSTRUCTION)\b"
        ),
    ),
    # a TPU core that stopped mid-program, as TensorFlow's TPU runtime, PJRT under torch_xla and JAX raise it
    # (``Core halted unexpectedly: INTERNAL: Accelerator device halted prematurely, perhaps due to an
    # on-device check-failure``, ``Core halted unexpectedly: No error message available …``, libtpu's
    # ``RuntimeUnexpectedCoreHalt``)
    Signature(
        "tpu-core-halted",
        "the TPU runtime",
        "a TPU core halted in the middle of the program (the TPU runtime: an on-device check failed, or the "
        "chip faulted)",
        re.compile(
            r"\bCore halted unexpectedly:|Accelerator device halted prematurely\b"
            r"|\bRuntimeUnexpectedCoreHalt\b"
        ),
    ),
    # the driver's status for a GPU it can no longer use until it is reset, as its asserts and its GSP
    # firmware's RPCs print it (``NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required
    # [NV_ERR_RESET_REQUIRED] (0x00000062) returned from …``)
    Signature(
        "reset-required",
        "the NVIDIA driver",
        "the NVIDIA driver says the GPU must be reset before it can be used again (NV_ERR_RESET_REQUIRED)",
        re.compile(r"NVRM: [^\n]{0,300}?\bNV_ERR_RESET_REQUIRED\b"),
    ),
)


def gpu_error_words(hit: Hit) -> tuple[str, bool]:
    """What a GPU error means in plain words, and whether it points at the hardware."""
    if hit.name != "xid":
        hardware = hit.name in ("off-bus", "gpu-lost", "ecc", "nvlink", "reset-required", "xpu-device-lost")
        return hit.signature.what, hardware
    xid = int(hit.group("xid") or 0)
    previous = hit.group("previous")
    if previous is not None:
        xid = int(previous)  # Xid 45 "caused by previous Xid 149": the earlier one is the cause
    entry = xid_entry(xid)  # the Xid catalogue (controller.contract.xids)
    return f"Xid {xid}: {entry.meaning}", entry.hardware


# A line that warns what *could* happen or says how to avoid it reports nothing that happened.
@lru_cache(maxsize=512)
def gpu_errors(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """Errors of the GPU or of a kernel on it (not running out of GPU memory, not hints)."""
    oom = {hit.line for hit in gpu_oom_lines(tail)}
    lines = bounded(tail)
    return tuple(
        hit
        for hit in _scan(tail, GPU_ERRORS)
        if hit.line not in oom
        and not is_hint(hit.line)
        and not handled(lines, hit.index)
        and not (hit.name == "xid" and _NONFATAL.search(hit.line))
        and not (hit.name in _DEVICE_FOUND and _WARNED.search(hit.line))
    )


_DEVICE_FOUND = frozenset(
    {"no-device", "no-accelerator", "devices-unavailable", "cuda-unknown", "driver-too-old"}
)
_WARNED = re.compile(r"\bUserWarning\b|CUDA initialization: ")
"""A framework's warning on the devices it found (torch's ``UserWarning: CUDA initialization: … Error 100: no
CUDA-capable device is detected``): the program goes on without the GPU, so it is no failure of one."""


_NONFATAL = re.compile(r"\bNon-?fatal\b", re.IGNORECASE)
"""The driver's own severity on an Xid line (the NVLink Xids 144 to 150 print it: ``…: 145, RLW_REMAP
Nonfatal …``): an error it corrected and went on from is evidence for the GPU's health, not a failure
of the run."""


# -------------------------------------------------------------------- disks

SHM_DATALOADER = Signature(
    "shm-dataloader",
    "PyTorch DataLoader",
    "/dev/shm is full: DataLoader workers hand batches over through shared memory",
    re.compile(
        r"unable to write to file </torch_\w{1,100}>"
        r"|bus error encountered in worker\. This might be caused by insufficient shared memory"
        # the DataLoader's handler of its worker's death (torch/csrc/DataLoader.cpp, SIGBUS)
        r"|is killed by signal: Bus error\. It is possible that dataloader's workers are out of shared memory"
    ),
)
DISKS: tuple[Signature, ...] = (
    SHM_DATALOADER,
    Signature(
        "enospc",
        "",
        "no space left on device",
        re.compile(r"[Nn]o space left on device|\[Errno 28\]|ENOSPC|StorageFull"),  # Go: lower case
    ),
    # Windows' ERROR_DISK_FULL (112) and ERROR_HANDLE_DISK_FULL (39) as its system message gives them: Rust's
    # io::Error (``There is not enough space on the disk. (os error 112)``), Python's ``[WinError 112]``,
    # .NET's IOException (``There is not enough space on the disk. : 'C:\…'``)
    Signature(
        "windows-disk-full",
        "Windows",
        "the Windows disk the program wrote to was full (ERROR_DISK_FULL)",
        re.compile(
            r"There is not enough space on the disk\b|\bERROR_(?:HANDLE_)?DISK_FULL\b"
            r"|\[WinError (?:112|39)\]|\bThe disk is full\.? ?\(os error 39\)"
        ),
    ),
    # NCI Gadi's PBS killing a job over the node-local disk it requested (its jobfs: ``Job 143560526.gadi-pbs
    # killed due to exceeding jobfs quota. Quota: 15.0GB, Used: 15.0GB, Host: gadi-cpu-spr-0578``)
    Signature(
        "pbs-jobfs",
        "PBS (NCI Gadi's jobfs)",
        "the batch scheduler killed the job for writing more to its node-local disk (jobfs) than it "
        "requested",
        re.compile(r"\bkilled due to exceeding jobfs quota\. Quota: \d"),
    ),
    # Azure ML's error code for the job's node running out of disk (``DiskFullError: Disk full while running
    # job. Please consider reducing amount of data accessed, or upgrading VM SKU with higher memory.``)
    Signature(
        "azureml-disk",
        "Azure ML",
        "Azure ML's compute node ran out of disk while running the job (DiskFullError)",
        re.compile(r"DiskFullError: Disk full while running job\b"),
    ),
    # the kubelet's eviction for the node's disk, relayed into a log by the client that ran the pod (a CI
    # runner's ``pod … is disrupted: reason "TerminationByKubelet", message "The node was low on
    # resource: ephemeral-storage. Threshold quantity: …``, an event listing's ``Evicted … kubelet The node
    # was low on resource: ephemeral-storage. Container runner was using …``)
    Signature(
        "evicted-storage",
        "the kubelet",
        "the kubelet evicted the pod: the node was low on ephemeral storage (its disk)",
        re.compile(
            r"The node was low on resource: (?:ephemeral-storage|inodes)\. "
            r"(?:Threshold quantity|Container [\w.-]{1,253} was using)"
            # or the message alone where it ends, as a pod's status message or an event's line shows it
            # (``"message": "The node was low on resource: ephemeral-storage. "``, ``[Warning] The node was
            # low on resource: inodes.``)
            r"|The node was low on resource: (?:ephemeral-storage|inodes)\.\s{0,4}(?:[\"'`,]|$)"
        ),
    ),
    # the kubelet's eviction of a pod over its own ephemeral-storage limits (pkg/kubelet/eviction/helpers.go's
    # podEphemeralStorageMessageFmt, containerEphemeralStorageMessageFmt, emptyDirMessageFmt), relayed into
    # a log as a client or a pod's status message shows it
    Signature(
        "evicted-storage-limit",
        "the kubelet",
        "the kubelet evicted the pod: it wrote more to its ephemeral storage than its limit allows",
        re.compile(
            r"Pod ephemeral local storage usage exceeds the total limit of containers \d"
            r"|Container [\w.-]{1,253} exceeded its local ephemeral storage limit \\?\"?\d"
            r"|Usage of EmptyDir volume \\?\"?[\w.-]{1,253}\\?\"? exceeds the limit \\?\"?\d"
        ),
    ),
    # the kubelet's eviction manager and its admission naming the node's DiskPressure, relayed into a log
    # (a ``kubectl describe`` or ``get events`` pasted, a CI runner's status): ``The node had condition:
    # [DiskPressure].`` (a pod refused or evicted from a node under it), older kubelets' ``The node was low
    # on resource: [DiskPressure].``, the condition among others in its list
    Signature(
        "disk-pressure",
        "the kubelet",
        "the kubelet evicted or refused the pod: its node had DiskPressure (its disk nearly full)",
        re.compile(r"The node (?:had condition|was low on resource): \[(?:\w{1,30}, ?){0,3}DiskPressure\b"),
    ),
    # the kubelet's image garbage collector unable to bring the node's disk under its high threshold, in
    # its event (``FreeDiskSpaceFailed`` / ``ImageGCFailed``) or its own log line, in the wording of each
    # version (``Attempted to free N bytes, but only found M bytes eligible to free``, before 1.28 ``Wanted
    # to free N bytes, but freed M bytes``); not its first attempt before the stats are ready (``Image
    # garbage collection failed once. Stats initialization may not have completed yet``)
    Signature(
        "image-gc",
        "the kubelet",
        "the kubelet could not free its node's disk: image garbage collection found too few unused images "
        "to delete, so the disk stays over its threshold",
        re.compile(
            r"[Ff]ailed to garbage collect required amount of images\. (?:Attempted|Wanted) to free "
            r"\d{1,20} bytes, but (?:only found|freed) \d{1,20} bytes"
        ),
    ),
    # strerror(EDQUOT) in each C library's and runtime's words: glibc's ``Disk quota exceeded``, Go's syscall
    # table in lower case, Rust's io::ErrorKind name, musl's ``Quota exceeded`` after the file it names
    Signature(
        "edquot",
        "",
        "disk quota exceeded",
        re.compile(
            r"[Dd]isk quota exceeded|\[Errno 122\]|EDQUOT|\bFilesystemQuotaExceeded\b"
            r"|/[^\s:]{1,300}'?: Quota exceeded\s{0,4}$"
        ),
    ),
    # Ray's object store spilling to a disk its raylet reports full: the raylet's file-system monitor
    # (``file_system_monitor.cc:105: /tmp/ray/session_… is over 95% full, available space: …``), a failure
    # only where a spill then broke (:data:`_RAY_SPILLING` after it), and Ray's own error for an object it
    # could not create or spill (``ray.exceptions.OutOfDiskError: Local disk is full``)
    Signature(
        "ray-spill",
        "Ray",
        "Ray's object store could not spill to its node's disk: the raylet found it full",
        re.compile(
            r"file_system_monitor\.cc:\d{1,6}:\s{0,4}\S{1,300} is over \d{1,3}% full"
            r"|OutOfDiskError\b[^\n]{0,40}?Local disk is full"
        ),
    ),
    # SQLite's SQLITE_FULL (13) in its own words (sqlite3ErrStr: ``database or disk is full``), as each
    # binding raises it: Python's ``sqlite3.OperationalError``, SQLAlchemy's wrapper of it, Go's and Node's
    # drivers; a database file (an experiment tracker's, a job queue's) that could not grow on a full disk or
    # past its max_page_count
    Signature(
        "sqlite-full",
        "SQLite",
        "a SQLite database could not grow: its disk is full (SQLITE_FULL, database or disk is full)",
        re.compile(r"\bdatabase or disk is full\b"),
    ),
    # Hugging Face Spaces' runtime status on a Space evicted for writing past its hardware's disk (``Space
    # evicted, storage limit exceeded (50G)``, after ``Runtime error`` on the Space's page)
    Signature(
        "hf-space-storage",
        "Hugging Face Spaces",
        "the Space was evicted: it wrote more to its disk than its hardware's storage allows",
        re.compile(r"\bSpace evicted, storage limit exceeded \(\d{1,6}(?:\.\d{1,3})? ?(?:[KMGT]i?B?)\)"),
    ),
    Signature(
        "torch-write",
        "PyTorch",
        "a checkpoint file could not be written (file write failed)",
        re.compile(r"PytorchStreamWriter failed writing file"),
    ),
    Signature(  # its file systems return ENOSPC / EDQUOT as RESOURCE_EXHAUSTED, naming the file
        "tf-write",
        "TensorFlow",
        "a file could not be written: TensorFlow's file system said Resource exhausted "
        "(no space or quota left)",
        re.compile(
            r"(?:Resource exhausted|ResourceExhaustedError|RESOURCE_EXHAUSTED): "
            r"(?:[A-Za-z]:|[a-z][a-z0-9+]{1,10}:/)?[\w.~-]{0,120}[/\\][^\s;]{1,300}"
        ),
    ),
)
_NOT_DISK = re.compile(r"NCCL WARN|shared memory segment|/dev/shm/nccl")
# ENOSPC also means "no inotify watch left" (the watch limit, not the disk) …
_WATCH_LIMIT = re.compile(
    r"[Ff]ile watchers|inotify|\bwatch\b[^\n]{0,40}ENOSPC|ENOSPC[^\n]{0,80}(?:\bwatch\b|syscall: 'watch')"
)
# … or "no entry left in a kernel table": System V IPC's shmget / semget / msgget past SHMMNI, SHMALL,
# SEMMNI, SEMMNS or MSGMNI (GDK's ``shmget failed: error 28 (No space left on device)``, PostgreSQL's ``could
# not create semaphores: No space left on device``), epoll_ctl past max_user_watches, mq_open past
# queues_max: a limit of the kernel's, no disk's …
_KERNEL_TABLE = re.compile(r"\b(?:shmget|semget|msgget|epoll_ctl|mq_open)\b|\bcould not create semaphores\b")
# … and a write error the program says it handled (retried, ignored, fell back) did not end it
# (:func:`~consumers.rules.tails.handled`).
_WRITING_CHECKPOINT = re.compile(
    r"torch/serialization\.py|torch\.save|safetensors|PytorchStreamWriter|save_checkpoint|save_pretrained"
    r"|[Cc]heckpoint file|\.ckpt\b|training/saver\.py|\.tempstate\d"
)
_QUOTED_PATH = re.compile(r"No space left on device: '(?P<path>[^']{1,300})'")


@lru_cache(maxsize=512)
def disk_full(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """A write failed for lack of space (NCCL's own ``/dev/shm`` segments excepted)."""
    lines = bounded(tail)
    return tuple(
        hit
        for hit in _scan(tail, DISKS)
        if not _NOT_DISK.search(hit.line)
        and not _WATCH_LIMIT.search(hit.line)
        and not _KERNEL_TABLE.search(hit.line)
        and not _mention(hit)
        and not _quoted_eviction(hit)
        and not handled(lines, hit.index)
        and not (_RAY_FULL.search(hit.line) and not any(map(_RAY_SPILLING.search, lines[hit.index + 1 :])))
    )


_RAY_FULL = re.compile(r"file_system_monitor\.cc:\d")
_RAY_SPILLING = re.compile(r"\bspill_objects(?:_handler)?\b|external_storage\.py\b")
"""A traceback through Ray's spilling (``ray._raylet.spill_objects_handler``, ``external_storage.py``):
the raylet's warning that its disk is full, followed by it, is the spill that failed; alone it is a
warning the run may outlive."""


def _mention(hit: Hit) -> bool:
    match = hit.signature.pattern.search(hit.line)
    return match is not None and is_mention(hit.line, match.start(), match.end())


_QUOTED_IN_PROSE = re.compile(r"\b[A-Za-z]{1,30},? [A-Za-z]{1,30},? [A-Za-z]{1,30} [\"'\u201c`]$")
"""Three words of a sentence, then the quote that opens where the words found start (bounded: linear to
search)."""


def quoted_in_prose(text: str, start: int) -> bool:
    """Whether the words found at ``text[start]`` open a quote at the end of a sentence's words on their line
    (``A healthy pod got evicted with the reason "The node was low on resource: …``): a person's account or
    a page quoting the kubelet, not its message as a listing's column, a field's ``Message:`` or a relayed
    status's ``…", message "…`` shows it."""
    return _QUOTED_IN_PROSE.search(text[text.rfind("\n", 0, start) + 1 : start]) is not None


def _quoted_eviction(hit: Hit) -> bool:
    match = hit.signature.pattern.search(hit.line) if hit.name == "evicted-storage" else None
    return match is not None and quoted_in_prose(hit.line, match.start())


def is_dataloader_shm(hit: Hit) -> bool:
    """The full device is ``/dev/shm``, filled by DataLoader workers."""
    return hit.signature is SHM_DATALOADER


@lru_cache(maxsize=512)
def disk_write(tail: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(what was being written, the path) when the tail tells: ``a checkpoint``, ``/ckpt/x.pt``."""
    lines = bounded(tail)
    what = "a checkpoint" if any(_WRITING_CHECKPOINT.search(line) for line in lines) else None
    path = next((m.group("path") for line in lines if (m := _QUOTED_PATH.search(line))), None)
    return what, path


# -------------------------------------------------------------- kernel OOM

KERNEL_OOM: tuple[Signature, ...] = (
    Signature(
        "cgroup",
        "the kernel (cgroup)",
        "the container's memory cgroup ran out and the kernel killed a process",
        re.compile(
            r"Memory cgroup out of memory: Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<victim>[^)]{1,64})\)"
        ),
    ),
    Signature(
        "node",
        "the kernel",
        "the node ran out of memory and the kernel killed a process",
        re.compile(r"Out of memory: Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<victim>[^)]{1,64})\)"),
    ),
    Signature(
        "system",
        "the kubelet",
        "the node ran out of memory and the kernel killed a process",
        re.compile(
            r"(?:System|Cgroup) OOM encountered"
            r"(?:, victim process: (?P<victim>[^,]{1,64}), pid: (?P<pid>\d{1,10}))?"
        ),
    ),
    Signature(  # mm/memcontrol.c before 4.19: "Task in <cgroup> killed as a result of limit of <cgroup>"
        "memcg-limit",
        "the kernel (cgroup)",
        "the container's memory cgroup reached its limit and the kernel killed a process",
        re.compile(r"Task in (?P<cgroup>/\S{0,400}) killed as a result of limit of /"),
    ),
    # the kernel's memcg OOM report (mm/memcontrol.c, mem_cgroup_print_oom_meminfo: ``memory: usage %llukB,
    # limit %llukB, failcnt %lu``), printed only when the OOM killer runs for a cgroup: its usage equal to its
    # own limit is that cgroup's OOM, whatever lines of the report the tail kept (a usage under the limit is a
    # parent's, told elsewhere)
    Signature(
        "memcg-usage-at-limit",
        "the kernel (cgroup)",
        "the container's memory cgroup reached its limit (the kernel's OOM report shows its usage at the "
        "limit)",
        re.compile(
            r"(?:^|[\s:\]])memory: usage (?P<usage>\d{1,20})kB, limit (?P<limit>\d{1,20})kB, failcnt \d"
        ),
    ),
    Signature(
        "reaper",
        "the kernel",
        "the kernel's OOM killer killed a process",
        re.compile(r"oom_reaper: reaped process (?P<pid>\d{1,10}) \((?P<victim>[^)]{1,64})\)"),
    ),
    Signature(
        "invoked",
        "the kernel",
        "the kernel's OOM killer ran",
        re.compile(r"invoked oom-killer|oom-kill:constraint="),
    ),
    # the OOM killer's own frames in a call trace the kernel printed apart from its headline (a VM
    # guest's log relayed line by line): ``mem_cgroup_out_of_memory+0xa4/0xc0``, ``oom_kill_process+0x…``
    Signature(
        "trace",
        "the kernel",
        "the kernel's OOM killer ran (its frames in a call trace)",
        re.compile(r"\b(?:mem_cgroup_out_of_memory|oom_kill_process)\+0x[0-9a-f]{1,8}/0x[0-9a-f]{1,8}"),
    ),
    # Ray's memory monitor: the raylet kills workers before the kernel does, and says so in the raylet's
    # log (``Workers (tasks / actors) killed due to memory pressure (OOM)``) and in the task's error
    # (``Task was killed due to the node running low on memory.``)
    Signature(
        "ray",
        "Ray's memory monitor",
        "the node's memory ran short and Ray's memory monitor killed workers",
        re.compile(
            r"Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"
            r"|(?:Task|Actor|Worker) was killed due to the node running low on memory"
            # the advice the raylet prints with each kill, which a log may keep alone (its ``(raylet)``
            # tag, a driver's copy): the documentation on the OOM it names, the kill threshold to adjust
            r"|Refer to the documentation on how to address the out of memory issue\b"
            r"|To adjust the kill threshold, set the environment variable `?RAY_memory_usage_threshold\b"
            # the raylet's own line on the kill, in each release's words: Ray 2.0's ``System memory low at
            # node with IP …, exceeds threshold 0.95, killing latest task with name …``, later ones' ``Memory
            # on the node (IP: …) where the task … was running was 29.97GB / 30.89GB (0.970247), which exceeds
            # the memory usage threshold of 0.95. Ray killed this worker``
            r"|exceeds threshold 0?\.\d{1,6}, killing (?:the )?(?:latest|newest|most recent) "
            r"(?:task|worker)\b"
            r"|exceeds the memory usage threshold of 0?\.\d{1,6}\. Ray killed this worker\b"
        ),
    ),
    Signature(
        "slurm",
        "Slurm",
        "the job step's memory cgroup ran out and the OOM killer killed a process",
        # also the state Slurm gives a job or a step whose cgroup counted an OOM kill, in a row of sacct's
        # listing, its State column of any width (``OUT_OF_MEMORY``, cut to ``OUT_OF_ME+`` at its default 10,
        # ``OUT_OF_+`` at 8) before the ExitCode column (``0:125``), or where scontrol and seff show the
        # job (``JobState=OUT_OF_MEMORY Reason=…`` opening its line, ``State: OUT_OF_MEMORY (exit code 0)``);
        # not the state named in a page or a sentence
        re.compile(
            r"Detected \d{1,7} oom[-_]kill event|task \d{1,7}: Out Of Memory"
            r"|\sOUT_OF_(?:MEMORY|(?:M|ME|MEM|MEMO|MEMOR)?\+)\s{1,20}-?\d{1,3}:\d{1,3}\b"
            r"|^\s{0,8}JobState=OUT_OF_MEMORY Reason=|^\s{0,8}State: OUT_OF_MEMORY \(exit code \d"
        ),
    ),
    # the kubelet's eviction for the node's memory relayed into a log (a pod's status message read with
    # kubectl or oc, a CI runner's report): its threshold or the container it found over its request
    Signature(
        "evicted-memory",
        "the kubelet",
        "the kubelet evicted the pod: the node was low on memory",
        re.compile(
            r"The node was low on resource: memory\. "
            r"(?:Threshold quantity: \w|Container [\w.-]{1,253} was using \w)"
        ),
    ),
    # a process refused memory by the kernel (ENOMEM), as Python raises it (``OSError: [Errno 12] Cannot
    # allocate memory`` from fork() or mmap()) and the Intel Fortran runtime ends a program for it
    # (``forrtl: severe (41): insufficient virtual memory``): the node's or the job's memory was spent
    Signature(
        "enomem",
        "the kernel",
        "the kernel refused the process memory (ENOMEM): the node's or the job's memory was used up",
        re.compile(
            r"(?:OSError|MemoryError|BlockingIOError): \[Errno 12\] Cannot allocate memory"
            r"|forrtl: severe \(41\): insufficient virtual memory"
        ),
    ),
    # the Go runtime unable to get memory from the OS for its heap (``fatal error: runtime: out of memory``,
    # src/runtime/malloc.go's throw; ``runtime: out of memory: cannot allocate N-byte block (M in use)``
    # before it): the container's memory limit or the node's memory was reached
    Signature(
        "go-runtime",
        "the Go runtime",
        "the Go runtime could not get memory for its heap (runtime: out of memory): the container's or the "
        "node's memory was used up",
        re.compile(
            r"^fatal error: runtime: out of memory\s{0,4}$|runtime: out of memory: cannot allocate \d"
        ),
    ),
    # c10's CPU allocator refused its memory (``DefaultCPUAllocator: can't allocate memory: you tried to
    # allocate
    # N bytes. Error code 12 (Cannot allocate memory)`` from posix_memalign on Linux; ``not enough memory`` on
    # Windows): a tensor on the host did not fit the container's or the node's memory
    Signature(
        "cpu-allocator",
        "PyTorch (c10's DefaultCPUAllocator)",
        "PyTorch could not allocate a tensor in host memory (DefaultCPUAllocator): the container's or the "
        "node's memory was used up",
        re.compile(
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate \d"
        ),
    ),
    # Dask's nanny restarting the worker it watches once the worker's memory passed the share of its
    # memory_limit it may use (distributed.worker.memory.terminate, 95% by default): ``Worker exceeded 95%
    # memory budget. Restarting``, newer releases ``Worker tcp://10.0.0.5:40123 (pid=4120) exceeded 95%
    # memory budget. Restarting...``
    Signature(
        "dask-nanny",
        "Dask's nanny",
        "the Dask worker went over its memory budget and its nanny restarted it",
        re.compile(r"\bexceeded \d{1,3}% memory budget\. Restarting"),
    ),
    # containerd's CRI plugin on the kernel's OOM kill in a container's cgroup, the event it publishes before
    # the kubelet reads it (``TaskOOM event container_id:"…"``, older releases ``TaskOOM event
    # &TaskOOM{ContainerID:…,}``)
    Signature(
        "containerd-oom",
        "containerd",
        "the container's memory cgroup ran out and the kernel killed a process (containerd's TaskOOM event)",
        re.compile(r"\bTaskOOM event (?:container_id:|&TaskOOM\{ContainerID:)"),
    ),
    # a runtime refusing the program memory of its own: the JVM's heap at its -Xmx
    # (``java.lang.OutOfMemoryError: Java heap space``, ``GC overhead limit exceeded``: a Spark executor's, a
    # Hadoop task's), and the C++ runtime ending a program whose allocation threw (``terminate called after
    # throwing an instance of 'std::bad_alloc'``)
    Signature(
        "jvm-heap",
        "the JVM",
        "the JVM's heap was used up (java.lang.OutOfMemoryError)",
        re.compile(r"\bjava\.lang\.OutOfMemoryError: (?:Java heap space|GC overhead limit exceeded)\b"),
    ),
    # the JVM's limits off its heap (hotspot's metaspace.cpp / java.nio.Bits: ``java.lang.OutOfMemoryError:
    # Metaspace``, ``Compressed class space``, ``Direct buffer memory``): -XX:MaxMetaspaceSize,
    # -XX:MaxDirectMemorySize, not -Xmx
    Signature(
        "jvm-offheap",
        "the JVM (off its heap)",
        "the JVM used up the memory it keeps off its heap (its Metaspace or direct buffers: "
        "java.lang.OutOfMemoryError)",
        re.compile(
            r"\bjava\.lang\.OutOfMemoryError: (?:Metaspace|Compressed class space|Direct buffer memory)\b"
        ),
    ),
    # the JVM unable to get native memory of the OS for itself (hotspot's os_linux.cpp / vmError.cpp head of
    # hs_err: ``# There is insufficient memory for the Java Runtime Environment to continue.``, then
    # ``# Native memory allocation (mmap) failed to map N bytes …``): the container's memory, not the heap
    Signature(
        "jvm-native",
        "the JVM (native memory)",
        "the JVM could not get native memory of the OS for itself (hs_err's 'insufficient memory for the "
        "Java Runtime Environment')",
        re.compile(r"There is insufficient memory for the Java Runtime Environment to continue\b"),
    ),
    # Julia's allocator refusing an array (src/gc.c's jl_throw(jl_memory_exception): ``ERROR:
    # OutOfMemoryError()``, ``LoadError: OutOfMemoryError()`` when a script loads), R's (src/main/memory.c:
    # ``Error: cannot allocate vector of size 12.5 Gb``), Node's V8 heap at its limit (src/api/api.cc's
    # FatalProcessOutOfMemory through node's OOMErrorHandler: ``FATAL ERROR: Reached heap limit Allocation
    # failed - JavaScript heap out of memory``, older ``CALL_AND_RETRY_LAST Allocation failed``), .NET's
    # (``System.OutOfMemoryException`` unhandled), NumPy's (numpy/core/_exceptions.py: ``_ArrayMemoryError:
    # Unable to allocate 4.00 TiB for an array with shape …``) and the GNU Fortran runtime's ALLOCATE
    # (libgfortran/runtime/memory.c: ``Allocation would exceed memory limit``)
    Signature(
        "julia-oom",
        "Julia",
        "Julia could not allocate memory for an array (OutOfMemoryError)",
        re.compile(r"^\s{0,8}(?:ERROR: )?(?:LoadError: )?OutOfMemoryError\(\)\s{0,4}$"),
    ),
    Signature(
        "r-alloc",
        "R",
        "R could not allocate a vector (cannot allocate vector of size …)",
        re.compile(r"^\s{0,8}(?:Error(?: in [^\n]{1,200})?: |Error: )?cannot allocate vector of size \d"),
    ),
    Signature(
        "v8-heap",
        "Node.js (V8's heap)",
        "Node's V8 heap reached its limit (JavaScript heap out of memory)",
        re.compile(r"FATAL ERROR: [\w ]{1,60}Allocation failed - JavaScript heap out of memory"),
    ),
    Signature(
        "dotnet-oom",
        ".NET",
        "the .NET runtime could not allocate memory (System.OutOfMemoryException unhandled)",
        re.compile(r"(?:Unhandled [Ee]xception\.|Fatal error\.) System\.OutOfMemoryException\b"),
    ),
    Signature(
        "numpy-alloc",
        "NumPy",
        "NumPy could not allocate an array (Unable to allocate …)",
        re.compile(r"\b_ArrayMemoryError: Unable to allocate \d"),
    ),
    Signature(
        "gfortran-alloc",
        "the GNU Fortran runtime",
        "an ALLOCATE of the Fortran program could not get its memory (libgfortran: Allocation would exceed "
        "memory limit)",
        re.compile(r"^\s{0,8}Allocation would exceed memory limit\s{0,4}$"),
    ),
    Signature(
        "bad-alloc",
        "the C++ runtime",
        "the program could not allocate memory and the C++ runtime ended it (std::bad_alloc)",
        re.compile(r"\bterminate called after throwing an instance of 'std::bad_alloc'"),
    ),
    # Flux's job shell's oom plugin on the job's memory cgroup (``flux-shell[0]: ERROR: oom: Memory cgroup out
    # of memory: killed 3 tasks on node12.``, then its ``memory.peak`` / ``memory.max``)
    Signature(
        "flux-oom",
        "Flux (its job shell's oom plugin)",
        "the job's memory cgroup ran out and the kernel killed a task (Flux's job shell reported it)",
        re.compile(
            r"\b(?P<flux>flux-shell)\[\d{1,6}\]: (?:ERROR|FATAL): oom: Memory cgroup out of memory: "
            r"killed \d{1,6} tasks?\b"
        ),
    ),
    # mm/oom_kill.c's line on the victim, where its ``Out of memory:`` prefix is not on the line (a
    # kernel that prints it apart, a log that kept only this line): only the OOM killer reports a kill
    # with the victim's ``total-vm:`` (``Killed process 1312 (java) total-vm:…``, ``Killed process
    # 799153 (node), UID 1000, total-vm:…``, RHEL 6's ``Killed process 11726, UID 498, (mysqld)
    # total-vm:…``)
    Signature(
        "killed",
        "the kernel",
        "the kernel's OOM killer killed a process",
        re.compile(
            r"Killed process (?P<pid>\d{1,10}),? (?:UID \d{1,10}, )?\((?P<victim>[^)]{1,64})\),? "
            r"(?:UID \d{1,10}, )?total-vm:"
        ),
    ),
    # Talos's userspace OOM controller (machined's runtime.OOMController): under memory pressure it
    # picks a cgroup and kills it whole
    Signature(
        "talos",
        "Talos's OOM controller",
        "the node's memory ran short and Talos's OOM controller killed a pod's cgroup",
        re.compile(
            r"\[talos\] (?:OOM controller triggered"
            r"|Sending SIGKILL to cgroup\b[^\n]{0,200}?OOMController)"
        ),
    ),
    # Cray ALPS's apsys / aprun on a node's OOM kill of the application it placed (``[NID 00012] 2026-11-29
    # 08:01:02 Apid 4711: OOM killer terminated this process.``)
    Signature(
        "alps-oom",
        "Cray ALPS",
        "the compute node ran out of memory and the kernel's OOM killer killed a rank (ALPS reported it)",
        re.compile(r"\bApid \d{1,12}:? OOM killer terminated this process\b"),
    ),
    # Spark's Kubernetes scheduler backend on an executor pod that ended with 137
    # (ExecutorPodsLifecycleManager: ``The executor with id 7 exited with exit code 137(SIGKILL, possible
    # container OOM).``)
    Signature(
        "spark-k8s-oom",
        "Spark on Kubernetes",
        "a Spark executor's container was killed (SIGKILL, exit code 137: over its memory limit)",
        re.compile(
            r"The executor with id \d{1,9} exited with exit code 137\s?\(SIGKILL, possible container OOM\)"
        ),
    ),
    # a managed training service's status reason for the job's container killed at its memory: AWS Batch's
    # (ECS's ``OutOfMemoryError: Container killed due to memory usage``), Vertex AI's replica
    # (``The replica workerpool0-0 ran out of memory and exited with a non-zero status of 9(SIGKILL).``)
    Signature(
        "batch-oom",
        "AWS Batch",
        "ECS killed the job's container at the memory its job definition gave it",
        re.compile(r"OutOfMemoryError: Container killed due to memory usage"),
    ),
    Signature(
        "vertex-oom",
        "Vertex AI",
        "a replica of the training job ran out of memory and was killed",
        re.compile(r"The replica [\w-]{1,80} ran out of memory and exited with a non-zero status"),
    ),
    # OpenPAI's exit reason for a task's container killed over the memory it requested (its job exit spec,
    # src/job-exit-spec/config/job-exit-spec.yaml: CONTAINER_OOM_KILLED_BY_DOCKER, ``Container killed by
    # docker due to it exceeded the request memory``, ``User Container …`` in its Kubernetes releases; on
    # YARN, ``Container killed by YARN due to its PAI Runtime exceeded the request physical memory``): the
    # container's memory cgroup, and OpenPAI telling of it
    Signature(
        "openpai-oom",
        "OpenPAI",
        "a task's container was killed for using more memory than it requested",
        re.compile(
            r"\b(?:User )?Container killed by (?:docker|YARN) due to (?:it|its PAI Runtime) exceeded the "
            r"request (?:physical |virtual )?memory\b"
        ),
    ),
    # ``kubectl get pods``'s STATUS column on a container the kernel killed in its memory cgroup (NAME, READY,
    # STATUS, RESTARTS: ``train-worker-0   0/1   OOMKilled   3 (42s ago)   12m``)
    Signature(
        "listed-oomkilled-row",
        "the kubelet",
        "a process of the container went over its memory limit and the kernel killed it (the kubelet's "
        "OOMKilled, as kubectl get pods lists it)",
        re.compile(r"^[a-z0-9][\w.-]{0,252}\s{1,120}\d{1,3}/\d{1,3}\s{1,20}OOMKilled\s{1,20}\d"),
    ),
    # the kubelet's own ``OOMKilled`` as ``kubectl describe pod`` lists a container's end (``State:
    # Terminated`` / ``Last State: Terminated``, then ``Reason: OOMKilled``) or its status as YAML (``reason:
    # OOMKilled``), printed into a log: the reason alone on its line, whatever the exit code under it (0
    # where the kernel killed a process of the container other than its first one), or ``kubectl get pods``'
    # STATUS column (``memory-demo   0/1   OOMKilled   2   33s``, between its READY and RESTARTS columns,
    # however the copy spaced them: kubectl pads the NAME column to the listing's longest name)
    Signature(
        "listed-oomkilled",
        "the kubelet",
        "a process of the container went over its memory limit and the kernel killed it (the kubelet's "
        "OOMKilled, as kubectl lists it)",
        re.compile(
            r"^\s{0,16}[Rr]eason:\s{1,12}OOMKilled\s{0,4}$"
            r"|^\s{0,8}(?:pods?/)?[a-z0-9][\w.-]{0,252}\s{1,120}\d{1,3}/\d{1,3}\s{1,16}OOMKilled\s{1,16}\d{1,7}\b"
        ),
    ),
    # systemd-oomd, systemd's userspace OOM killer: a cgroup whose memory pressure (PSI) or swap use stayed
    # over its unit's limit is killed whole (``Killed /user.slice/…/x.scope due to memory pressure for … being
    # 62.15% > 50.00% for > 20s with reclaim activity``, ``… due to memory used (…) / total (…) and swap used
    # …``; older versions' ``oomd attempting to kill 1234 with KILL``)
    Signature(
        "systemd-oomd",
        "systemd-oomd",
        "the node's memory came under pressure and systemd-oomd killed a cgroup of the job's",
        re.compile(
            r"systemd-oomd(?:\[\d{1,10}\])?: (?:oomd attempting to kill (?P<victim>\d{1,10}) with \w{2,10}"
            r"|Killed (?P<unit>/[^\s]{1,300}) due to (?:memory pressure|memory used|swap used)\b)"
        ),
    ),
    # systemd (PID 1) on a unit whose process the kernel's OOM killer killed, read from the unit's cgroup's
    # memory.events (src/core/unit.c, unit_check_oom: ``user@1021.service: A process of this unit has been
    # killed by the OOM killer.``; a service's result after it, ``Failed with result 'oom-kill'.``)
    Signature(
        "systemd-oom-kill",
        "systemd",
        "the kernel's OOM killer killed a process of a systemd unit (systemd reported it)",
        re.compile(
            r"(?P<unit>[\w@:.\\-]{1,200}\.(?:service|scope|slice|socket|mount)): "
            r"(?:A process of this unit has been killed by the OOM killer\b|Failed with result 'oom-kill')"
        ),
    ),
    # the PBS epilogue of NASA's HECC systems (Pleiades, Aitken, Electra) on a job whose node ran out of
    # memory and rebooted (``Your Pleiades job 1234.pbspl1.nas.nasa.gov terminated due to one or more nodes
    # running out of memory. Node r515i2n3 ran out of memory and rebooted; …``), however the mail wrapped it
    Signature(
        "hecc-oom",
        "NASA HECC's PBS",
        "a node of the job ran out of memory and rebooted (NASA HECC's PBS epilogue reported it)",
        re.compile(
            r"\bjob [\w.\[\]-]{1,80} terminated due to one or more nodes running out of memory\b"
            r"|\bnodes running out of memory\. Node [\w-]{1,60} ran out of memory\b"
        ),
    ),
    # earlyoom, a userspace OOM killer run on the node, killing the process with the most badness when the
    # available memory (and swap) fell to its minimum: its kill (kill.c: ``sending SIGTERM to process 29410
    # uid 1000 "python": badness 1264, VmRSS 23964 MiB``; ``… to process N "name": …`` before uids were
    # printed; SIGKILL past its second limit), its verdict before it (``low memory! at or below SIGTERM
    # limits: mem 10.00%, swap 10.00%``), and its first releases' (main.c: ``Out of memory! avail: 138 MiB
    # < min: 786 MiB``, then the process it killed)
    Signature(
        "earlyoom",
        "earlyoom",
        "the node's available memory fell to earlyoom's minimum and earlyoom killed a process",
        re.compile(
            r"\bsending SIG(?:TERM|KILL) to process \d{1,10}(?: uid \d{1,10})? "
            r"\"(?P<victim>[^\"\n]{1,64})\": badness -?\d"
            r"|\blow memory! at or below SIG(?:TERM|KILL) limits: "
            r"|\bOut of memory! avail: \d{1,12} MiB < min: \d{1,12} MiB"
        ),
    ),
    # OpenVZ's kernel (its RHEL-based vzkernel) killing a process of a container over its user beancounter's
    # memory (mm/oom_kill.c with beancounters: ``Out of memory in UB 191: OOM killed process 27293 (html2text)
    # score 0 vm:3075332kB, rss:1818104kB, swap:993020kB``; 2.6.18's ``OOM killed process python (pid=812,
    # ve=101) exited, free=…``): the container's own limit, as a memory cgroup's is
    Signature(
        "openvz-oom",
        "OpenVZ",
        "a container's memory (its OpenVZ user beancounter) ran out and the kernel killed a process",
        re.compile(
            r"\bOut of memory in UB (?P<ub>\d{1,10}): OOM killed process (?P<pid>\d{1,10}) "
            r"\((?P<victim>[^)\n]{1,64})\)"
            r"|\bOOM killed process (?P<victim2>[^\s(]{1,64}) \(pid=\d{1,10}, ve=\d{1,10}\) exited\b"
        ),
    ),
    # Hugging Face Spaces' runtime status on a Space whose container went over its hardware's memory (the
    # Space page's ``Runtime error`` then ``Memory limit exceeded (16Gi)``, the quantity as the platform
    # writes it: ``14Gi``, ``16.0G``), alone on its line
    Signature(
        "hf-space-oom",
        "Hugging Face Spaces",
        "the Space's container went over its hardware's memory and was stopped",
        re.compile(r"^\s{0,8}Memory limit exceeded \(\d{1,6}(?:\.\d{1,3})? ?(?:[KMGT]i?B?)\)\s{0,4}$"),
    ),
    # a batch scheduler killing the job for the memory it was granted: PBS Pro's and TORQUE's MOM
    # (``=>> PBS: job killed: mem 38427376kb exceeded limit 33554432kb``, ``vmem``, ``pvmem``, ``mem job
    # total … kb exceeded limit``; the server's ``Job exceeded a memory resource limit (vmem, pvmem, etc.).
    # Job was aborted`` mail), LSF's exit reason (``TERM_MEMLIMIT: job killed after reaching LSF memory
    # usage limit.``), Grid Engine's execd (``job 4211 exceeds job hard limit "h_vmem" of queue …``), Moab's
    # resource-limit policy over TORQUE (``exceeded MEM usage hard limit (N > M)``),
    # Slurm's accounting poll before cgroups enforced memory (slurmstepd's ``Job 7 exceeded memory limit
    # (N > M), being killed``, ``Step 7.0 exceeded …``: OverMemoryKill sampled the job over its --mem)
    Signature(
        "scheduler",
        "the batch scheduler",
        "the batch scheduler killed the job for using more memory than it was granted",
        re.compile(
            r"PBS: job killed: (?P<pbs>p?v?mem)(?: job total)? \d{1,20} ?[kKmMgG]?[bB]? exceeded limit"
            r"|Job exceeded a memory resource limit \((?P<pbs_server>vmem)"
            r"|(?P<lsf>TERM_MEMLIMIT|TERM_SWAP): job killed after reaching LSF (?:memory|swap) usage limit"
            r"|(?P<sge>exceeds job hard limit \"h_vmem)\""
            r"|(?P<slurm>exceeded (?:virtual )?memory limit) \(\d{1,20} ?> ?\d{1,20}\), "
            r"(?:being killed|cancelling it)"
            # Moab's policy on TORQUE's jobs (``job 4211 exceeded MEM usage hard limit (2048 > 1024)``, its
            # ``SWAP``), the resource limit it cancels them for
            r"|(?P<moab>exceeded (?:MEM|SWAP) usage hard limit) \(\d{1,20} > \d{1,20}\)"
            # HTCondor holding a job over its memory: a pool's periodic hold policy (condor_q -hold's
            # reason: ``Job in status 2 put on hold by SYSTEM_PERIODIC_HOLD due to memory usage 3000000.``,
            # a job's own periodic_hold the same way), the starter's enforced limit (``Job has gone over
            # memory limit of 2048 megabytes.``, ``… over cgroup memory limit of …``)
            r"|(?P<condor>put on hold by (?:SYSTEM_)?PERIODIC_HOLD due to memory usage \d"
            r"|Job has gone over (?:cgroup )?memory limit of \d{1,12} megabytes)"
            # YARN's NodeManager on a container over the memory it was granted (Spark's ``Container killed by
            # YARN for exceeding memory limits. 7.2 GB of 4 GB physical memory used``, Hadoop's ``Container
            # [pid=…,containerID=…] is running beyond physical memory limits``, Hadoop 3's ``is running 5184B
            # beyond the 'PHYSICAL' memory limit``)
            r"|(?P<yarn>Container killed by YARN for exceeding (?:physical |virtual )?memory limits"
            r"|is running (?:\d{1,20}B )?beyond (?:(?:physical|virtual) memory limits"
            r"|the '(?:PHYSICAL|VIRTUAL)' memory limit))"
        ),
    ),
)


@lru_cache(maxsize=512)
def kernel_oom(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """The kernel's OOM killer at work, as the kernel, the kubelet or Slurm print it (a memcg report's
    counters only where the usage is at the limit)."""
    return tuple(h for h in _scan(tail, KERNEL_OOM) if h.group("usage") == h.group("limit"))


# -------------------------------------------------------------- quota, printed

QUOTA_REFUSAL = re.compile(
    r"(?:\b(?P<kind>[a-z]{2,60}) \\?\"(?P<object>[^\"\\]{1,253})\\?\" )?"
    r"is forbidden: (?:(?:[Ee]xceeded|[Ff]ailed) quota:(?: |$)"
    # Kubernetes 1.0's quota admission on an object count (plugin/pkg/admission/resourcequota/admission.go:
    # ``Limited to %s %s``, the hard count and the resource), as OpenShift 3's first releases relayed it
    r"|Limited to \d{1,9} [a-z]{2,60}\b)"
)
"""The API server's quota refusal as a program quoted it in its output (a controller's reconcile error, a
spawner's 403 body, a pipeline step's message): the object it refused, and the refusal (capitalised where
OpenShift's older quota admission wrote it: ``Exceeded quota: object-counts, …``)."""
PRINTED_REFUSAL = re.compile(
    r"is forbidden: \[?(?:(?:maximum|minimum) [\w./-]{1,64} usage per "
    r"|[\w./-]{1,64} max limit to request ratio per (?:Container|Pod) is )"
    r"|queue resource quota insufficient|couldn't assign flavors to pod set "
    # Kueue's own reasons for not admitting a workload, where they stand without the pod set's prefix
    r"|\binsufficient (?:unused )?quota for [\w./-]{1,64} in flavor "
    r"|\bSecondPassFailed\b[^\n]{0,60}?insufficient (?:unused )?quota\b"
    r"|\bborrowing limit for [\w./-]{1,64} in flavor [\w.-]{1,63} exceeded"
    # vCluster Platform's quota admission (``Forbidden: cannot create spaceinstance, because per-user
    # spaceinstances.active limit of 2 would be exceeded``)
    r"|Forbidden: cannot (?:create|update) [\w.-]{1,63}, because "
    r"|is forbidden: (?:[Uu]nable to \w{1,20} [^\n]{1,80}? at this time because there was an error "
    r"enforcing quota"
    r"|status unknown for quota: )"
    r"|admission webhook \\?\"validation\.gatekeeper\.sh\\?\" denied the request: \["
    # a cloud's own quota as the provisioner or the SDK that asked it printed it: Compute Engine's
    # (``Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1.``), Azure's cores
    # (``Operation results in exceeding quota limits of Core. …``, ``… exceeding approved … Cores quota``),
    # EC2's vCPU limit (``VcpuLimitExceeded: You have requested more vCPU capacity …``)
    r"|\bQuota '[A-Z][A-Z0-9_]{1,60}' exceeded\.\s{0,4}Limit: \d"
    r"|\bOperation results in exceeding quota limits of "
    r"|\bresults in exceeding approved \w{1,80} Cores quota\b"
    r"|\bVcpuLimitExceeded: You have requested more vCPU capacity\b"
)
"""A refusal other than a ResourceQuota's printed by a program of the run or pasted from a listing: a
LimitRange's bounds relayed in an API error's body (``pods "x" is forbidden: [maximum memory usage per Pod
is 8Gi, but limit is 9663676416., …]``, its ratio's ``cpu max limit to request ratio per Container is 4, but
provided ratio is 10.000000``), a batch queue's (Volcano's, Kueue's) as ``kubectl describe``
lists its events; the quota admission unable to evaluate the namespace's quota (``Unable to CREATE pods at
this time because there was an error enforcing quota``, ``status unknown for quota: q``); Gatekeeper's
admission webhook refusing a pod its constraints forbid (``admission webhook "validation.gatekeeper.sh"
denied the request: [constraint] …``)."""
SAGEMAKER_LIMIT = re.compile(
    r"\(ResourceLimitExceeded\) when calling the (?P<operation>\w{1,60}) operation: "
    r"The account-level service limit"
)
"""Amazon SageMaker refusing a job the run submitted for the AWS account's limit of an instance type
(boto's ``ResourceLimitExceeded: An error occurred (ResourceLimitExceeded) when calling the
CreateTrainingJob operation: The account-level service limit 'ml.p3.8xlarge for training job usage' is 2
Instances, with current utilization of 2 Instances and a request delta of 1 Instances.``, as the SageMaker
SDK or a pipeline's step relays it)."""
SAGEMAKER_DETAIL = re.compile(
    r"The account-level service limit (?:for )?(?P<limit>'[^']{1,160}'|[\w./:-]{1,160}) is (?P<cap>\d{1,7}) "
    r"Instances?, "
    r"with current utilization of (?P<used>\d{1,7}) Instances?(?: and a request delta of (?P<delta>\d{1,7}))?"
)
"""The limit's name, cap, use and the job's request in SageMaker's refusal (its lines joined: a wrapped
message is read whole)."""
_AZURE_VCPU_QUOTA = (
    r"\bThe specified subscription has a (?P<family>[\w ]{1,80}?) vCPU quota of (?P<limit>\d{1,9})\b"
)
AZUREML_QUOTA = re.compile(
    r"\bOutOfQuota: Not enough (?P<what>[\w ]{1,40}?) quota\b"
    rf"|{_AZURE_VCPU_QUOTA}"
    r"|\b(?P<code>JobNodeCountExceedsCoreQuota|ClusterQuotaReached|ClusterCoreQuotaReached)\b"
    r"|\bOperation results in exceeding quota limits of (?P<provider>Microsoft\.\w{1,40}(?:/\w{1,40})?)"
)
"""Azure Machine Learning (and Batch AI before it) refusing a job or its compute for the Azure
subscription's quota, as the SDK, the CLI or the studio relays it: the cluster's cores
(``OutOfQuota: Not enough cluster CPU quota. The amount of additional CPU quota requested is 8, …``), a VM
family's vCPUs for the job's nodes (``JobNodeCountExceedsCoreQuota, The specified subscription has a
Standard DSv2 family vCPU quota of 2 …``, ``… has a total vCPU quota of 4 and cannot accomodate …``), the
resource provider's count of clusters (``ClusterQuotaReached : Operation results in exceeding quota limits
of Microsoft.BatchAI/clusters. Maximum allowed: 0, …``)."""
AZUREML_DETAIL = re.compile(
    r"additional (?P<what>\w{1,20}) quota requested is (?P<asked>\d{1,9}), and you are currently using "
    r"(?P<used>\d{1,9})\. Your amount of maximum quota is (?P<cap>\d{1,9})"
    r"|\bmaps to (?P<vcpus>\d{1,9}) vCPUs\b"
    r"|\bMaximum allowed: (?P<allowed>\d{1,9}), Current in use: (?P<in_use>\d{1,9})"
    r"|\bquota limits of (?P<provider>Microsoft\.\w{1,40}(?:/\w{1,40})?)"
    rf"|{_AZURE_VCPU_QUOTA}"
)
"""What the Azure ML refusal counts, where it says: the quota requested, used and its maximum; the vCPUs the
job's nodes map to; the provider's maximum and what is in use, and the provider's resource it counts; the
VM family's vCPU quota."""
GOOGLE_ML_QUOTA = re.compile(
    r"The following quota metrics exceed quota limits: (?P<metric>[a-z][\w.-]{1,80}/[\w./-]{1,120}\w)"
    r"|Quota failure for project (?P<project>[\w.:-]{1,120})\. The request for (?P<count>\d{1,6}) "
    r"(?P<accelerator>\w{1,40}) accelerators exceeds the allowed maximum"
)
"""Google Cloud's ML training service refusing a job the run submitted: Vertex AI naming the project's
quota metric (``The following quota metrics exceed quota limits: aiplatform.googleapis.com/…_gpus``, in a
``429 … RESOURCE_EXHAUSTED`` body or ``ResourceExhausted: 429 …``), its predecessor Cloud ML Engine
(AI Platform Training) counting accelerators (``Quota failure for project p. The request for 8 V100
accelerators exceeds the allowed maximum of …``)."""
