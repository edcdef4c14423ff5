"""Communication failures recognised by family: who printed a line, and what it says about the mesh.

The signatures of :mod:`consumers.rules.signatures` and the launch wordings of
:mod:`consumers.rules.tails` name one wording of one library each. A library that was not read
when they were written, or a known library saying the same thing in new words, fell to the
catch-all. This module reads a line in two independent parts, and a match of both is a finding:

1. **who printed it**, from the line's *format* — the prefix or shape each library gives its
   messages (:data:`LIBRARIES`): NCCL's ``host:pid:tid [dev] file.cc:NN NCCL WARN`` (``debug.cc``),
   Open MPI / ORTE / PRRTE (``mca_…``, ``mpirun``/``prterun``, ``ORTE_ERROR_LOG:``, the openib
   help texts, the help blocks between dashed lines) and its OFI MTL (``mtl_ofi.h:NN:``), Charm++
   (``Called CmiAbort``, ``OFI::Lrts…``), oneCCL (``|CCL_ERROR| file.cpp:NN func:``, its transport
   ``atl_ofi…``), HCCL (``[ERROR] HCCL(pid,name):``, ``hccl_*.cc:NN``, ``HcclAllreduce``, CANN's
   communication error codes ``EI0006``, torch_npu's ``ProcessGroupHCCL`` and ``ERR02200``), HCCL on
   Habana Gaudi (``habana_frameworks``' process group, its ``hcl``; a C++ error attributed by c10's
   ``Exception raised from … at <path>`` after it), MPICH's Hydra (``[proxy:0:0@host] HYDU_…``,
   ``[mpiexec@host]``), Intel MPI
   (``MPIDI_OFI_…``, ``MPI startup()``, its bootstrap ``bstrap\\…``, ``bstrap_proxy``), MPICH's
   ch4 device (``src/mpid/…``, ``MPIR_…``) and its PMI client (``[cli_N]: aborting job:``),
   MVAPICH (``mpispawn``, ``mpirun_rsh``), PMIx (``PMIX ERROR:``, ``PMIx Error:``, Open MPI's PMIx client
   components ``ext2x_client.c`` / ``pmix3x_client.c``) and PRRTE's ``prun``, UCX
   (``[ts] [host:pid:tid] ucp_*.c:NN UCX ERROR``, ``UCX Fatal:``, a transport's ``ud_ep.c:NN  Fatal:``,
   ``src/ucs/debug/log.c``), libfabric (``libfabric:pid:time:prefix:prov:subsys:func():line<warn>``,
   ``src/log.c``, ``FI_…`` constants, aws-ofi-nccl's ``NET/OFI``) with its EFA, verbs and tcp
   providers, HPX's libfabric parcelport (``parcelport/libfabric/fabric_error.hpp``), Gloo (``gloo/…``),
   gRPC (``StatusCode.…``, ``grpc_status:14`` and gRPC core's JSON error string ``"grpc_status":14``),
   XGBoost's collective (``rabit``, ``src/collective/…``, ``[xgboost.…]``, its result chain
   ``[tracker.cc:NN|time]``),
   Horovod (its op names ``HorovodAllreduce_…`` and its stall report), ps-lite's van (MXNet's and
   BytePS's parameter server: ``van.cc:NN``, ``zmq_van.h``), Ray Train re-raising a worker's
   ``DistBackendError`` (``RayTaskError(DistBackendError)``), Slurm's ``srun`` and step daemons
   (``srun: error: …``, an RPC's name ``slurm_receive_msgs:``), torch elastic / c10d, the
   DeepSpeed and Accelerate launchers (``[launch.py:NN:…]``),
   TensorFlow's distributed runtime (``tensorflow/core/distributed_runtime``, ``UnavailableError``, its
   collective executor ``ring_reducer.cc``, ``BaseCollectiveExecutor::``)
   and JAX's (``jax.distributed``, ``XlaRuntimeError``, the coordination service). A Python
   exception closing a traceback whose words name no library was raised by the package of its
   innermost frame (``deepspeed/launcher/runner.py``: the DeepSpeed launcher);
2. **what it says about the mesh**, from verbs and errno names the libraries share
   (:data:`VERBS`): refused, reset, unreachable, could not connect or accept, a wrong handshake,
   timed out, lost a peer, a collective stalled (ranks missing), aborted, could not spawn
   (including a process manager's proxy refused its credentials), could not allocate or register
   transport memory, could not open a transport resource (an address vector, an endpoint, an
   address inserted into it), a transfer's completion failed (libfabric's ``err: N, message:``,
   MPICH's ch4:ofi ``OFI poll failed``, Open MPI's OFI MTL ``Error returned from fi_cq_readerr``,
   a libfabric call's ``fi_tsend error``), a collective failed (rabit's ``Allreduce failed``), NCCL's
   p2p transport failing an IPC handle, ``MPI_Init`` failing, a connection lost (PMIx's
   ``LOST_CONNECTION_TO_SERVER``),
   a process group's backend failed (torch's ``DistBackendError`` raised). NCCL's
   error trail (``NCCL INFO misc/socket.cc:NN -> 2``, the return code passed up each caller) says
   a socket call failed where it starts in NCCL's network code, even with no WARN line.

The finding's sentence and remediation are the library's and the verb's (:func:`words`,
:func:`remediation`): libfabric's EFA provider unable to reach a peer points at the security
group and the EFA devices; a gRPC channel ``UNAVAILABLE`` in a parameter-server job at the PS
pod and its Service. Specific signatures keep precedence where they say more
(:mod:`consumers.rules.mpi` ranks the candidates).

**Messages read whole.** A message continued over several lines is read as one
(:func:`logical_lines`): an Open MPI / PRRTE help block between its dashed lines (or from its
opening dashes to the end of a tail that cut it off); a line of a
known library ending with ``:`` (NCCL's ``Last error:`` then the reason), and the indented
lines under it (gRPC's ``status = StatusCode.UNAVAILABLE`` / ``details = …``), and the lines that
carry on a sentence it left unfinished (a help text cut before its dashed lines).

**Not a failure.** A line that says it retries, an INFO / DEBUG level line, a c10d warning
(``[W socket.cpp:…]``), a handler's ``except …:``, or a hint (``may cause``) is no finding,
whichever words it holds; nor is
a failure that the same library says, within the next messages, it retries (NCCL's
``socketPollConnect`` WARN then ``retrying (1/34)``). A retry the line only hedges (gRPC's
``RPC failed … maybe retrying the RPC``) is still a failure. Advice *before* the verb (``to avoid
…``) or an explanation right after it makes a mention (:func:`~consumers.rules.tails.is_mention`);
an Open MPI help text's advice after the failure does not. NCCL's network plugin failing before
NCCL names the network it uses is a fallback, not a failure. The start-up barrier of the JAX /
TensorFlow coordination service (:data:`STARTUP_BARRIER`), the c10d store's client failing to
reach rank 0's store (:data:`C10D_STORE`), a Julia worker the master never connected to
(:data:`JULIA_MASTER_WAIT`) and a Dask client or worker that never reached its scheduler
(:data:`DASK_SCHEDULER`) are a missed rendezvous, left to
:mod:`consumers.rules.rendezvous`.

Like every pattern of the package, these start with a literal and use bounded quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from consumers.rules.signatures import Hit, Signature, fell_back, message_rank
from consumers.rules.tails import bounded, is_mention, output_rank, strip_tag, went_on

Verb = Literal[
    "spawn",
    "alloc",
    "resource",
    "refused",
    "reset",
    "unreachable",
    "handshake",
    "connect",
    "timed-out",
    "lost",
    "aborted",
    "stalled",
    "completion",
    "trail",
    "backend",
]


@dataclass(frozen=True)
class Library:
    """One library, told by the format of the lines it prints."""

    key: str
    name: str
    format: re.Pattern[str]


# In order: the first library whose format a line shows printed it (the more specific first:
# libfabric's EFA provider before libfabric, Intel MPI's OFI layer before libfabric, PRRTE before
# Open MPI, Horovod before the Gloo it carries).
LIBRARIES: tuple[Library, ...] = (
    Library(
        "nccl",
        "NCCL",
        re.compile(
            r"NCCL WARN |NET/(?:Socket|IB|Plugin)\b|ncclSocket\w{0,30}|socket(?:Start|Poll"
            r"|Finalize|Progress)"
            r"\w{0,20}|ncclProxy\w{0,30}|bootstrap(?:Net|Root|Connect|Accept)\w{0,20}"
            r"|^Last error:|Proxy Call to rank \d"
            # PyTorch's ProcessGroupNCCL naming its communicator (``NCCL communicator was aborted on rank 2``)
            r"|\bNCCL communicator\b"
            # its socket address, a host with its port in angle brackets (``Connect to 10.1.2.3<47713>
            # failed : …``, ``ncclSocketToString``), however the line is prefixed
            r"|\b(?:[Cc]onnect|[Aa]ccept|[Ss]end|[Rr]ecv) (?:to|from) \[?[\w.:-]{1,120}\]?<\d{1,5}> failed\b"
            # its proxy client polling the proxy thread for an operation's answer (src/proxy.cc,
            # ncclPollProxyResponse: ``Socket recv failed while polling for opId=0x…``), where a launcher's
            # host prefix, or torch's ``Last error:``, replaced its WARN prefix
            r"|\bwhile polling for opId=0x"
        ),
    ),
    Library(
        "deepep",
        "DeepEP (the expert-parallel dispatch and combine kernels, over NVSHMEM and NVLink)",
        # its kernels' own timeouts, printed from the device (csrc/kernels/internode.cu, intranode.cu:
        # ``DeepEP dispatch forwarder timeout (RDMA meta), channel: …``, ``DeepEP timeout for combine
        # receivers, rank …``)
        re.compile(r"^\s{0,8}DeepEP (?:dispatch|combine|timeout|notify)\b"),
    ),
    Library(
        "nvshmem",
        "NVSHMEM (the GPU-initiated communication under DeepEP and other MoE kernels)",
        # its sources' paths in its error lines (``…/src/host/init/init.cu:NN: non-zero status: 7 …``,
        # ``src/modules/transport/ibgda/ibgda.cpp``) and its own names
        re.compile(
            r"\bnvshmemi?_\w{1,40}|\bNVSHMEM\b|/src/(?:host|modules)/(?:init|transport)/[\w/]{0,60}\.(?:cu|cpp):"
        ),
    ),
    Library(
        "efa",
        "libfabric's EFA provider",
        re.compile(
            r"libfabric:\d{1,10}:\d{1,20}:[\w-]{0,40}:efa:|efa_rdm_\w{1,60}|efa_\w{1,40}\(\)|EFA device"
            # the provider's source named where it failed (``prov/efa/src/rxr/rxr.h:1343``)
            r"|\bprov/efa/src/[\w/]{1,80}\.[ch]:\d"
            # the kernel's EFA driver in dmesg, its ib_device's name (``infiniband efa_0: Failed to process
            # command DEREG_MR (opcode 8) comp_status 7 err -22``)
            r"|\binfiniband efa_\d{1,3}: "
        ),
    ),
    Library(
        "intel-mpi",
        "Intel MPI",
        re.compile(r"MPIDI_OFI_\w{1,60}|MPI startup\(\)|I_MPI_\w{1,40}|bstrap[\\/_]|i_hydra|bstrap_proxy"),
    ),
    Library(
        "mpich",
        "MPICH (or an MPI built on it: MVAPICH2)",
        # ``[cli_N]:``: the PMI client's prefix of a rank's abort; ``Fatal error in PMPI_…:``: an error stack
        re.compile(
            r"src/mpid/|MPIDI_\w{1,60}|MPIR_\w{1,60}|MPID_\w{1,60}|^\[cli_\d{1,7}\]: "
            r"|Fatal error in P?MPI_\w{1,40}:|\bPMII_\w{1,40}"
        ),
    ),
    Library(
        "oneccl",
        "oneCCL (Intel's collectives, under torch's xccl/ccl backend)",
        # its log prefix ``|CCL_ERROR| file.cpp:NN func:``, its transport layer's ``atl_ofi…`` / ``atl_mpi…``
        # and its exceptions raised into Python (``RuntimeError: oneCCL: exec.cpp:134 start_workers: …``)
        re.compile(r"\|CCL_(?:ERROR|FATAL|WARN)\||\batl_(?:ofi|mpi)\w{0,40}|\boneCCL: \w{1,40}\.cpp:\d"),
    ),
    Library(
        "mlx-ring",
        "MLX's ring backend (mlx.distributed over TCP sockets between neighbouring ranks)",
        # its messages' tag (mlx/distributed/ring/ring.cpp: ``[ring] Receiving from socket 51 failed with
        # errno 14``, ``[ring] Couldn't connect (error: 111)``, ``[ring] Too many send/recv errors.``)
        re.compile(r"^\s{0,8}\[ring\] [A-Z]"),
    ),
    Library(
        "hccl",
        "HCCL (Ascend's collectives, under torch_npu)",
        # ``[ERROR] HCCL(pid,name):``, its sources ``hccl_*.cc``, its ops ``HcclAllreduce``, CANN's error
        # codes of the communication class (``EI0006``, ``Communication_Error_Get_Socket(EI0006)``)
        re.compile(
            r"\bHCCL\(\d|\bhccl_\w{1,40}\.cc:\d|\bHccl[A-Z]\w{1,40}|\bEI00\d\d\b"
            # CANN's runtime reporting a device's HCCL task (``The error from device(chipId:5, dieId:0),
            # serial number is 17, hccl fftsplus task timeout …``, ``[FUNC:…HcclFftsPlusTimeoutErrorInfo]``)
            r"|The error from device\(chipId:\d{1,4}, dieId:\d{1,4}\), serial number is \d{1,10}, hccl "
            r"|\[FUNC:\w{0,80}Hccl\w{0,80}\]"
            r"|Communication_Error_\w{1,40}"
            # torch_npu's process group raising HCCL's error (``HCCL error in: …ProcessGroupHCCL.cpp:64``,
            # ``ERR02200 DIST call hccl api failed``), HCCP's (its per-NPU process) error codes (``EJ0001:``)
            r"|\bProcessGroupHCCL\b|\bHCCL error in: |\bEJ\d{4}: |\bDIST call hccl api failed"
        ),
    ),
    Library(
        "gaudi",
        "HCCL (Habana Gaudi's collectives, under habana_frameworks)",
        # the Gaudi bridge's process group (``habana_frameworks/torch/distributed/hccl/
        # process_group_hccl_base.cpp``), its collectives library ``hcl`` (``repos/hcl/src/…``)
        re.compile(
            r"habana_frameworks[/.]torch[/.]distributed|process_group_hccl\w{0,20}\.cpp:\d"
            r"|/hcl/src/[\w/]{1,120}\.cpp:\d|HCCL demo error\b"
        ),
    ),
    Library(
        "ompi-ofi",
        "Open MPI's OFI MTL (over libfabric)",
        re.compile(r"mtl_ofi\w{0,30}\.[ch]:\d|mca/mtl/ofi/|[Tt]he Open MPI OFI MTL\b"),
    ),
    Library(
        "charm",
        "Charm++ (its Converse machine layer: OFI, UCX, verbs)",
        # its launcher's own prefix too (``Charmrun> Error 255 returned from remote shell``, ``Charmrun:
        # error on request socket-- …``)
        re.compile(r"\bLrts[A-Z]\w{0,40}|Called CmiAbort\b|\bCmiAbort\b|charmrun\b|Charmrun[>:] |Charm\+\+"),
    ),
    Library(
        "gasnet",
        "GASNet (the communication layer of Chapel, UPC++ and Legion)",
        # its fatal error's prefix and a conduit's functions and sources (``*** FATAL ERROR (proc 0): in
        # gasnetc_ofi_init() at …/ofi-conduit/gasnet_ofi.c:NN: …``)
        # (``*** GASNET ERROR(Node 1): …`` from its udp-conduit's spawner)
        re.compile(
            r"\bgasnetc?_\w{1,40}|\b\w{2,10}-conduit/|\*\*\* FATAL ERROR \(proc \d{1,7}\)|GASNet\b"
            r"|\*\*\* GASNET ERROR\b"
        ),
    ),
    Library(
        "shmem",
        "Sandia OpenSHMEM (alone or under Intel SHMEM)",
        # its log's ``[0003] ERROR: init.c:NN: shmem_internal_…`` and its OFI transport's sources
        re.compile(
            r"\bshmem_internal_\w{1,40}|\bshmem_transport_\w{1,40}|\btransport_(?:ofi|ucx|portals4)\.c:\d"
        ),
    ),
    Library(
        "mercury",
        "Mercury (the RPC layer of DAOS and Mochi services, its NA plugins)",
        # its log's ``# NA -- Error -- …/na_ofi.c:NN`` / ``# HG -- Error --`` and its NA plugin's functions
        re.compile(r"# (?:NA|HG|HG_Util) -- (?:Error|Warning) -- |\bna_(?:ofi|ucx|sm|bmi)_\w{1,40}"),
    ),
    Library(
        "hpx",
        "HPX's libfabric parcelport",
        # its controller's errors thrown as a fabric_error (plugins/parcelport/libfabric/fabric_error.hpp),
        # whose message names that header and line after the call that failed (``Failed to get fabric info :
        # No data available …/parcelport/libfabric/fabric_error.hpp 31``)
        re.compile(r"\bparcelport/libfabric/\w{1,60}\.hpp\b|\bparcelport_libfabric\b"),
    ),
    Library(
        "libfabric",
        "libfabric",
        re.compile(
            r"libfabric:\d{1,10}:|fi_(?:getinfo|fabric|domain|endpoint|enable|av_insert"
            r"|cq_\w{1,20})\b|OFI\b|FI_[A-Z_]{2,30}\b"
        ),
    ),
    Library(
        "ucx",
        "UCX",
        re.compile(
            r"UCX {1,3}(?:ERROR|WARN|DIAG|Fatal|FATAL)\b"
            r"|ucp_\w{1,40}\.c:\d|uct_\w{1,40}\.c:\d|ucs_\w{1,40}\.c:\d"
            # a transport's fatal error without UCX's tag (``ud_ep.c:263  Fatal: UD endpoint …``)
            r"|\b(?:ud|rc|dc)_\w{1,30}\.c:\d{1,5} {1,4}(?:Fatal|FATAL): "
            # its test tools' tag (io_demo: ``[UCX] …``, ``[UCX-connection #1 host:port] …``) and its
            # status codes by name (``UCS_ERR_CONNECTION_RESET``); not ucs_status_string()'s words alone
            # (``Connection reset by remote peer``), which ucx-py relays in exceptions an asyncio task may
            # never raise
            r"|\[UCX(?:-connection #\d{1,6} [^\]\n]{1,80})?\] |\bUCS_ERR_[A-Z_]{2,40}\b"
        ),
    ),
    Library(
        "psm2",
        "PSM2 / PSM3 (Omni-Path, Intel Ethernet)",
        re.compile(
            r"PSM[23]\b|psm[23]_\w{1,40}|\bhfi1?_\w{1,40}|hfi unit\b"
            # its sources' paths in its assertions (``Assertion failure at psm3/ptl_am/ptl.c:NN: …``, PSM2's
            # ``ptl_ips/ips_proto.c``)
            r"|\bpsm[23]?/[\w/]{1,80}\.c:\d|\bptl_(?:am|ips|self)/\w{1,40}\.c:\d"
        ),
    ),
    Library(
        "pmix",
        "PMIx",
        re.compile(
            r"PMIX ERROR|PMIx Error:|PMIx_\w{1,40}|PMIX_ERR_\w{1,40}|pmix_\w{1,40}\.c|PMIX_\w{1,40}_SERVER\b"
            r"|\bpmix_init\b"
            # Open MPI's OPAL components that are its PMIx client (ext2x, ext3x, pmix3x, pmix4x) in OPAL's
            # error log (``OPAL ERROR: Unreachable in file ext2x_client.c at line 109``)
            r"|\b(?:ext|pmix)\dx_\w{1,30}\.c\b"
        ),
    ),
    Library(
        "prrte",
        "Open MPI's PRRTE",
        re.compile(
            r"prterun\b|prted\b|PR{1,2}TE\b|prte_\w{1,40}|PRTE_ERROR_LOG\b|\[prte-[\w.-]{1,80}@\d"
            r"|\bprun(?:\.c:\d|\b)|PRUN: "
        ),
    ),
    Library(
        "msmpi",
        "MS-MPI (Microsoft MPI) or MPICH2 on Windows, their smpd process manager",
        # its process manager and the RPC its mpiexec starts it with (``… unable to connect to the smpd
        # service on host:8677``, ``Failed RpcCliStartMgr``), its name
        # and MPICH2's smpd on Windows, which MS-MPI's comes from: its sock layer's connect (``Connect on sock
        # (host=h, port=8676) failed, exhaused all end points``, ``sock error: Error = -1``)
        re.compile(
            r"\bsmpd\b|\bRpcCli\w{1,40}|\bMS-?MPI\b|\bmsmpi\w{0,20}|Microsoft MPI"
            r"|\bConnect on sock \(host=|^\s{0,8}sock error: Error = -?\d"
        ),
    ),
    Library(
        "hydra",
        "MPICH's Hydra",
        re.compile(r"\[(?:proxy:\d{1,7}:\d{1,7}|mpiexec)@[\w.-]{1,253}\]|HYD[TU]?_\w{1,60}|hydra_\w{1,40}"),
    ),
    Library(
        "mvapich",
        "MVAPICH",
        re.compile(r"MVAPICH|MV2_\w{1,40}|mpirun_rsh\b|mpispawn\b"),
    ),
    Library(
        "ompi",
        "Open MPI",
        re.compile(
            r"mpirun\b|ORTE\b|\borted\b|mca_\w{1,60}|Open MPI|opal_\w{1,40}|ompi_\w{1,40}"
            r"|(?:ORTE|OPAL|OMPI)_ERROR_LOG\b|OpenFabrics \(openib\)|btl_openib\w{0,40}"
            # its help text on a peer lost, opening without its dashed lines (its PML / BTL's words)
            r"|\bAn MPI communication peer process\b"
            # its runtime's init failing, in its help text's opening sentence (``orte_init``, ``opal_init``)
            r"|\b(?:orte|opal|ompi_rte)_init\b"
            # ORCM, the resilient cluster manager built on ORTE (its daemons' ``orcmd``, its help text's
            # ``ORCM has detected failure of an orcm daemon``)
            r"|\bORCM\b|\borcmd?\b"
        ),
    ),
    Library(
        "horovod",
        "Horovod",
        re.compile(
            r"\[HOROVOD|horovod[./_]|Horovod\b|horovodrun\b"
            r"|Horovod(?:Allreduce|Allgather|Broadcast|Alltoall|ReduceScatter|Reducescatter|Join|Barrier)_"
            r"|One or more tensors were submitted to be"
            # its stall inspector's list header, the ranks and their tensors under it (stall_inspector.cc:
            # ``Missing ranks:`` then ``0: [broadcast_object_fn.sz]``), whatever tag a launcher put before it
            r"|Missing ranks:(?:\s{0,4}$|[^\n]{0,80}?\b\d{1,7}: \[)"
        ),
    ),
    Library("gloo", "Gloo", re.compile(r"gloo/|Gloo\b|ProcessGroupGloo")),
    Library(
        "xgboost",
        "XGBoost's collective (rabit)",
        re.compile(
            r"\[xgboost\.|XGBoostError|rabit\b|src/collective/|RabitTracker\b|Socket \w{2,12} Error:"
            r"|\[(?:tracker|comm|socket|allreduce|coll|result|loop)\.(?:cc|h):\d{1,6}\|"
        ),
    ),
    Library(
        "pslite",
        "ps-lite (the parameter server of MXNet / BytePS)",
        re.compile(
            r"ps-lite|ps::(?:Van|Postoffice|KVWorker|KVServer)|\b(?:zmq_|ibverbs_|rdma_)?van\.(?:cc|h):\d|DMLC_PS_\w{1,30}"
        ),
    ),
    # Dask's distributed (its scheduler, workers and nanny), by its loggers' format (``distributed.scheduler -
    # CRITICAL - …``, ``distributed.worker - ERROR - …``) and its comm layer's error
    Library(
        "dask",
        "Dask distributed",
        re.compile(
            r"^\s{0,8}(?:\S{1,40} )?distributed\.[\w.]{1,60} - (?:CRITICAL|ERROR|WARNING|INFO) - "
            r"|\bdistributed\.comm\.\w{1,20}\.CommClosedError\b"
        ),
    ),
    Library(
        "xla",
        "XLA's collectives (under JAX / TensorFlow)",
        re.compile(r"xla/(?:service|pjrt|backends)/[\w/]{1,80}\.cc:\d"),
    ),
    Library(
        "jax",
        "JAX's distributed runtime",
        re.compile(
            r"jax\.distributed|jaxlib\b|XlaRuntimeError|JaxRuntimeError|JAX distributed"
            r"|PjRT_Client_\w{1,30}"
        ),
    ),
    Library(
        "tf",
        "TensorFlow's distributed runtime",
        re.compile(
            r"tensorflow/core/distributed_runtime|tensorflow\.python\.framework\.errors_impl"
            r"|UnavailableError\b"
            r"|DeadlineExceededError\b|Collective ops is aborted"
            # its collective executor in common_runtime (``ring_reducer.cc``, ``BaseCollectiveExecutor::``)
            r"|tensorflow/core/common_runtime/(?:ring_\w{1,20}|\w{0,20}collective\w{0,20}|hierarchical_\w{1,30})\.cc"
            r"|BaseCollectiveExecutor::"
        ),
    ),
    Library(
        "coordination",
        "the TensorFlow / JAX coordination service",
        re.compile(r"[Cc]oordination ?[Ss]ervice|tsl/distributed_runtime|coordination_service"),
    ),
    Library(
        "paddle",
        "PaddlePaddle's parameter server (its trainers' RPC clients)",
        # its RPC clients' sources in glog's prefix: the fluid gRPC / bRPC client (``grpc_client.cc:NN]``,
        # ``brpc_client.cc``), v1's ParameterClient2 over its LightNetwork sockets
        re.compile(
            r"\b(?:grpc|brpc)_client\.cc:\d{1,6}\]|\bLightNetwork\.cpp:\d|\bParameterClient2\.cpp:\d"
            r"|\bparameter_(?:send|recv|prefetch)\.cc:\d"
        ),
    ),
    Library(
        "grpc",
        "gRPC",
        re.compile(
            r"StatusCode\.[A-Z_]{4,30}|grpc_status\"?:? ?\d{1,3}|_InactiveRpcError|grpc\._channel|gRPC\b"
            r"|grpc_message\b"
        ),
    ),
    Library(
        "ray",
        "Ray Train (re-raising a worker's torch.distributed error)",
        re.compile(
            r"RayTaskError\((?:DistBackendError|DistNetworkError|DistError)\)|ray\.train\.\w{1,40}Error"
        ),
    ),
    Library(
        "ray-gcs",
        "Ray's GCS (its view of the cluster's nodes)",
        # the GCS's verdict on a node, as a driver's or a worker's log relays it (``The node with node id:
        # 0fc1… and ip: 172.31.57.35 has been marked dead because the detector has missed too many
        # heartbeats from it.``, Ray 0.x's ``The node with client ID 1ead… has been marked dead because the
        # monitor …``), and its node manager's and health check's sources
        re.compile(
            r"\bThe node with (?:client ID|node id:?) [0-9a-f]{16,64}\b"
            r"|\bgcs_(?:node|health_check)_manager\.cc:\d"
        ),
    ),
    Library(
        "ascend-rt",
        "Ascend CANN's runtime (an NPU stream's tasks, HCCL's collectives among them)",
        # its error codes of the runtime class (``EE1002: … Stream synchronize timeout``), its calls
        # (``rtDeviceSynchronize``, ``rtStreamSynchronize``), torch_npu's stream under it
        # (``NPUStream.cpp:409]``) and the ACL error it returns for a sync that timed out (``error code is
        # 507046``)
        re.compile(
            r"\bEE1\d{3}: |\brt(?:Device|Stream)Synchronize\w{0,20}\b|\bNPUStream\.cpp:\d"
            r"|\berror code is 5070(?:46|07)\b"
        ),
    ),
    Library(
        "tensorpipe",
        "torch.distributed.rpc's TensorPipe agent",
        # its agent's source in c10's warning prefix (``[W tensorpipe_agent.cpp:916] RPC agent for 3
        # encountered error …``), where TensorPipe's own transport says the error came from
        # (``this error originated at tensorpipe/transport/shm/connection_impl.cc:187``)
        re.compile(r"\btensorpipe_agent\.cpp:\d|\btensorpipe/(?:transport|channel|core)/|RPC agent for \d"),
    ),
    Library(
        "julia",
        "Julia's Distributed (its workers' all-to-all TCP connections)",
        # a worker's output relayed by the master (``From worker 6:``), Distributed's sources in a stack
        # trace (``Distributed/src/cluster.jl:200``), its connection setup (``wait_for_conn``)
        re.compile(r"^\s{0,16}From worker \d{1,7}:|\bDistributed/src/\w{1,40}\.jl:\d|\bwait_for_conn\b"),
    ),
    Library(
        "torch",
        "torch.distributed (c10d / torch elastic)",
        re.compile(
            r"\[c10d\]|torch\.distributed\.elastic|DistNetworkError|DistBackendError|TCPStore\b"
            r"|ProcessGroupNCCL|c10d::"
        ),
    ),
    Library(
        "launcher",
        "the DeepSpeed / Accelerate launcher",
        re.compile(
            r"\[(?:launch|runner|launcher)\.py:\d{1,6}:|deepspeed[./]launcher|accelerate[./]commands|pdsh@"
        ),
    ),
    Library(
        "slurm",
        "Slurm (srun and its step daemons)",
        # ``srun: error: …``, ``slurmstepd: error: …``, a Slurm RPC's name (``slurm_receive_msgs:``)
        re.compile(r"\b(?:srun|slurmstepd|sbatch|salloc): error: |\bslurm_\w{1,40}: "),
    ),
    Library(
        "ssh",
        "ssh (a launcher's remote shell)",
        re.compile(
            r"Command '\[?'?ssh |ssh: connect to host\b|ssh: Could not resolve hostname"
            r"|ssh exited with exit code"
        ),
    ),
)

VERBS: tuple[tuple[Verb, re.Pattern[str]], ...] = (
    (
        "spawn",
        re.compile(
            r"(?:[Cc]ould not|[Uu]nable to|[Ff]ailed to|[Nn]ot able to) "
            r"(?:spawn|launch|execute|exec\b|start (?:the )?(?:daemon|proxy|process|remote))"
        ),
    ),
    (
        "spawn",
        re.compile(
            r"execvp error|[Ss]pawn (?:failed|failure)|[Ll]aunch failed|HYDU_create_process|cannot execute\b"
            r"|command not found\b|[Uu]nable to run \w{1,40} on\b"
            r"|[Ee]rror (?:launching|spawning|starting|setting up the (?:bootstrap|boostrap))"
            r"|[Rr]ejected (?:the )?credentials|[Aa]uthentication (?:failed|failure)"
            r"|ssh\b[^\n]{1,300}?returned non-zero exit status 255\b|ssh exited with exit code 255\b"
            # a library's own threads that would not start (oneCCL's workers: ``error while creating worker
            # thread #0 pthread_create returns 22``, ``failed to start worker # 0``)
            r"|[Ee]rror (?:while )?creating (?:worker|progress|service) thread\b|[Ff]ailed to start worker\b"
            # MVAPICH's mpirun_rsh giving up before its mpispawn processes all connected back (``Error in init
            # phase, aborting! (1/2 mpispawn connections)``)
            r"|[Ee]rror in init phase, aborting\b"
            # a launcher's remote shell failing on a host, and its retries spent (charmrun's ``Error 255
            # returned from remote shell (host:0)``, ``Too many reconnection attempts; bailing out``)
            r"|[Ee]rror \d{1,3} returned from remote shell\b|[Tt]oo many reconnection attempts\b"
        ),
    ),
    (
        "alloc",
        re.compile(
            r"[Cc]annot allocate memory|ENOMEM\b|[Mm]emory registration failed"
            r"|[Oo]ut of (?:resources|registered)"
        ),
    ),
    (
        "alloc",
        re.compile(
            r"(?:[Ff]ailed to|[Uu]nable to|[Cc]ould(?:n't| not)|[Cc]annot) (?:register|allocate|pin)"
            r" (?:memory|an? (?:buffer|MR|(?:memory )?region)|MRs?\b|mr\b)"
            r"|ibv_reg_mr\b|fi_mr_reg\b|RLIMIT_MEMLOCK\b|[Ll]ocked memory"
            # NCCL's proxy allocating a buffer for a peer's connection (``[Rem Allocator] Allocation failed``)
            r"|\[Rem Allocator\] Allocation failed\b"
            # an RDMA driver's admin command registering a region failing on the device (the EFA driver's
            # ``Failed to process command REG_MR (opcode 7) comp_status 1 err -12``)
            r"|[Ff]ailed to process command REG_MR\b"
        ),
    ),
    (
        "resource",
        re.compile(
            r"(?:[Cc]ould(?:n't| not)|[Cc]an't|[Uu]nable to) (?:open|create|init(?:ialize)?|bind) "
            r"(?:an? |the )?"
            r"(?:AV|EP|CQ|QP|MR|address vector|endpoint|domain|fabric|completion queue|queue pair"
            r"|protection domain|hfi unit|nic unit|context|HCA|device)\b"
            r"|[Cc]hannel initiali[sz]ation failed|Fatal error in P?MPI_Init(?:_thread)?:"
            # NCCL's (RCCL's) p2p transport sharing device memory between the local ranks
            r"|(?:cuda|hip)Ipc(?:Get|Open)(?:Mem|Event)Handle\w{0,10}(?:\(\))? failed"
            r"|[Ff]ailed to open (?:CUDA|HIP) IPC handle"
            r"|[Ff]ailed to (?:open|create|init(?:ialize)?) (?:an? |the )?(?:AV|EP|CQ|QP|address vector"
            r"|endpoint|domain|fabric|completion queue|queue pair|protection domain)\b"
            r"|(?:[Uu]nable|[Ff]ailed) to insert (?:the )?(?:remote )?address(?:es)? into (?:the |an )?"
            r"address vector|[Ff]ailure inserting address into address vector"
            r"|fi_av_insert\(?\)? (?:failed|returned)|[Ff]ailed to initiali[sz]e while trying to\b"
            # oneCCL's transport finding no libfabric provider to use
            r"|[Cc]an(?:'t| ?not) (?:open|find|create|init) (?:\w{1,20} )?(?:network )?providers?\b"
            # a rank's PMI client (Slurm's PMI-2, a process manager's) failing to start: no launch wiring
            r"|\bPMI2?_Init failed\b|\bPMI2? init failed\b|was not built with SLURM's PMI support\b"
            # MPICH's singleton init (a rank started without its process manager, by srun or by hand)
            # failing to exec the mpiexec it needs
            r"|\bPMII_singinit: execv failed\b"
            # HCCL (CANN's EI0009) unable to set up its transport to another NPU's rank
            r"|[Tt]ransport init error\b"
            # a verbs call creating a queue pair or its resources failing by name (``ibv_create_qp failed``)
            r"|\bibv_(?:create|alloc|open|query)_\w{1,20} failed\b"
            # Open MPI's help text for a transport component (btl, mtl, pml) it could not load, before
            # MPI_INIT fails
            r"|[Aa] requested component was not found, or was unable to be opened"
            # a rank's runtime failing to initialise (PMIx, Open MPI's RTE: :data:`RUNTIME_INIT`), or
            # HCCL's per-NPU process (HCCP) failing to start
            r"|It looks like (?:pmix_init|MPI runtime init|orte_init|opal_init|ompi_rte_init) failed\b"
            r"|\bpmi/pmix: can ?not load PMIx library\b|[Cc]annot create context for mpi/\w{1,20}"
            r"|[Ff]ailed to initiali[sz]e the HCCP process\b"
            # a communicator's initialisation from its root's id returning an error (HCCL's
            # ``HcclCommInitRootInfo failed``, ``HcclCommInitClusterInfo fail, error:2``)
            r"|\bHcclCommInit\w{0,30} fail(?:ed)?\b"
            # a libfabric object a library could not open, in its own words (GASNet's ofi-conduit:
            # ``fi_endpoint for rdma failed: -22(Invalid argument)``, ``fi_domain failed: -61(…)``), the
            # call's return code after it; not MPICH's error stack (``OFI fi_fabric failed (ofi_init.c:…)``),
            # whose own signature says more
            r"|\bfi_(?:fabric|domain|endpoint|av_open|cq_open|cntr_open|ep_bind|enable)(?: for [\w ]{1,30}?)?"
            r" failed: -?\d"
            # a library's transport layer that would not start at all (Sandia OpenSHMEM's ``Transport init
            # failed (-38)``, NVSHMEM's ``Unable to initialize any transports``)
            r"|[Tt]ransport init failed\b|[Uu]nable to initiali[sz]e any transports?\b"
            # a library's fi_getinfo finding no provider for its hints, or the objects after it, in its
            # own words (HPX's libfabric parcelport: ``Failed to get fabric info : No data available``,
            # ``Failed to get fi_fabric``, ``Failed to get fi_passive_ep``)
            r"|[Ff]ailed to get (?:fabric info|fi_(?:fabric|domain|passive_ep|endpoint|av_open|cq_open))\b"
            # NCCL's bootstrap finding no network interface to use (``Bootstrap : no socket interface found``,
            # bootstrap.cc; NCCL_SOCKET_IFNAME naming none the pod has)
            r"|[Nn]o socket interface found\b"
            # a transport layer that would not start, in oneCCL's words (``init_transport: EXCEPTION:
            # failed to initialize ATL``), and libfabric's provider query returning none (oneCCL's
            # ``fi_getinfo error: ret -61, providers 0``)
            r"|[Ff]ailed to initiali[sz]e ATL\b|\bfi_getinfo (?:error: ret|failed)\b"
            # NCCL's network named by NCCL_NET that no plugin or built-in provides (net.cc: ``Error: network
            # AWS Libfabric not found.``)
            r"|\bError: network [\w ./-]{1,40}? not found\."
        ),
    ),
    (
        "refused",
        re.compile(r"[Cc]onnection refused|ECONNREFUSED\b|[Ee]rrno:? ?111\b|111 ?\(Connection"),
    ),
    (
        "reset",
        re.compile(r"[Cc]onnection reset|ECONNRESET\b|[Bb]roken pipe|EPIPE\b|[Ee]rrno:? ?104\b"),
    ),
    (
        "unreachable",
        re.compile(
            r"[Nn]o route to host|EHOSTUNREACH\b|[Nn]etwork is unreachable|ENETUNREACH\b"
            r"|UNREACH(?:ABLE)?\b"
            r"|[Hh]ost (?:is )?unreachable|[Uu]nreachable|StatusCode\.UNAVAILABLE|UNAVAILABLE:"
            r"|grpc_status\"?:? ?14\b"
            r"|[Ff]ailed to connect to all addresses|[Nn]ame or service not known"
            r"|[Tt]emporary failure in name resolution"
            r"|[Cc]annot assign requested address"
            r"|rdma_resolve_(?:addr|route)\b|RDMA_CM_EVENT_(?:ADDR|ROUTE)_ERROR|FI_ADDR_NOTAVAIL\b"
            r"|EADDRNOTAVAIL\b|UnavailableError\b"
            r"|(?:[Uu]nable to|[Cc]ould not|[Cc]annot|[Cc]an't) reach\b|[Nn]ot reachable\b"
            r"|(?:does not|doesn't|did not) know how to route|[Cc]annot route\b"
            r"|[Cc]an't find (?:an )?address (?:for host\b|, check slurm\.conf)"
        ),
    ),
    (
        "handshake",
        re.compile(
            r"[Ww]rong (?:type|magic|version|protocol)\b|[Mm]agic mismatch|[Vv]ersion mismatch"
            r"|[Hh]andshake (?:failed|failure|error)|[Uu]nexpected (?:magic|peer type)"
        ),
    ),
    (
        "timed-out",
        re.compile(
            r"[Cc]onnection timed out|ETIMEDOUT\b|DEADLINE_EXCEEDED|[Dd]eadline [Ee]xceeded"
            r"|[Tt]imed out\b"
            r"|grpc_status\"?:? ?4\b|[Bb]arrier timed out|[Tt]imeout (?:expired|exceeded|reached)"
            # HCCL's (``Getting socket times out``, ``wait socket establish timeout``, ``task timeout
            # occurred``) and UCX's (``transport error: Endpoint timeout``)
            r"|[Tt]imes out\b|\b(?:establish|task|[Ee]ndpoint) timeout\b|[Uu]nhandled timeout\b"
            # CANN's runtime on a stream whose tasks (an NPU's collectives among them) never finished
            # (``Stream synchronize timeout``, ``reason=[stream sync timeout]``)
            r"|\b[Ss]tream sync(?:hronize)? timeout\b"
            # HCCL's topology exchange at a communicator's start, its server waiting for every rank and its
            # agents for the server (``topo exchange server get socket timeout! timeout[720 s]``, ``topo
            # exchange agent get socket timeout!``)
            r"|\bget socket timeout\b"
            # CANN's runtime under HCCL on a notify another NPU never set (EI0002's ``notify wait timeout``)
            r"|\b[Nn]otify wait timeout\b"
            # Open MPI's openib help text on the InfiniBand retry count (help-mpi-btl-openib.txt)
            r"|[Rr]etry count between two MPI processes has been\s{1,4}exceeded"
            # PMIx's status by name in its error log (``PMIX ERROR: TIMEOUT in file …``), and its constant
            r"|PMIX ERROR: TIMEOUT\b|\bPMIX_ERR_TIMEOUT\b"
            # a communication kernel's roles waiting on their peers' data (DeepEP's ``forwarder timeout``,
            # ``NVL receiver timeout``, ``timeout for dispatch senders``)
            r"|\b(?:forwarder|receiver|sender|coordinator)s? timeout\b"
            r"|\btimeout for (?:dispatch|combine) (?:senders|receivers|forwarders)\b"
            # a launcher waiting for a process it started to call back (charmrun.C: ``Timeout waiting for
            # node-program to connect``)
            r"|\b[Tt]imeout waiting for [\w -]{1,40} to (?:connect|respond|answer|start)\b"
        ),
    ),
    (
        "connect",
        re.compile(
            r"[Ff]ailed to (?:TCP )?(?:connect|accept|bind|listen)\b"
            r"|[Cc]ould(?:n't| not) (?:connect|accept)\b"
            r"|[Uu]nable to (?:connect|accept)\b"
            r"|[Uu]nable to (?:complete|establish) an? (?:TCP )?connection\b"
            r"|[Cc]onnect(?:ion)? (?:failed|error)\b|connect\(\) failed"
            r"|accept\(\) failed|[Ss]ocket (?:Connect|Accept|Bind|Listen) Error\b|connect to \(failed\)"
            r"|[Pp]roxy [Cc]all to rank \d{1,7} failed|\b[Bb]ind(?:\(\))? failed\b"
            # a socket bound to its local address before it connects, the bind failing (Open MPI's TCP BTL,
            # btl_tcp_endpoint.c's start_connect: ``bind on local address (10.0.0.1:0) failed: Address already
            # in use (98)``, its ephemeral ports spent)
            r"|\b[Bb]ind (?:on|to) (?:the )?local (?:address|port) \([^)\n]{1,300}\) failed\b"
            # Slurm's error strings for an RPC to a node's slurmd that could not be made
            r"|[Cc]ommunication connection failure|slurm_\w{1,40}: [Tt]ransport endpoint is not connected"
            # gRPC core's status detail for a channel that never connected (``grpc error:Connect Failed``),
            # NVSHMEM's endpoints to its peers (``connect EPS failed``, ``nvshmem setup connections failed``)
            r"|\bConnect Failed\b|\bconnect EPS failed\b|\bsetup connections failed\b"
            # HCCL's topology exchange agent on the server it could not reach (``TopoExchangeAgent: connect
            # server[127.10.0.1 : 60000] failed``)
            r"|\bconnect server ?\[[^\]\n]{1,80}\] failed\b"
            # Julia's Distributed on a worker its peer never connected to (``peer 6 has not connected to 7``,
            # ``peer 3 didn't connect to 1 within 60.0 seconds``)
            r"|\bpeer \d{1,7} (?:has not|didn't) connect(?:ed)? to \d"
            # MPICH2's smpd sock layer having tried every address of a host (``Connect on sock (host=h,
            # port=8676) failed, exhaused all end points``)
            r"|\bConnect on sock \([^)\n]{1,300}\) failed\b"
            # a library giving up binding or connecting its socket after its own retries (BytePS's ps-lite
            # van: ``zmq_van.h:NN: Reached max retry for bind: Address already in use. errno = 98``)
            r"|[Rr]eached (?:the )?max(?:imum)? retr(?:y|ies) (?:for|to|on) (?:bind|connect)\b"
            # a connect to an address that failed, the address between (ps-lite's van: ``connect to
            # tcp://10.0.4.2:9000 failed: No such device``)
            r"|\bconnect to (?:tcp|ipc|inproc)://[\w.:\[\]-]{1,200} failed\b"
            # a queue pair that could not be moved to its connected state (ready to receive / send) with the
            # peer's address: ``ibv_modify_qp failed``, and NVSHMEM's error macro on its InfiniBand
            # transports'
            # endpoint calls (``…/transport/ibrc/ibrc.cpp:1433: non-zero status: 7``, its message on other
            # lines)
            r"|\bibv_modify_qp failed\b"
            # MLX's ring backend opening its sockets to its neighbours (``Couldn't bind socket (error: 98)``,
            # ``Couldn't listen (error: 98)``, ``Accept failed (error: 24)``)
            r"|\b(?:Couldn't (?:bind socket|listen)|Accept failed) \(error: \d"
            r"|/transport/(?:ibrc|ibgda|ibdevx)/\w{1,60}\.cpp:\d{1,6}: non-zero status: -?\d{1,4}"
        ),
    ),
    (
        "lost",
        re.compile(
            r"[Pp]eer (?:process has unexpectedly )?(?:closed|disconnected|lost|went away|exited|died)"
            r"|[Cc]onnection (?:closed|lost"
            r"|aborted)"
            r"|[Ss]ocket closed|[Cc]losed by (?:remote|peer)|ECONNABORTED\b"
            r"|[Ss]oftware caused connection abort"
            r"|[Ll]ost (?:connection|contact|communication|its peer|a peer)|[Hh]eartbeat (?:timeout"
            r"|failure|missed)"
            r"|another task died|[Tt]ask \S{1,80} (?:has )?(?:died|failed|been lost)"
            r"|[Uu]nexpected EOF|got 0 bytes"
            r"|[Ff]ailed to recv|[Ff]ailed to send|[Uu]nresponsive (?:remote|receiver|peer)"
            # NCCL's (RCCL's) proxy thread on its socket to a peer (``Socket recv failed while polling``)
            r"|[Ss]ocket (?:recv|send) failed\b"
            r"|LIFELINE LOST\b|[Ll]ifeline (?:to \S{1,80} )?lost\b|[Cc]onnection to lifeline \S{1,80} lost\b"
            r"|LOST[_-]CONNECTION(?:[_-]TO[_-](?:SERVER|CLIENT|PEER))?\b"
            r"|assert \(!closed\) failed"
            # Open MPI's out-of-band TCP messaging between its daemons finding a peer's connection broken
            # (``mca_oob_tcp_peer_send_handler: invalid connection state (6) on socket 47``), a runtime
            # detecting one of its daemons failed (ORCM's ``has detected failure of an orcm daemon``)
            r"|\binvalid connection state \(\d{1,2}\)"
            r"|[Hh]as detected (?:the )?failure of an? (?:\w{1,10} )?daemon\b"
            # NCCL's proxy service thread closing a peer's connection on an operation that failed (``[Service
            # thread] Error encountered progressing operation=Connect, res=3, closing connection``, proxy.cc),
            # and its IB transport's port going down under it (``Got async event : port error``, net_ib.cc)
            r"|[Ee]rror encountered progressing operation=\w{1,30}"
            r"|[Gg]ot async event ?: (?:port error|local catastrophic error|device fatal)"
            # XGBoost's rabit finalizing a worker that could no longer tell its tracker and peers it is done
            # (rabit's c_api.cc, RabitFinalize: ``Failed to shutdown RABIT worker.``, raised by XGBoost4J as
            # its XGBoostError)
            r"|\bFailed to shutdown RABIT worker\b"
            # Dask's comm layer on a connection already closed (distributed/scheduler.py: ``Tried writing to
            # closed comm: {'op': 'lost-data', …}``; ``CommClosedError``)
            r"|\b(?:writing to|reading from|read from|write to) (?:a )?closed comm\b|\bCommClosedError\b"
            # Ray's GCS on a node whose raylet stopped answering (``has been marked dead because the detector
            # has missed too many heartbeats from it``)
            r"|\bhas been marked dead because the (?:monitor|detector) has missed too many heartbeats\b"
            # MLX's ring backend, its socket to a neighbour failing a send or receive (``Receiving from
            # socket 51 failed with errno 14``, ``Sending to socket 3 failed with errno 22``), then giving up
            r"|\b(?:Receiving from|Sending to) socket \d{1,6} failed with errno \d"
            r"|\bToo many send/recv errors\b"
        ),
    ),
    (
        "stalled",
        re.compile(
            r"[Ww]aiting for (?:the )?remainder of ranks|\[(?:missing|ready) ranks: \d"
            r"|[Ss]talled (?:ops|ranks):|[Mm]issing ranks:|[Ss]tall (?:detected|inspector)"
            r"|for \d{1,9} (?:seconds|ms) and may be stuck\b|not all of them arrived on time"
            # Horovod's stall warning by its opening words, where a title or a wrapped log cut the rest
            # (horovod/common/stall_inspector.cc: ``One or more tensors were submitted to be reduced,
            # gathered or broadcasted by subset of ranks and are waiting for remainder of ranks …``)
            r"|One or more tensors were submitted to be reduced\b"
        ),
    ),
    (
        "aborted",
        re.compile(
            r"StatusCode\.ABORTED|grpc_status\"?:? ?10\b|AbortedError\b|ABORTED:"
            r"|[Cc]ommunicator (?:was )?aborted"
            r"|Collective ops is aborted"
            # a collective of XGBoost's rabit (``utils.h:NN: Allreduce failed``) or another library's
            r"|\b(?:All[Rr]educe|All[Gg]ather|Broadcast|Reduce[Ss]catter) failed\b"
            # Habana's process group on an HCCL collective that failed (``Collective call returned error``)
            r"|[Cc]ollective call returned (?:an )?error\b"
            # a transport library's internal assertion, its source file and the condition (PSM2 / PSM3's
            # ``Assertion failure at psm3/ptl_am/ptl.c:NN: cond``)
            r"|\bAssertion failure at [\w/]{1,80}\.c:\d{1,6}: "
        ),
    ),
    (
        "completion",
        re.compile(
            r"err: \d{1,6}, (?:message|prov_err): |[Cc]ompletion (?:with |queue )?error\b"
            r"|[Ee]rror completion\b|[Ww]ork completion (?:status|error)\b|wc_status\b"
            r"|\bOFI (?:poll|cq_read|call fi_cq_read\w{0,10}) failed|handle_cq_error\b"
            # Open MPI's OFI MTL: a completion's error entry, or a request's callback returning one
            r"|[Ee]rror returned (?:from fi_\w{1,30}|by request event callback)\b"
            # a libfabric call failing in another library's words (Charm++: ``OFI::LrtsInit::fi_tsend error``)
            r"|\bfi_(?:t?send|t?recv|t?inject|read|write|cq_\w{1,20})\w{0,4}(?:\(\))?"
            r" (?:error|failed)\b"
            # libfabric's error entry in its own words (``err: Input/output error (5) prov_errno: …``), and
            # a provider that could not even report it (EFA's ``Unable to write to EQ``)
            r"|\berr: [\w /-]{1,60} \(\d{1,4}\) prov_errno: |[Uu]nable to write to EQ\b"
            # a completion's error entry as a library relays it (Mercury's NA OFI plugin: ``fi_cq_readerr got
            # err: 5(Input/output error), prov_errno: …``)
            r"|\bfi_cq_readerr(?:\(\))? got err: -?\d"
        ),
    ),
    (
        "backend",
        # raised (``torch.distributed.DistBackendError: …``, Ray's ``RayTaskError(DistBackendError): …``)
        # torch_npu's own code for an HCCL call that failed (``ERR02200 DIST call hccl api failed``)
        re.compile(r"\bDistBackendError\)?:|\bDIST call hccl api failed\b"),
    ),
)
"""In order of preference: the first verb found in a message is what it says (a failed completion last:
a verb above says more where a message holds both)."""

# What makes a line no failure, whatever words it holds.
_NOT_A_FAILURE = (
    re.compile(r"(?<!maybe )[Rr]etrying|[Ww]ill retry|[Rr]etry (?:\d|connect|in\b|after)|[Tt]rying again"),
    # (a c10d warning's source file under the whole build path where torch printed it so: Windows builds'
    # ``[W C:\cb\pytorch_1000000000000\work\torch\csrc\distributed\c10d\socket.cpp:601]``)
    re.compile(
        r"NCCL INFO |UCX {1,3}INFO|<(?:info|debug|trace)>|\[W(?:\d{3,4}| )[^\]\n]{0,240}(?:socket|TCPStore)"
    ),
    re.compile(
        r"UserWarning|FutureWarning|DeprecationWarning|[Ss]ucceeded|[Rr]econnected|(?<!not )[Cc]onnected to"
    ),
    re.compile(r"^\s{0,16}except [\w.(), ]{1,200}:"),
    # ProcessGroupNCCL's heartbeat monitor failing to read or write its dump flag in the store as the job
    # shuts down (``Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down
    # too early)``): a monitor's note, the store gone first, no mesh failing
    re.compile(
        r"\bFailed to check the \"should dump\" flag on TCPStore|TCPStore server has shut down too early"
        r"|\bFailed to get exception dump flag from the global store|\bFailed to set dump signal in tcpstore"
    ),
)
"""A retry, an INFO / DEBUG line or a c10d warning, a Python warning, a success, a handler's ``except …:``
(a traceback's source line or a code listing), the heartbeat monitor's note on its dump flag; not a peer that
has *not* connected to another."""
_RETRY = _NOT_A_FAILURE[0]
_HANDLED_WITHIN = 3
"""A failure followed within this many messages by the same library saying it retries is handled."""
STARTUP_BARRIER = re.compile(
    r"PjRT_Client_Connect|Wait_for_all_tasks_to_register|[Cc]luster registration failed"
    r"|RegisterTask\b|[Ff]ailed to (?:register|connect) (?:with |to )?(?:the )?coordination service"
)
"""The start-up barrier of the JAX / TensorFlow coordination service, where every task registers: its
failure is a missed rendezvous (:mod:`consumers.rules.rendezvous`), not the mesh breaking later."""
HOROVOD_START = re.compile(
    r"Timed out waiting for (?P<activity>[\w ]{1,60}?)\. Please check connectivity between servers"
    # the frame of its timeout's check, where a traceback kept it and lost the message under it
    # (``timeout.check_time_out_for('tasks to start')``)
    r"|\bcheck_time_out_for\('(?P<activity2>[\w ]{1,60}?)'\)"
)
"""Horovod's driver (``horovodrun``, Horovod on Ray or Spark) giving up on its tasks registering with it
(``Timed out waiting for tasks to start. Please check connectivity between servers. You may need to
increase the --start-timeout parameter …``, or the frame of its check where a traceback lost the message):
the tasks never met the driver."""
JULIA_MASTER_WAIT = re.compile(
    r"\bMaster process \(id 1\) could not connect within \d{1,6}(?:\.\d{1,3})? seconds"
)
"""A Julia worker that ``addprocs`` launched waiting for the master to connect to it and giving up
(Distributed's cluster.jl, ``check_master_connect``: ``Master process (id 1) could not connect within 60.0
seconds.`` then ``exiting.``, relayed as ``From worker N:``): the master and its workers never met, a missed
rendezvous (:mod:`consumers.rules.rendezvous`), not the workers' mesh breaking later."""
DASK_SCHEDULER = re.compile(
    r"\bTimed out (?:trying to connect to|during handshake while connecting to) "
    r"'?(?:tcp|tls|ucx)://[^\s']{1,200}:8786'? after \d"
)
"""A Dask client or worker giving up on reaching the scheduler at its port (distributed/comm/core.py's
``connect``: ``OSError: Timed out trying to connect to 'tcp://172.17.0.2:8786' after 10 s``, its handshake's
``Timed out during handshake while connecting to …``; 8786 is the scheduler's): they never met it, a missed
rendezvous (:mod:`consumers.rules.rendezvous`), not a connection between workers lost later."""
C10D_STORE = re.compile(
    r"The client socket has (?:timed out after|failed to connect to any network address)"
    r"|TCP client failed to connect/validate|connect\(\) timed out\. Original timeout"
    r"|The server socket has failed to (?:listen|bind)"
    r"|via c10d key-value store by key '[^'\n]{1,120}', but store->get\("
)
"""The c10d store's client (``socket.cpp``, ``TCPStore.cpp``) failing to reach the store that rank 0
hosts, or its server failing to listen on the store's port, or a rank failing to get NCCL's unique id
from it: the processes never met, a missed
rendezvous (:mod:`consumers.rules.rendezvous`), not a mesh that broke."""
_NCCL_TRAIL = re.compile(
    r"NCCL INFO (?P<file>(?:misc/socket|bootstrap|proxy|transport/net\w{0,20}|misc/ibvwrap)\.cc):\d{1,6}"
    r" -> (?P<code>[1-9]\d?)\b"
)
"""The first line of NCCL's error trail (``file.cc:NN -> code``, the return code passed up each caller),
where it starts in NCCL's socket, bootstrap, proxy or network code: a failure of the mesh even
where no WARN line says how."""
_ANY_TRAIL = re.compile(r"NCCL INFO [\w/.]{1,80}\.cc:\d{1,6} -> \d")
_DASHES = re.compile(r"^-{20,200}\s{0,8}$")
_INDENTED = re.compile(r"^(?:\t| {2,16})\S")
_FRAME = re.compile(r"^\s{0,16}(?:File \"|at |#\d{1,3} )")
_PE_CONTINUED = re.compile(r"^\[\d{4}\] {6,10}\S")
"""Sandia OpenSHMEM's message under its ``[0003] ERROR: init.c:NN: function`` line: the PE's tag, then the
message indented (``[0003]        Transport init failed (-38)``)."""
_WRAPPED = re.compile(r"[a-z,]$")
_LOWER_START = re.compile(r"^[a-z]{1,20}[ ,]")
_DASHED_END = re.compile(r"[^\s-]--$")
"""A message whose reason its program prints on the next line after two dashes (charmrun.C: ``Charmrun> error
on request socket to node 0 '127.0.0.1'--`` then ``Socket closed before recv.``)."""
_REASON_START = re.compile(r"^: [A-Za-z]")
"""A message's reason on a line of its own, its colon first (``: Address already in use (98)`` under Open
MPI's ``bind on local address (…) failed``): a paste broke the line before the colon."""
"""A sentence wrapped mid-way: the line ends inside it and the next carries on in lower case (a help
text whose dashed lines were cut off)."""
_BLOCK_LINES = 30
_CONTINUED_LINES = 4
_MESSAGE_CHARS = 1200
_FRAME_LIBRARIES: tuple[tuple[str, str], ...] = (
    (r"/deepspeed/launcher/|/accelerate/commands/", "launcher"),
    (r"/habana_frameworks/torch/distributed/", "gaudi"),
    (r"/torch/distributed/", "torch"),
    (r"/horovod/", "horovod"),
    (r"/xgboost/", "xgboost"),
    (r"/jax/_src/distributed|/jax/distributed", "jax"),
    (r"/tensorflow/python/(?:distribute|training/server_lib)", "tf"),
)
"""A package's path in a traceback frame, and the library whose exceptions it raises."""
_FRAME_PATTERNS = tuple((re.compile(path), key) for path, key in _FRAME_LIBRARIES)


_PROCESS_GROUP_CALL = re.compile(
    r"\bdefault_pg\.\w|\b_set_sequence_number_for_group\("
    r"|\b(?:dist|torch\.distributed|c10d)\.(?:all_reduce|all_gather\w{0,20}|broadcast\w{0,20}|barrier"
    r"|reduce_scatter\w{0,20}|all_to_all\w{0,10}|send|recv|isend|irecv|monitored_barrier)\("
)
"""The source line of a traceback's innermost frame calling torch.distributed's process group
(``default_pg._set_sequence_number_for_group()``, ``dist.all_reduce(t)``), where the frame's own
``File`` line was cut: the exception under it is torch's."""

LIVE_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((name, pattern) for name, pattern in VERBS if name != "stalled"),
    ("help-block", _DASHES),
    ("continued", re.compile(r"(?:NCCL WARN |Last error)[^\n]{0,400}:\s{0,4}$")),
    # charmrun's error on a node, its reason on the next line after a colon or two dashes (charmrun.C)
    ("charmrun-continued", re.compile(r"Charmrun[>:] [^\n]{0,400}[^\s-](?::|--)\s{0,4}$")),
    # Sandia OpenSHMEM's error header, its message on the PE-tagged line under it (:data:`_PE_CONTINUED`)
    ("pe-error", re.compile(r"^\[\d{4}\] ERROR: \w{1,60}\.c:\d{1,6}: ")),
    (
        "raised-in",
        re.compile(r"File \"[^\"]{0,300}?(?:" + "|".join(path for path, _ in _FRAME_LIBRARIES) + ")"),
    ),
    ("process-group-call", _PROCESS_GROUP_CALL),
)
"""What the live reader keeps a line for (with the lines after it): a verb of the mesh, the start of
a help block, a message whose reason follows on the next line (NCCL's ``Last error:``, charmrun's ``error
attaching to node 'n1':`` or ``… node 0 'n1'--``, Sandia OpenSHMEM's
``[PE] ERROR: file.c:NN: function`` header), a traceback frame in a library's package or a process
group's call as its source line (the exception after it is that library's). Not a stall report: seen
live, it is the hang's (``hang/horovod-stall``); only the failure-time tail makes it a cause. Nor NCCL's
error trail (INFO lines): it is read from the failure-time tail."""


def library_of(text: str) -> Library | None:
    """The library whose format ``text`` shows, if any."""
    return next((lib for lib in LIBRARIES if lib.format.search(text) is not None), None)


def verb_of(text: str) -> Verb | None:
    """What ``text`` says about the mesh, if anything."""
    found = _verb_at(text)
    return found[0] if found is not None else None


def _verb_at(text: str) -> tuple[Verb, int] | None:
    """What ``text`` says about the mesh and where it says it: a hint before that (``to avoid …``)
    makes it a mention; advice after it (an Open MPI help text's ``This typically indicates …``) does
    not."""
    return next(
        ((verb, m.start()) for verb, pattern in VERBS if (m := pattern.search(text)) is not None), None
    )


@lru_cache(maxsize=512)
def logical_lines(tail: tuple[str, ...]) -> tuple[tuple[int, str, bool], ...]:
    """``tail`` as messages: (index of the first line, the message, whether it is a help block
    between dashed lines), continued lines joined."""
    lines = [strip_tag(line) for line in bounded(tail)]
    found: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(lines):
        text = lines[i]
        if _DASHES.match(text):
            end = next(
                (j for j in range(i + 1, min(len(lines), i + _BLOCK_LINES)) if _DASHES.match(lines[j])), None
            )
            if end is None and len(lines) - i <= _BLOCK_LINES:
                end = len(lines)  # a help block the tail cut off before its closing dashes
            if end is not None:
                body = " ".join(line.strip() for line in lines[i + 1 : end] if line.strip())
                if body:
                    found.append((i + 1, body[:_MESSAGE_CHARS], True))
                i = end + 1
                continue
            i += 1
            continue
        joined = [text.strip()]
        j = i + 1
        if library_of(text) is not None:
            while j < len(lines) and j <= i + _CONTINUED_LINES and _continues(joined[-1], lines[j]):
                joined.append(lines[j].strip())
                j += 1
        found.append((i, " ".join(joined)[:_MESSAGE_CHARS], False))
        i = j
    return tuple(found)


def _continues(previous: str, line: str) -> bool:
    """Whether ``line`` carries on the message of ``previous``: after a closing ``:``, or indented."""
    if not line.strip() or _DASHES.match(line) or _FRAME.match(line):
        return False
    return (
        previous.endswith(":")
        or _INDENTED.match(line) is not None
        or _PE_CONTINUED.match(line) is not None
        or (_WRAPPED.search(previous) is not None and _LOWER_START.match(line) is not None)
        or _REASON_START.match(line) is not None
        or _DASHED_END.search(previous) is not None
    )


@lru_cache(maxsize=512)
def family_failures(tail: tuple[str, ...]) -> tuple[Hit, ...]:
    """Every message of ``tail`` that a known library printed about the mesh, in log order."""
    raw = bounded(tail)
    hits: list[Hit] = []
    messages = logical_lines(tail)
    for n, (index, text, block) in enumerate(messages):
        trail = _trail(raw, index)
        library: Library | None
        said: Verb | None
        if trail:
            library, said = _NCCL, trail
        elif (
            any(p.search(text) for p in _NOT_A_FAILURE)
            or STARTUP_BARRIER.search(text)
            or C10D_STORE.search(text)
            or JULIA_MASTER_WAIT.search(text)
            or DASK_SCHEDULER.search(text)
        ):
            continue
        else:
            library = library_of(text) or (_HELP_BLOCK if block else None) or _raised_in(raw, index, text)
            found = _verb_at(text) if library is not None else None
            if (
                library is None
                or found is None
                or is_mention(text, found[1])
                or (_NET_PLUGIN.search(text) is not None and fell_back(tail, index))
                or _retried(messages[n + 1 : n + 1 + _HANDLED_WITHIN], library)
                or went_on(raw, index)
            ):
                continue
            said = "lost" if library.key == "nccl" and _PROXY_CLOSED.search(text) else found[0]
        rank = output_rank(raw[index])
        signature = Signature(
            f"family-{library.key}-{said}", library.name, words(library, said, text), library.format
        )
        groups = (("library", library.key), ("verb", said))
        hits.append(Hit(signature, text, index, rank if rank is not None else message_rank(text), groups))
    return tuple(hits)


_NET_PLUGIN = re.compile(r"NET/OFI|NET/Plugin|nccl_net_ofi|libnccl-net")
"""NCCL's network plugin (aws-ofi-nccl): its failure before NCCL chose a network is a fallback."""
_EXCEPTION = re.compile(r"^\s{0,8}[A-Za-z_][\w.]{0,120}(?:Error|Exception): ")
_FRAME_FILE = re.compile(r"^\s{0,16}File \"(?P<path>[^\"]{1,300})\", line \d")
_TRACEBACK_LINES = 12
_JULIA_ERROR = re.compile(r"^\s{0,16}(?:ERROR: |nested task error: )?[A-Z]\w{1,40}(?:Error|Exception): ")
"""A Julia exception as its REPL or a failed task shows it (``ERROR: IOError: …``, a TaskFailedException's
``nested task error: IOError: connect: connection refused (ECONNREFUSED)``), its stack trace below it."""
_JULIA_DISTRIBUTED_FRAME = re.compile(
    r"^\s{0,16}(?:\[\d{1,3}\] (?:worker_from_id|connect_to_peer|connect_w2w|create_worker|send_msg\w{0,10})\("
    r"|@ Distributed )"
)
"""A frame of that trace in Distributed's own code: Julia 1.6 and later give its module on the line under the
call (``@ Distributed …/Distributed/src/cluster.jl:1082``), and the calls that connect one worker to another
(``[1] worker_from_id(pg::Distributed.ProcessGroup, i::Int64)``)."""


def _raised_in(raw: tuple[str, ...], index: int, text: str) -> Library | None:
    """The library a Python exception closing a traceback was raised in (its innermost frame's
    package), where its message names none: DeepSpeed's runner raising ``RuntimeError: … was not
    reachable via ssh``."""
    if index + 1 < len(raw) and (c10 := _C10_RAISED.search(raw[index + 1])) is not None:
        return _library_of_path(c10["path"])  # a C++ exception, c10's account of where it was raised after
    if _JULIA_ERROR.match(text) is not None and any(
        _JULIA_DISTRIBUTED_FRAME.search(line) for line in raw[index + 1 : index + 1 + _TRACEBACK_LINES]
    ):
        return next(lib for lib in LIBRARIES if lib.key == "julia")  # Julia prints its stack trace below
    if _EXCEPTION.match(text) is None:
        return None
    if index > 0 and _PROCESS_GROUP_CALL.search(raw[index - 1]) is not None:
        return _library_of_path("/torch/distributed/")  # the innermost frame's source: a process group's call
    for line in reversed(raw[max(0, index - _TRACEBACK_LINES) : index]):
        frame = _FRAME_FILE.match(line)
        if frame is not None:
            return _library_of_path(frame.group("path"))
    return None


def _library_of_path(path: str) -> Library | None:
    key = next((key for pattern, key in _FRAME_PATTERNS if pattern.search(path)), None)
    return next((lib for lib in LIBRARIES if lib.key == key), None)


_C10_RAISED = re.compile(r"\bException raised from \w{1,80}(?:\(\))? at (?P<path>/[^\s:]{1,300}):\d")
"""c10's line under a C++ exception's message: the source that raised it (``Exception raised from
operator() at …/habana_frameworks/torch/distributed/hccl/process_group_hccl_base.cpp:286``)."""


def _trail(raw: tuple[str, ...], index: int) -> Verb | None:
    """``"trail"`` where NCCL's error trail starts at ``raw[index]`` in its mesh code."""
    if _NCCL_TRAIL.search(raw[index]) is None:
        return None
    return None if index > 0 and _ANY_TRAIL.search(raw[index - 1]) else "trail"


def _retried(after: tuple[tuple[int, str, bool], ...], library: Library) -> bool:
    """Whether one of the messages ``after`` a failure says the same library retries it."""
    return any(_RETRY.search(text) and library.format.search(text) for _, text, _ in after)


_NCCL = next(lib for lib in LIBRARIES if lib.key == "nccl")
_HELP_BLOCK = next(lib for lib in LIBRARIES if lib.key == "ompi")
"""A help block between dashed lines is Open MPI's (``opal_show_help``) where it names no other."""


def verb(hit: Hit) -> Verb | None:
    """The verb of a family hit (``None`` for another signature)."""
    said = hit.group("verb")
    return next((name for name in get_args(Verb) if name == said), None)


def library_key(hit: Hit) -> str | None:
    """The library key of a family hit (``None`` for another signature)."""
    return hit.group("library")


# ------------------------------------------------------------------- wording

_VERB_WORDS: dict[Verb, str] = {
    "spawn": "could not start processes on a host (the launch failed before the ranks ran)",
    "alloc": "could not allocate or register memory for its transport",
    "resource": "could not open a resource of its transport (an address vector, an endpoint, a queue pair): "
    "the fabric's devices or provider are missing or misconfigured in the pod",
    "handshake": "accepted a connection that did not speak its protocol (a wrong handshake): a stale rank of "
    "an earlier run, another program on the port, or ranks running different library versions",
    "connect": "could not establish a connection with another rank (or its coordinator)",
    "stalled": "a collective stalled: some ranks never submitted it (the ranks it names as missing "
    "stopped, hang or run a different sequence of collectives)",
    "trail": "a socket or bootstrap call to another rank failed (NCCL's error trail starts in its network "
    "code): the peer died or the traffic between the pods is blocked",
    "refused": "a connection to another rank was refused: nothing listened on that port, or something in "
    "between rejected it",
    "reset": "a connection to another rank was reset: the peer process died or something in between cut it",
    "unreachable": "another rank's host could not be reached (no route, an unresolved name, or the peer's "
    "service unavailable)",
    "timed-out": "a connection or an exchange with another rank timed out",
    "lost": "lost a peer: the other side closed the connection or died",
    "aborted": "the communication was aborted",
    "completion": "a transfer with another rank failed on the fabric (its completion reported an error): "
    "the peer died, or the fabric between the pods dropped the transfer or refused the peer's address",
    "backend": "the process group's backend (NCCL or Gloo) failed a collective or its communicator (torch "
    "raised DistBackendError): a peer died, timed out, or the network between the pods failed",
}
# (library, verb) -> what it means for that library, where it says more than the verb alone.
_SPECIFIC: dict[tuple[str, Verb], str] = {
    ("xla", "stalled"): "XLA's collective rendezvous stalled: some devices' threads never joined the clique "
    "(a rank stopped, hangs or runs a different program)",
    ("prrte", "lost"): "PRRTE lost a daemon's lifeline: the connection between the daemons broke (a node or "
    "pod died, or a firewall cut it)",
    (
        "ssh",
        "spawn",
    ): "ssh could not reach a worker (ssh itself exited 255: the host is unknown, its sshd is not "
    "listening, or the key was refused), so the launcher started nothing there",
    ("hydra", "lost"): "Hydra's process manager lost a proxy's connection (a host's proxy or its ranks died)",
    (
        "psm2",
        "resource",
    ): "PSM2 could not open an Omni-Path (hfi) endpoint: the device is missing from the pod "
    "or its link is down",
    (
        "efa",
        "unreachable",
    ): "the EFA provider could not reach a peer: the security group must allow all traffic "
    "from itself, and every pod needs its EFA devices",
    (
        "efa",
        "timed-out",
    ): "the EFA provider timed out reaching a peer: the security group must allow all traffic "
    "from itself, and every pod needs its EFA devices",
    (
        "efa",
        "completion",
    ): "the EFA provider reported a failed transfer with a peer: the security group must allow all "
    "traffic from itself, every pod needs its EFA devices, and the peer must still run",
    (
        "efa",
        "lost",
    ): "the EFA provider found a peer unresponsive: the peer's process died, or the security group does "
    "not allow all traffic from itself",
    (
        "launcher",
        "unreachable",
    ): "the DeepSpeed / Accelerate launcher could not reach a host of its hostfile over ssh: the worker "
    "pods' names in the hostfile, and passwordless ssh from the launcher to them",
    (
        "horovod",
        "stalled",
    ): "a collective stalled: Horovod's stall inspector found it submitted by only some ranks (the ranks "
    "it names as missing, or all but the ready ones, stopped, hang or run a different sequence of "
    "collectives)",
    ("efa", "alloc"): "EFA could not register memory (the provider's fi_mr_reg, or the kernel driver's "
    "REG_MR command on the device, err -12 its ENOMEM): the pods need an unlimited memlock limit (IPC_LOCK) "
    "and huge pages, and the processes on the device must stay within its memory registrations",
    (
        "libfabric",
        "alloc",
    ): "the libfabric provider could not register memory: raise the memlock limit (IPC_LOCK)",
    ("ucx", "alloc"): "UCX could not register memory for RDMA: raise the memlock limit (IPC_LOCK)",
    (
        "ucx",
        "reset",
    ): "UCX's connection to another process was reset by that peer (UCS_ERR_CONNECTION_RESET): "
    "the peer's process exited or closed its endpoint, or the network between the pods dropped the "
    "connection",
    ("ucx", "unreachable"): "UCX could not reach another process (UCS_ERR_UNREACHABLE): no transport in "
    "UCX_TLS / UCX_NET_DEVICES reaches the peer's node, or the peer's address is wrong",
    ("psm2", "aborted"): "PSM (PSM2 on Omni-Path, PSM3 on Ethernet) failed one of its own assertions on a "
    "transfer between ranks and aborted the rank: a message's length did not match its request, as a rule "
    "a PSM bug in its shared-memory (ptl_am) or NIC path, or ranks running different PSM builds",
    (
        "grpc",
        "unreachable",
    ): "a gRPC channel found its peer UNAVAILABLE: the peer's pod (a parameter server, the "
    "chief or the coordinator) is gone, or the address it was given (its Service) is wrong",
    ("tf", "unreachable"): "TensorFlow's gRPC channel to another task is UNAVAILABLE: that task's pod (a "
    "parameter server or a worker) is gone, or its Service address is wrong",
    (
        "tf",
        "lost",
    ): "TensorFlow lost another task of the cluster (its socket closed): that pod died or restarted",
    ("tf", "aborted"): "TensorFlow's collective ops were aborted because another task failed",
    (
        "jax",
        "timed-out",
    ): "JAX's distributed runtime timed out waiting for the other processes (a barrier or the "
    "coordinator): not every process started, or the coordinator address is wrong",
    (
        "jax",
        "unreachable",
    ): "JAX could not reach its coordinator (process 0): check the coordinator address and that its pod runs",
    ("jax", "lost"): "JAX's coordination service lost a task: another process died",
    (
        "coordination",
        "timed-out",
    ): "the coordination service timed out waiting for a task (a missed heartbeat or "
    "barrier): a process died or never started",
    ("coordination", "lost"): "the coordination service lost a task: another process died",
    (
        "xgboost",
        "refused",
    ): "XGBoost's workers could not connect to each other or to the tracker (refused): the "
    "tracker's address and port must be reachable from every worker",
    ("xgboost", "timed-out"): "XGBoost's collective timed out: a worker did not join the tracker in time",
    (
        "pmix",
        "unreachable",
    ): "PMIx could not reach the PMIx server of a node (its daemon): the launcher's daemons "
    "did not start or died",
    ("hydra", "spawn"): "Hydra could not launch its proxy or the program on a host (ssh, hydra_pmi_proxy or "
    "the executable missing there)",
    (
        "ompi",
        "spawn",
    ): "mpirun could not launch the program on a host (the executable or a library missing on "
    "the workers, or its daemons could not start)",
    (
        "prrte",
        "spawn",
    ): "prterun could not launch the program on a host (the executable or a library missing on "
    "the workers, or its daemons could not start)",
    ("intel-mpi", "spawn"): "Intel MPI's Hydra could not start its bootstrap proxy on a host (ssh or the "
    "launcher's credentials refused there, or hydra_bstrap_proxy missing)",
    ("xgboost", "connect"): "XGBoost's tracker and workers could not connect to each other: the tracker's "
    "address and port must be reachable from every worker",
    ("mpich", "unreachable"): "MPICH's OFI netmod had no address for a peer (FI_ADDR_NOTAVAIL): the peer's "
    "process is gone or was never connected",
    ("mvapich", "spawn"): "mpirun_rsh / mpispawn could not start the ranks on a host",
    ("slurm", "spawn"): "srun could not launch the job step's tasks on a node (its slurmd did not take "
    "the launch)",
    ("slurm", "connect"): "srun could not reach a node's slurmd to launch or run the job step's tasks "
    "(Slurm's RPC failed to connect)",
    ("slurm", "timed-out"): "srun's messages to a node's slurmd timed out (Slurm's RPC got no answer: the "
    "node's slurmd is down, overloaded, or the network between the nodes drops its port)",
    ("slurm", "unreachable"): "srun could not resolve or reach a node of the step (Slurm has no address "
    "for it)",
    (
        "launcher",
        "spawn",
    ): "the launcher could not start the workers on the hosts of its hostfile (pdsh / ssh)",
    ("ompi", "connect"): "Open MPI's TCP transport (btl_tcp) could not establish a connection with another "
    "process: a NetworkPolicy or firewall between the pods, or an interface that is not routable between "
    "them (--mca btl_tcp_if_include eth0)",
    ("mpich", "completion"): "MPICH's OFI netmod (ch4:ofi) found a failed transfer polling its completion "
    "queue: a peer died, or the provider (EFA: the security group, the devices) dropped or refused it",
    ("intel-mpi", "completion"): "the OFI netmod of MPICH / Intel MPI (ch4:ofi) found a failed transfer "
    "polling its completion queue: a peer died, or the provider (EFA: the security group, the devices) "
    "dropped or refused it",
    ("pmix", "lost"): "PMIx lost its connection to the PMIx server (the node's daemon, prted / orted): the "
    "daemon or its node died, or the launcher's tool (prun) lost the DVM",
    ("prrte", "unreachable"): "PRRTE's PMIx server or a daemon could not be reached (UNREACHABLE): prun / "
    "prterun lost the DVM, or a node's daemon is not running or a firewall cut it",
    ("dask", "lost"): "Dask's scheduler or a worker found its comm to a peer closed (it tried writing to or "
    "reading from it): that worker died (its nanny restarted it, out of memory, or its pod ended) or its "
    "network path broke, and the keys it held were lost",
    ("pslite", "connect"): "ps-lite's van (the parameter server's transport, under MXNet / BytePS) could "
    "not bind or connect its port: the port is in use, or the scheduler's address is not reachable from "
    "every pod",
    ("pslite", "refused"): "ps-lite's van could not connect to the scheduler or a server (refused): "
    "DMLC_PS_ROOT_URI / DMLC_PS_ROOT_PORT must name the scheduler's Service, and it must run",
    ("ray", "backend"): "a Ray Train worker's process group failed (torch's DistBackendError, re-raised by "
    "Ray through each actor): the NCCL / Gloo error of the first worker that failed is the cause",
    (
        "nccl",
        "refused",
    ): "NCCL's socket to another rank was refused: nothing listened there (the peer died) or a "
    "NetworkPolicy / sidecar rejected it",
    (
        "nccl",
        "unreachable",
    ): "NCCL could not reach another rank's address: the interface it picked is not routable "
    "between pods (NCCL_SOCKET_IFNAME)",
    ("nccl", "resource"): "NCCL's (RCCL's) p2p transport could not share GPU memory between the ranks of a "
    "host (an IPC handle of the CUDA / HIP runtime failed): the local ranks' containers cannot open each "
    "other's device memory (separate containers without hostIPC, or GPUs not visible to both)",
    ("mpich", "resource"): "MPI_Init failed in the MPICH-family library (MPICH, MVAPICH2): its channel to "
    "the other ranks (the PMI process manager or the network device) could not be set up",
    ("nccl", "aborted"): "PyTorch tore down NCCL's communicator after a collective on it failed or timed "
    "out (its watchdog's abort): a peer rank died, hung or lost its network path first",
    ("xgboost", "aborted"): "XGBoost's collective (rabit) failed an allreduce: a worker died or its "
    "connection to the others broke (the tracker's log names the worker)",
    ("ompi-ofi", "completion"): "Open MPI's OFI MTL got an error completing a transfer through libfabric "
    "and aborted the job: a peer died, or the provider (EFA: the security group, the devices) dropped it",
    (
        "oneccl",
        "spawn",
    ): "oneCCL could not start its worker threads (pthread_create failed; EINVAL, 22, where "
    "CCL_WORKER_AFFINITY pins them to cores the pod's cpuset does not hold, or more workers than its CPUs)",
    ("oneccl", "resource"): "oneCCL's transport (its ATL over libfabric) could not open a network provider: "
    "the provider it asks for (FI_PROVIDER, CCL_ATL_TRANSPORT) or the devices it needs are not in the pod",
    ("mlx-ring", "lost"): "MLX's ring backend failed sends or receives on its TCP socket to a neighbouring "
    "rank (the errno it printed: 104/32 the neighbour gone or its connection reset; 14 EFAULT or 22 EINVAL "
    "a buffer the kernel refused, a fault of that MLX version's transfer): the ring's collective could not "
    "go on",
    ("mlx-ring", "connect"): "MLX's ring backend could not open its sockets to its neighbouring ranks (the "
    "address of the hostfile not reachable, or its port taken or refused)",
    ("hpx", "resource"): "HPX's libfabric parcelport could not set up its transport: fi_getinfo found no "
    "libfabric provider matching what it asks (the provider it was built for, or its devices, are missing in "
    "the pod), so the localities never connected",
    ("ray-gcs", "lost"): "Ray's GCS marked a node of the cluster dead: its raylet stopped answering the "
    "heartbeats (it crashed, was killed — often for memory — or its pod or network went away), and the tasks "
    "and actors on it were lost",
    ("ascend-rt", "timed-out"): "an NPU's stream did not finish its tasks within the runtime's timeout "
    "(CANN's stream synchronize): in a job of several NPUs, a collective waiting for a rank that never came "
    "(it is stuck or died) or for an NPU network that does not carry its traffic",
    ("hccl", "timed-out"): "HCCL timed out waiting on another NPU's rank (a socket it waited for was not "
    "connected or sent nothing in time): that rank is stuck, died, or its NPU network is unreachable",
    ("hccl", "backend"): "torch_npu's process group got an error from an HCCL call (ERR02200: the HCCL "
    "communicator failed to set up or to run a collective)",
    ("gaudi", "aborted"): "an HCCL collective on Habana Gaudi returned an error: a peer rank died or the "
    "Gaudi links between them failed",
    ("hccl", "resource"): "HCCL could not set up its transport to another NPU's rank (the link to it could "
    "not be created): that rank failed first (its own log shows why), or the NPU network between them is "
    "down",
    ("ucx", "timed-out"): "UCX timed out on its endpoint to another rank (the transport got no "
    "acknowledgement): the peer's process is gone, or the fabric between the nodes drops its packets",
    ("charm", "spawn"): "charmrun could not start the program on a host through its remote shell (ssh "
    "exited 255 there: the host is unknown, its sshd is not listening, or the key was refused), and gave "
    "up after its reconnection attempts",
    ("charm", "timed-out"): "charmrun timed out waiting for a node program to connect back to it: the "
    "program never started on that host, died before it connected, or its connection back to charmrun's port "
    "was blocked",
    ("charm", "lost"): "charmrun lost its connection to a node program (its request socket closed): that "
    "process died or could not reach charmrun back on its port",
    ("gasnet", "resource"): "GASNet's ofi-conduit could not open a libfabric object it needs (an endpoint, "
    "a domain): the provider GASNet chose (GASNET_OFI_PROVIDER / FI_PROVIDER) does not support what it "
    "asks, or its devices are missing in the pod",
    ("shmem", "resource"): "Sandia OpenSHMEM (under Intel SHMEM) could not initialise its OFI transport: "
    "the provider it asks for (SHMEM_OFI_PROVIDER, cxi / verbs / tcp) is missing in the pod, or it could "
    "not register the symmetric heap with it",
    ("mercury", "completion"): "Mercury's NA OFI plugin got an error completing a transfer (fi_cq_readerr): "
    "the peer's process died, or the provider (verbs, tcp, cxi) dropped the transfer",
    ("msmpi", "connect"): "MS-MPI could not reach the smpd service (its process manager; MPICH2's on "
    "Windows, which MS-MPI's comes from) on a host: smpd is not running there, or the host's firewall blocks "
    "its port (8677, or the one smpd -port set)",
    ("tensorpipe", "reset"): "torch.distributed.rpc's TensorPipe agent had its connection to a peer reset "
    "(an RPC's request or response failed): the worker at the other end died or restarted",
    ("tensorpipe", "lost"): "torch.distributed.rpc's TensorPipe agent lost its connection to a peer: the "
    "worker at the other end died or restarted",
    ("julia", "connect"): "Julia's Distributed workers could not connect to each other (its all-to-all TCP "
    "connections between workers): a worker's address is not reachable from the others, or it died "
    "starting",
    ("julia", "refused"): "a Julia worker's connection to another worker was refused (Distributed's "
    "all-to-all TCP connections, made as a worker first calls another): nothing listened at the address that "
    "worker gave, so it had died or bound an address the others cannot reach",
    (
        "nvshmem",
        "resource",
    ): "NVSHMEM could not initialise any remote transport (IBGDA, IBRC, UCX, libfabric): "
    "the RDMA devices, GPUDirect RDMA (nvidia_peermem / dma-buf) or the transport's libraries are missing "
    "in the pod",
    ("nvshmem", "connect"): "NVSHMEM could not connect its endpoints to the other PEs (its IBGDA / IBRC "
    "queue pairs did not reach ready-to-receive): the InfiniBand port, its GID index or the peer's "
    "address is wrong, or the fabric between the nodes is down",
    ("paddle", "connect"): "a PaddlePaddle trainer could not connect to a parameter server (pserver) "
    "endpoint: the pserver's pod is not running or not listening yet, or the endpoint it was given is "
    "wrong",
    ("paddle", "refused"): "a PaddlePaddle trainer's connection to a parameter server (pserver) was refused: "
    "the pserver is not listening on that endpoint (not started yet, or died)",
    ("charm", "completion"): "Charm++'s OFI machine layer could not send to another process (a libfabric "
    "call failed) and aborted: the provider or its devices are missing in the pod, or a peer is gone",
}


_TO_SERVER = re.compile(r"LOST[_-]CONNECTION[_-]TO[_-]SERVER")
_TOPO_EXCHANGE = re.compile(
    r"\btopo(?:info)?_?exchange_(?:server|agent)\.cc|\btopo exchange (?:server|agent)\b"
)
"""HCCL's topology exchange (topoinfo_exchange_server.cc / _agent.cc): at a communicator's start every rank
connects to a server on the root's host to share the rank table."""
_PMIX_GLUE = re.compile(r"\b(?:ext|pmix)\dx_client\.c\b")
"""Open MPI's PMIx client component (ext2x, pmix3x, …): an error there is the rank's own PMIx client."""
_TOLD_BY_ITS_WORDS: tuple[tuple[str, Verb | None, re.Pattern[str], str], ...] = (
    (
        "nccl",
        "resource",
        re.compile(r"\bError: network [\w ./-]{1,40}? not found\."),
        "NCCL could not find the network NCCL_NET names: no net plugin providing it loaded (AWS Libfabric is "
        "aws-ofi-nccl's, its libnccl-net*.so not on LD_LIBRARY_PATH or not in the image), so no communicator "
        "could be made",
    ),
    (
        "hccl",
        None,
        _TOPO_EXCHANGE,
        "HCCL's topology exchange did not complete as the communicator started: the ranks could not all "
        "connect to the exchange server on the root rank's host (HCCL_IF_IP, its port 60000 and up) in "
        "time — a rank never started or died first, or that address is unreachable between the pods",
    ),
    (
        "pmix",
        "unreachable",
        _PMIX_GLUE,
        "a rank's PMIx client (Open MPI's OPAL component for it) could not reach a PMIx server as the rank "
        "started: it was launched by srun without --mpi=pmix, or by hand, or against a PMIx the launcher's "
        "does not match",
    ),
)
"""A library's message whose words say where in it the failure was (any verb, or the one named): its own
sentence, before the verb's."""
_PMI_INIT = re.compile(
    r"\bPMI2?_Init failed\b|\bPMI2? init failed\b|was not built with SLURM's PMI support\b"
)


RUNTIME_INIT = re.compile(
    r"It looks like (?:pmix_init|MPI runtime init|orte_init|opal_init|ompi_rte_init) failed\b"
    r"|\bpmi/pmix: can ?not load PMIx library\b|[Cc]annot create context for mpi/pmix"
)
"""A rank's runtime failing to initialise its PMIx wiring: Open MPI's help text (``It looks like MPI
runtime init failed for some reason``, ``pmix_init`` under a container runtime's hook), Slurm's mpi/pmix
plugin unable to load the PMIx library."""
_RUNTIME_STEPS = (
    "PMIx: srun --mpi=list names the PMIx plugins this Slurm has; launch with one that matches the PMIx "
    "Open MPI was built against (--mpi=pmix_v4 / pmix_v5), or through mpirun; a psec failure (munge) needs "
    "munged running and reachable in the container, or PMIX_MCA_psec=native.",
)


_OOB = re.compile(r"\bmca_oob_\w{1,40}|\boob_tcp\w{0,40}|\bORCM\b|\borcmd?\b")
"""Open MPI's runtime between its daemons (ORTE's and ORCM's out-of-band messaging), not its ranks' BTL."""
_OOB_LOST = (
    "Open MPI's runtime lost its out-of-band connection to a daemon (ORTE's or ORCM's oob_tcp between the "
    "nodes' daemons): that node or pod died, or the network or a firewall cut the daemons' port"
)


_NO_INTERFACE = re.compile(r"[Nn]o socket interface found")
_PORT_DOWN = re.compile(r"[Gg]ot async event ?: (?:port error|local catastrophic error|device fatal)")
_PROXY_CLOSED = re.compile(
    r"[Ee]rror encountered progressing operation=|\[Proxy Service \d{1,7}\] Failed to execute operation"
)
"""NCCL's proxy service thread failing an operation for a peer (proxy.cc): a connection lost, whatever verb
its words hold (``Failed to execute`` is no launch)."""
_NCCL_IPC = re.compile(r"Ipc\w{0,20}Handle|IPC handle")
_NCCL_IB_DEVICE = re.compile(r"NET/IB ?: ?Unable to open device|ibv_open_device")


def words(library: Library, verb: Verb, text: str) -> str:
    """What ``library`` saying ``verb`` means, in plain words."""
    specific = _SPECIFIC.get((library.key, verb))
    if verb == "unreachable" and library.key in ("grpc", "tf") and "/job:ps" in text:
        return "the parameter server is UNAVAILABLE: its pod is gone or its Service is wrong"
    if verb in ("resource", "spawn") and _PMI_INIT.search(text):
        return (
            "the ranks could not start their PMI client (the process manager's wiring of the job: Open "
            "MPI direct-launched by srun without the PMI support Slurm offers, or a PMI library missing), so "
            "they never connected"
        )
    told = next(
        (
            w
            for key, v, p, w in _TOLD_BY_ITS_WORDS
            if key == library.key and v in (None, verb) and p.search(text)
        ),
        None,
    )
    if told is not None:
        return told
    if verb == "resource" and RUNTIME_INIT.search(text):
        return (
            "the ranks' MPI runtime could not initialise its process-manager wiring (PMIx: the library "
            "srun's mpi/pmix plugin or Open MPI loads, or its security plugin such as munge, missing or "
            "refused), so they never connected"
        )
    if library.key == "nccl" and verb == "resource" and _NCCL_IB_DEVICE.search(text):
        return (
            "NCCL's InfiniBand transport could not open an RDMA device: the pod lacks the device (its RDMA "
            "device plugin's resource) or its driver, or NCCL_IB_HCA names one the node does not have"
        )
    if library.key == "nccl" and verb == "resource" and _NO_INTERFACE.search(text):
        return (
            "NCCL's bootstrap found no network interface to use: NCCL_SOCKET_IFNAME (or its default) names "
            "none the pod has"
        )
    if library.key == "nccl" and verb == "resource" and not _NCCL_IPC.search(text):
        return _VERB_WORDS[verb]
    if library.key == "nccl" and verb == "lost" and _PORT_DOWN.search(text):
        return (
            "an InfiniBand port went down under NCCL (its HCA reported a port error): the link to the peers "
            "broke"
        )
    if library.key == "nccl" and verb == "lost" and _PROXY_CLOSED.search(text):
        return (
            "NCCL's proxy service thread closed a peer's connection after an operation on it failed (the "
            "peer died, or its network path broke)"
        )
    if library.key == "pslite" and verb == "connect" and _IN_USE.search(text):
        return (
            "ps-lite's van (the parameter server's transport, under MXNet / BytePS) could not bind its port, "
            "its retries spent: the address is already in use (an earlier scheduler or server still running "
            "in the pod, or another pod on the node's host network holding DMLC_PS_ROOT_PORT)"
        )
    if library.key == "ompi" and verb == "connect" and _LOCAL_BIND.search(text):
        why = (
            ": the address was already in use (the node's ephemeral ports spent, its connections lingering "
            "in TIME_WAIT, or a port range another process holds)"
            if _IN_USE.search(text)
            else ""
        )
        return f"Open MPI's TCP transport (btl_tcp) could not bind the local socket it connects from{why}"
    if library.key == "ucx" and verb == "completion" and (status := _WC_STATUS.search(text)) is not None:
        said = status["status"].strip().rstrip(".")
        return (
            f"UCX's InfiniBand transport got a work request back completed with an error ({said}): the queue "
            f"pair to a peer broke — the peer died, its link or port went down, or a buffer's memory "
            f"registration no longer covered the transfer"
        )
    if verb == "lost" and library.key == "ompi" and _OOB.search(text):
        return _OOB_LOST
    if verb == "lost" and library.key == "prrte" and _TO_SERVER.search(text):
        return _SPECIFIC[("pmix", "lost")]  # prun's or a client's link to its PMIx server, not a lifeline
    return specific or _VERB_WORDS[verb]


_IN_USE = re.compile(r"[Aa]ddress already in use|EADDRINUSE\b|errno = 98\b")
_LOCAL_BIND = re.compile(r"\b[Bb]ind (?:on|to) (?:the )?local (?:address|port) \(")
_WC_STATUS = re.compile(r"completion with error: (?P<status>[\w -]{3,60})")
"""The status of a work completion that failed, as UCX's verbs transports (``rc_verbs_iface.c``: ``send
completion with error: local protection error``, ibv_wc_status_str's words) print it."""


_VERB_STEPS: dict[Verb, tuple[str, ...]] = {
    "resource": (
        "Check the pods request the fabric's devices (vpc.amazonaws.com/efa, an RDMA device plugin's "
        "resource) and run with IPC_LOCK; FI_PROVIDER must name a provider whose devices the pod has.",
    ),
    "handshake": (
        "Check every rank runs the same image (the same NCCL / library version): kubectl -n {namespace} get "
        "pods -o jsonpath='{{..image}}' | grep {job}",
        "A leftover rank of an earlier run, or another program, may be connecting to the job's ports: "
        "check the pods of {namespace} that are not this job's.",
    ),
    "spawn": (
        "Check the program and its libraries exist at the same path on every worker image, and that "
        "the launcher "
        "reaches the workers (ssh): kubectl -n {namespace} logs job/{job}-launcher",
        "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
    ),
    "alloc": (
        "RDMA transports pin memory: give the containers an unlimited memlock limit (the IPC_LOCK "
        "capability) "
        "and, for EFA, huge pages.",
        "Check the pods request their RDMA / EFA devices and that the node has memory left for them.",
    ),
    "refused": (
        "Check the peer's pod is Running and listens: kubectl -n {namespace} get pods -o wide | grep {job}",
        "Check that NetworkPolicies in {namespace} allow all TCP traffic between the job's pods and that no "
        'service-mesh sidecar intercepts it (sidecar.istio.io/inject: "false").',
    ),
    "reset": (
        "Find the pod that died first — its own error is the cause: kubectl -n {namespace} get pods "
        "| grep {job}",
        "If none died, a proxy or sidecar cut the connection: turn off sidecar injection for training pods.",
    ),
    "unreachable": (
        "Check the peer's pod runs and the address the ranks use is its Service: kubectl -n {namespace} get "
        "pods,svc -l training.kubeflow.org/job-name={job}",
        "Check NetworkPolicies, and pin the interface the ranks use (NCCL_SOCKET_IFNAME / "
        "GLOO_SOCKET_IFNAME).",
    ),
    "timed-out": (
        "Find the rank that stopped answering: kubectl -n {namespace} get pods -o wide | grep {job}; "
        "kubectl -n {namespace} logs <pod> --previous",
        "If every pod runs, the traffic is dropped: check NetworkPolicies and sidecars; a slow start needs a "
        "longer timeout.",
    ),
    "lost": (
        "Find the rank that died first — its own error is the cause, the others lost it: kubectl -n "
        "{namespace} "
        "get pods | grep {job}; kubectl -n {namespace} logs <pod> --previous",
    ),
    "aborted": (
        "Find the rank that failed first — the others were aborted because of it: kubectl -n {namespace} get "
        "pods | grep {job}",
    ),
}
_LIBRARY_STEPS: dict[str, str] = {
    "efa": "EFA: the security group of the nodes must allow all inbound and outbound traffic to "
    "itself; the pods "
    "must request vpc.amazonaws.com/efa; set FI_LOG_LEVEL=warn to see which peer failed.",
    "libfabric": "libfabric: set FI_LOG_LEVEL=warn and check FI_PROVIDER names a provider whose "
    "devices the pods "
    "get.",
    "intel-mpi": "Intel MPI: set I_MPI_DEBUG=5 and FI_LOG_LEVEL=warn; check I_MPI_FABRICS / "
    "FI_PROVIDER match the "
    "fabric the pods get.",
    "ucx": "UCX: set UCX_LOG_LEVEL=info and check UCX_NET_DEVICES / UCX_TLS name devices present on "
    "every node.",
    "hpx": "HPX's libfabric parcelport: fi_getinfo found no provider for what it asks (No data available): "
    "check the provider HPX was built for (HPX_PARCELPORT_LIBFABRIC_PROVIDER: verbs, gni, cxi, tcp) is on "
    "the node and in the pod (fi_info -p <provider>), that FI_PROVIDER does not name another, or run it with "
    "--hpx:ini=hpx.parcel.libfabric.enable=0 to fall back to the TCP parcelport.",
    "pmix": "PMIx: the node's daemon (prted / orted) is its PMIx server; check the launcher log for "
    "the daemon that "
    "failed to start or died.",
    "mpich": "MPICH (ch4): set FI_LOG_LEVEL=warn and MPIR_CVAR_DEBUG_SUMMARY=1 to see the provider and the "
    "addresses it uses; a peer with no address has usually exited.",
    "hydra": "Hydra: check hydra_pmi_proxy and the program exist on every worker, and ssh from the launcher "
    "works (mpiexec -verbose shows the launch command).",
    "ompi": "Open MPI: rerun with --mca plm_base_verbose 5 (launch), --mca btl_base_verbose 100 (TCP) or "
    "--mca oob_base_verbose 10 (its daemons' out-of-band TCP, ORTE's and ORCM's) to see which host failed.",
    "ompi-ofi": "Open MPI's OFI MTL: set FI_LOG_LEVEL=warn and --mca mtl_ofi_verbose 100 to see the "
    "provider and the peer; FI_PROVIDER (or --mca mtl_ofi_provider_include) must name one the pods have.",
    "charm": "Charm++: rerun with FI_LOG_LEVEL=warn (its OFI layer) and check charmrun / the launcher "
    "reaches every host (charmrun ++verbose shows each remote shell it starts, ssh unless ++remote-shell "
    "says, and the nodelist's hosts must accept it); a build for another fabric (ucx, verbs, netlrts) "
    "avoids a missing provider.",
    "gasnet": "GASNet: rerun with GASNET_VERBOSEENV=1 and FI_LOG_LEVEL=warn to see the conduit's settings "
    "and the provider; set GASNET_OFI_PROVIDER (or FI_PROVIDER) to one fi_info lists in the pod, or build "
    "Chapel / UPC++ for another conduit (ibv, udp, smp).",
    "shmem": "OpenSHMEM: run fi_info in the pod and set SHMEM_OFI_PROVIDER to a provider it lists; "
    "SHMEM_DEBUG=1 with FI_LOG_LEVEL=warn shows the one it tried; under Intel SHMEM the provider must "
    "support its GPU memory (HMEM), else set ISHMEM_ENABLE_GPU_IPC=0 or lower SHMEM_SYMMETRIC_SIZE.",
    "mercury": "Mercury: set HG_LOG_LEVEL=debug (HG_LOG_SUBSYS=na) and FI_LOG_LEVEL=warn to see the "
    "peer and the provider; the NA protocol (ofi+tcp, ofi+verbs, ofi+cxi) must name a provider the pods "
    "have, and the peer service must still run.",
    "tensorpipe": "torch.distributed.rpc (TensorPipe): the agent the warning names ('to N') is the peer that "
    "went; its own log says why. Set TP_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the pods' interface, "
    "raise rpc_timeout in TensorPipeRpcBackendOptions where peers are slow, and keep every worker alive "
    "until rpc.shutdown() returns on all.",
    "ray-gcs": "Ray: the dead node's raylet log (/tmp/ray/session_latest/logs/raylet.out on that node, or "
    "its pod's log) says why it stopped; ray status and ray list nodes show the cluster's nodes, and "
    "health_check_period_ms / health_check_failure_threshold (RAY_health_check_*) set how long the GCS "
    "waits.",
    "ascend-rt": "Ascend: the device's plog (~/ascend/log, ASCEND_GLOBAL_LOG_LEVEL=1) names the task the "
    "stream waited on; for a collective, find the rank that did not arrive, check the NPU network "
    "(hccn_tool -i N -link -g, -net_health -g) and raise HCCL_EXEC_TIMEOUT / HCCL_CONNECT_TIMEOUT where "
    "ranks are slow.",
    "julia": "Julia's Distributed: every worker connects to every other (addprocs' default topology); "
    "check each worker's host name resolves and its port is reachable from the others (bind_to= in "
    "addprocs, no NetworkPolicy in between), or use topology=:master_worker if workers need not talk; "
    "JULIA_WORKER_TIMEOUT raises how long they wait.",
    "msmpi": "MS-MPI: check smpd runs on every host (smpd -d, or the MsMpiLaunchSvc service) with the same "
    "port (-port, 8677 by default) and that the firewall lets mpiexec and smpd through; mpiexec -d 3 "
    "shows the host it could not reach.",
    "deepep": "DeepEP: a dispatch or combine kernel waited past its timeout for its peers' tokens — a rank "
    "that stopped (its own log shows why) or the RDMA / NVLink path between them: check every rank reached "
    "the same layer, the pods' RDMA devices and GPUDirect RDMA, and NVSHMEM_DEBUG=INFO for its transport.",
    "nvshmem": "NVSHMEM: set NVSHMEM_DEBUG=INFO to see the transports it tried; the pods need their RDMA "
    "devices, GPUDirect RDMA (nvidia_peermem or dma-buf) and, for IBGDA, NVSHMEM_IBGDA_* support in the "
    "driver; NVSHMEM_REMOTE_TRANSPORT (ibrc, ucx, libfabric) and NVSHMEM_HCA_LIST / "
    "NVSHMEM_IB_GID_INDEX must match the nodes' fabric.",
    "paddle": "PaddlePaddle: check each pserver endpoint the trainers get (PADDLE_PSERVERS_IP_PORT_LIST, "
    "--pservers) is a pserver pod's Service and port, and that the pservers listen before the trainers "
    "send (GLOG_v=3 logs each RPC).",
    "prrte": "PRRTE: rerun with --prtemca plm_base_verbose 5 to see which host's daemon failed.",
    "mvapich": "MVAPICH: check mpispawn can start on every host (ssh) and MV2_* settings match the fabric.",
    "psm2": "PSM2 / PSM3: on an assertion, rerun with PSM3_DEVICES=self,nic (PSM2_DEVICES=self,hfi) to "
    "leave out its shared-memory path, or FI_PROVIDER=tcp to leave PSM out, and report the PSM version; "
    "check the pod has the Omni-Path device (/dev/hfi1_*) and its link is active (opainfo); "
    "PSM2_DEVICES / FI_PROVIDER must match what the node has.",
    "xla": "XLA: a clique waits for every local device's thread; the rank that never arrived stopped, hangs "
    "or runs a different program (check each process runs the same step).",
    "hccl": "HCCL: find the rank that did not arrive (its own log shows an earlier error, or it is stuck); "
    "raise HCCL_CONNECT_TIMEOUT (120 s by default) where ranks start far apart, HCCL_EXEC_TIMEOUT for long "
    "steps; check each NPU's link and TLS state with hccn_tool -i <device> -link -g / -tls -g, and that "
    "HCCL_IF_IP / HCCL_SOCKET_IFNAME name the pod's interface.",
    "gaudi": "HCCL on Gaudi: set ENABLE_CONSOLE=true and LOG_LEVEL_ALL=3 to see hcl's own error; check with "
    "hl-smi that every Gaudi's external ports are up and HCCL_SOCKET_IFNAME names the pods' interface; the "
    "first failing rank's log says more.",
    "oneccl": "oneCCL: run fi_info in the pod to list the libfabric providers it has; set FI_PROVIDER to one "
    "of them (tcp where no RDMA device is mounted, shm within a node), or CCL_ATL_TRANSPORT=mpi; check "
    "CCL_LOG_LEVEL=info's account of the provider it chose; where its worker threads would not start "
    "(pthread_create), set CCL_WORKER_AFFINITY and CCL_WORKER_COUNT to cores the pod's cpuset holds "
    "(cat /sys/fs/cgroup/cpuset.cpus.effective).",
    "mlx-ring": "MLX's ring: every rank connects to the next one's address in the hostfile (mlx.launch "
    "--hosts / MLX_HOSTFILE); check those addresses reach each other on their ports, run with "
    "MLX_RING_VERBOSE=1 to see each connection, and where sends fail with EFAULT or EINVAL on healthy links, "
    "try another MLX release (a fault of its transfer, not the network).",
    "slurm": "Slurm: check the slurmd of the node srun names runs and answers (scontrol ping, scontrol "
    "show node), that munge keys match across nodes, and that the nodes reach each other on slurmd's port "
    "(SlurmdPort, 6818).",
    "ssh": "ssh: from the launcher pod, run ssh -v <worker> hostname; the workers' sshd must run and the "
    "launcher's key be in their authorized_keys (the MPI Operator mounts it).",
    "gloo": "Gloo: pin GLOO_SOCKET_IFNAME to the pod interface (eth0).",
    "xgboost": "XGBoost: the tracker runs on the driver / rank 0; every worker must reach its host and port.",
    "horovod": "Horovod: the first failing rank's error is above the shutdown; run with "
    "HOROVOD_LOG_LEVEL=debug.",
    "grpc": "gRPC: check the peer's pod (kubectl -n {namespace} get pods | grep {job}) and the address in "
    "TF_CONFIG / the cluster spec resolves to its Service.",
    "tf": "TensorFlow: check TF_CONFIG's cluster addresses are the replicas' Services and every "
    "replica runs.",
    "jax": "JAX: check jax.distributed.initialize's coordinator_address, num_processes and that "
    "every process "
    "started.",
    "coordination": "Coordination service: check every task started and the coordinator (task 0) address.",
    "torch": "torch.distributed: check MASTER_ADDR / MASTER_PORT (or --rdzv-endpoint) point at the master's "
    "Service and every replica runs.",
    "launcher": "DeepSpeed / Accelerate: check the hostfile names the worker pods and ssh / pdsh "
    "reaches them.",
    "nccl": "NCCL: set NCCL_DEBUG=INFO and NCCL_SOCKET_IFNAME=eth0 to see and pin the interface it uses.",
    "dask": "Dask: read the scheduler's log for the worker it lost and that worker's own log (or its "
    "nanny's) for why it went: a memory restart (distributed.worker.memory.terminate), a killed pod; raise "
    "distributed.comm.timeouts.connect / tcp where the network is slow.",
    "pslite": "ps-lite: DMLC_PS_ROOT_URI / DMLC_PS_ROOT_PORT must name the scheduler's Service and port, "
    "DMLC_NODE_HOST / DMLC_INTERFACE the pod's own address and interface; PS_VERBOSE=2 logs each "
    "connection.",
    "ray": "Ray Train: the wrapper repeats a worker's error; read the first failing worker's log (the "
    "RayJob's worker pods, /tmp/ray/session_latest/logs/worker-*.err) and set NCCL_DEBUG=INFO in the "
    "trainer's runtime_env.",
}


_VERB_STEPS["connect"] = _VERB_STEPS["refused"]
_VERB_STEPS["trail"] = _VERB_STEPS["reset"]
_VERB_STEPS["stalled"] = _VERB_STEPS["timed-out"]
_VERB_STEPS["completion"] = _VERB_STEPS["lost"]
_VERB_STEPS["backend"] = _VERB_STEPS["lost"]


def remediation(hit: Hit) -> tuple[str, ...]:
    """Steps for a family hit: the library's own first, then the verb's."""
    key, name = library_key(hit), verb(hit)
    steps = _VERB_STEPS.get(name, ()) if name is not None else ()
    own = _LIBRARY_STEPS.get(key or "")
    init = _RUNTIME_STEPS if name == "resource" and RUNTIME_INIT.search(hit.line) else ()
    if key == "pslite" and name == "connect" and _IN_USE.search(hit.line):
        steps = _PSLITE_BIND_STEPS
    if key == "ompi" and name == "connect" and _LOCAL_BIND.search(hit.line):
        steps = _OMPI_BIND_STEPS
    return init + ((own,) if own else ()) + steps


_OMPI_BIND_STEPS = (
    "See how many sockets the node holds (ss -s; ss -tan state time-wait | wc -l): thousands of ranks' TCP "
    "connections can spend its ephemeral ports; widen net.ipv4.ip_local_port_range or let it reuse them "
    "(net.ipv4.tcp_tw_reuse=1).",
    "Give btl_tcp a port range of its own (--mca btl_tcp_port_min_v4 / btl_tcp_port_range_v4) nothing else "
    "on the node uses, or carry the job over a transport that opens no socket per peer (UCX: --mca pml ucx).",
)
_PSLITE_BIND_STEPS = (
    "Find what holds the port on that pod or node: kubectl -n {namespace} exec <pod> -- ss -ltnp (a "
    "scheduler or server of an earlier attempt still running, or another job's pod on the node's host "
    "network).",
    "Give the scheduler a port nothing else uses (DMLC_PS_ROOT_PORT), and start one scheduler per job.",
)
