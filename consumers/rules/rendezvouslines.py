"""The wordings of a missed rendezvous, read by the rule :mod:`consumers.rules.rendezvous` (which
says where each comes from and what it makes of them) and by the live reader's catalog
(:mod:`consumers.rules.live`).
"""

from __future__ import annotations

import re

from consumers.rules.families import DASK_SCHEDULER, HOROVOD_START, JULIA_MASTER_WAIT, STARTUP_BARRIER

__all__ = [
    "ADDRESS_IN_USE",
    "BARRIER",
    "BARRIER_DONE",
    "BARRIER_RAISED",
    "BARRIER_WAIT",
    "CLIENT_FAILED",
    "CLIENT_TIMEOUT",
    "CONNECTION_ERROR",
    "CONNECT_RAISED",
    "CONNECT_TIMEOUT",
    "DASK_SCHEDULER",
    "ELASTIC",
    "ENV_UNSET",
    "ETCD",
    "ETCD_DIAL",
    "GLOO_STORE_WAIT",
    "HIVEMIND_BOOTSTRAP",
    "HOROVOD_START",
    "HTTP_STORE",
    "INIT_FRAME",
    "JULIA_MANAGER",
    "JULIA_MASTER_WAIT",
    "RAY_JOIN",
    "RENDEZVOUS_SIGNS",
    "RETRY_SPENT",
    "SERVER_BIND",
    "SERVER_FRAME",
    "STORE_BIND",
    "STORE_CLIENT",
    "STORE_FRAME",
    "STORE_GET",
    "STORE_INPUT",
    "STORE_POLL",
    "STORE_RESET",
    "STORE_SETUP",
    "STORE_TIMEOUT",
    "STORE_TITLED",
    "STORE_WAIT",
    "STORE_WAITED",
    "TF_SESSION",
    "XGBOOST_TRACKER",
]

CLIENT_TIMEOUT = re.compile(
    r"The client socket has timed out after (?P<after>\d{1,10})(?P<unit>ms|s)? while trying to connect to"
    r"(?: \(?(?P<host>[\w.:\[\]-]{1,253}?)(?:, | |:)(?P<port>\d{1,5})\)?)?"
)
"""The c10d store's client giving up on reaching the store, with its address or where a title, a quote or a
redacted paste cut or hid it (``… while trying to connect to (MASTER_ADDR, PORT)``)."""
STORE_TITLED = re.compile(
    r"\bDist(?:Store|Network)Error\b[^\n]{0,60}?"
    r"(?:\b\d{1,7} ?/ ?\d{1,7} (?:clients|workers)\b"
    r"| (?:when|while) (?:using|running|training|launching|starting|scaling|initiali[sz]ing)\b)"
)
"""The c10d store's error class named as what a run hit, with the count of clients that joined or the
run that hit it (``DistStoreError, 3/4 clients``, ``DistNetworkError while launching on 2 nodes``): a
thread's title naming torch.distributed's store error under the run's conditions."""
CLIENT_FAILED = re.compile(
    r"The client socket has failed to connect to any network address of "
    r"\((?P<host>[\w.:\[\]-]{1,253}?), (?P<port>\d{1,5})\)"
)
STORE_CLIENT = re.compile(
    r"TCP client failed to connect/validate to host (?P<host>[\w.:\[\]-]{1,253}?):(?P<port>\d{1,5})"
    r" - (?:timed out|retrying \(try=\d{1,4}, [^)\n]{0,120}\): (?P<reason>[A-Z][^\n]{0,120}))"
)
"""The c10d store's client (``TCPStore.cpp``) failing to reach the store: timed out, or a retry
announced with the reason of the attempt that failed (``- retrying (try=6, timeout=1800000ms,
delay=5241ms): Connection reset by peer``), which a raised exception right after ends."""
CONNECT_TIMEOUT = re.compile(r"connect\(\) timed out\. Original timeout was (?P<ms>\d{1,10}) ms")
STORE_WAIT = re.compile(
    r"DistStoreError: (?:Timed out after (?P<after>\d{1,7}) seconds waiting for (?:clients|workers)\. )?"
    r"(?P<joined>\d{1,7})/(?P<expected>\d{1,7}) (?:clients|workers) joined"
)
"""The store's count of the clients that joined, after its timeout or on its own (``DistStoreError:
16/32 clients joined``)."""
STORE_WAITED = re.compile(r"\bTimed out after (?P<after>\d{1,7}) seconds waiting for (?:clients|workers)\b")
"""The store's own timeout waiting for its clients where the count after it is cut off (a title, a one-line
report: ``Timed out after 901 seconds waiting for clients``, TCPStore's waitForWorkers)."""
STORE_BIND = re.compile(
    r"The server socket has failed to (?:listen on any local network address"
    r"|bind to \[?(?P<host>[\w.:*-]{0,253}?)\]?:(?P<port>\d{1,5}))"
    r"|TCPStore\b[^\n]{0,200}?(?:EADDRINUSE|[Aa]ddress already in use)"
    # THD, torch.distributed before c10d (up to torch 0.4): the master's socket raised from its own sources
    # (``RuntimeError: Address already in use at …/torch/lib/THD/process_group/General.cpp:17``, its
    # DataChannelTCP's and ChannelUtils')
    r"|[Aa]ddress already in use at \S{0,200}/THD/\S{1,200}\.cpp:\d"
)
"""The c10d store's server (on the master, rank 0) unable to listen on its port: the rendezvous's store
never started (``DistNetworkError: The server socket has failed to listen on any local network
address … (errno: 98 - Address already in use)``)."""
ADDRESS_IN_USE = re.compile(r"[Aa]ddress already in use|EADDRINUSE\b")
STORE_FRAME = re.compile(r"TCPStore\(|_create_c10d_store|_create_tcp_store|c10d_rendezvous_backend")
"""A traceback frame creating the c10d store: an ``Address already in use`` raised under it (older
torch's bare ``RuntimeError: Address already in use``) is the store failing to bind."""
INIT_FRAME = re.compile(
    r"TCPStore\(|_create_c10d_store|_create_tcp_store|c10d_rendezvous_backend"
    r"|_(?:env|tcp|file)_rendezvous_handler\b|\bProcessGroupGloo\("
)
"""A traceback frame where the processes meet: the c10d store created, one of ``init_process_group``'s
rendezvous handlers (``env://``, ``tcp://``, ``file://``), or Gloo's process group built (it connects its
full mesh through the store as it is constructed)."""
CONNECT_RAISED = re.compile(
    r"^\s{0,8}(?:[\w.]{0,80}\.)?(?:RuntimeError|DistNetworkError|DistStoreError|TimeoutError"
    r"|Connection(?:Refused)?Error|ValueError|socket\.gaierror): (?:\[[^\]\n]{1,120}\] ?)?"
    r"(?P<error>Connection (?:timed out|refused)|Socket Timeout|No route to host|Network is unreachable"
    # the store's host name not resolved (torch 1.x's tcputil raised ``ValueError: host not found: …``)
    r"|host not found: [\w ]{1,60}|Name or service not known|Temporary failure in name resolution"
    # torch 1.x's tcputil::connect giving up on its own deadline (``RuntimeError: connect() timed out.``)
    r"|connect\(\) timed out"
    # torch 1.x's stores giving up on a key (FileStore's and TCPStore's wait: ``RuntimeError: Wait timeout``)
    r"|Wait timeout\s{0,4}$)"
)
"""A connection that never came, raised bare with no address (older torch's ``RuntimeError: Connection
timed out`` or ``connect() timed out.``, Gloo's ``RuntimeError: Socket Timeout``): under a frame of
:data:`INIT_FRAME`, the processes never met. Not a connection reset: one made, then lost, is the mesh's
(``mpi-comm``)."""
STORE_RESET = re.compile(r"Connection reset by peer")
"""A connection the store's server reset: raised under :data:`STORE_SETUP` (the store being created, its
workers counted, the process group's first barrier on it), torch's store client treats it as it treats a
refused connection (``socket.cpp`` retries a connect on ``ECONNRESET``): the processes never met."""
STORE_SETUP = re.compile(
    r"TCPStore\(|_create_c10d_store|_create_tcp_store|c10d_rendezvous_backend"
    r"|\b_?[Ww]ait_?[Ff]or_?[Ww]orkers\b|_store_based_barrier\b"
)
"""A frame where the c10d store is created or first awaited: its constructor, the rendezvous handler creating
it, ``TCPStore::waitForWorkers`` (``wait_for_workers=True``), ``init_process_group``'s store-based barrier."""
STORE_GET = re.compile(
    r"is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[(?P<root>\d{1,7})\] via c10d "
    r"key-value store by key '[^'\n]{1,120}', but store->get\('[^'\n]{1,120}'\) got error: "
    r"(?P<error>[^\n]{1,160})"
)
"""A rank creating its NCCL communicator, failing to get the communicator's unique id from the c10d store
(rank 0 publishes it there, the others wait on the key): the store, not NCCL's transport, failed — a rank
that never reached the collective, or a store the others could not keep reaching."""
STORE_TIMEOUT = re.compile(
    r"DistStoreError: (?:Socket Timeout\b|[Ww]ait timeout\b(?: after \d{1,10}m?s(?:, keys: )?)?)"
)
"""The c10d store's client timing out on a wait or a get (a key another rank never wrote, a store it
stopped reaching), raised as the store's own error class: no count, no address. In each store's wording
(TCPStore's ``wait timeout after 600000ms, keys: [...]``, its socket's ``Socket Timeout``, HashStore's and
older releases' bare ``Wait timeout``), with the keys or without them (a title, a one-line report)."""
STORE_INPUT = re.compile(
    r"waitForInput: socket SocketImpl\([^\n]{0,200}?remote=\[?(?P<host>[\w.:-]{1,253}?)\]?"
    r":(?P<port>\d{1,5})\)"
    r" timed out after (?P<ms>\d{1,10})ms"
)
"""The c10d store's client socket (``socket.cpp``) waiting for the store's answer and getting none within
its timeout: the store at ``remote=`` never answered (``[c10d] waitForInput: socket SocketImpl(fd=7,
addr=[…]:5123, remote=[master]:29500) timed out after 300000ms``)."""
RETRY_SPENT = re.compile(
    r"retrying \(try=\d{1,4}, timeout=(?P<timeout>\d{1,10})ms[^\n]{0,200}?"
    r"timed out after (?P<after>\d{1,10})ms"
)
"""A c10d client's retry announced after its attempt already waited out the whole timeout (``- retrying
(try=0, timeout=T ms, …): … timed out after T ms``): the deadline has passed, no retry is left."""
HTTP_STORE = re.compile(
    r"http_store\.cc:\d{1,6}\] HTTP (?:GET|PUT|DELETE|POST) request failed too many times"
)
"""Horovod's Gloo workers giving up on the launcher's HTTP rendezvous store (``horovodrun --gloo``,
Horovod in Spark or Ray): ``E …/horovod/common/gloo/http_store.cc:96] HTTP GET request failed too many
times, aborting.``"""
GLOO_STORE_WAIT = re.compile(r"\bWait timeout (?:after \d{1,10} seconds )?for key\(s\): ")
"""A store of Gloo's rendezvous giving up on a key another rank never wrote: Gloo's own stores
(gloo/rendezvous/file_store.cc, hash_store.cc, redis_store.cc: ``Wait timeout for key(s): [...]``), the stores
built on its interface (Horovod's MemoryStore; PaddlePaddle's HdfsStore), and Horovod's HTTP store
(horovod/common/gloo/http_store.cc: ``Wait timeout after 30 seconds for key(s): 0. You may want to increase
the timeout via HOROVOD_GLOO_TIMEOUT_SECONDS``): the ranks never all met."""
STORE_POLL = re.compile(
    r"While waitForInput, poo?lFD failed with \((?:errno|system error): \d{1,6} - (?P<reason>[^)\n]{1,80})\)"
)
"""The c10d store's client socket (``socket.cpp``) polling for the store's answer and the poll itself
failing (``[c10d] While waitForInput, poolFD failed with (errno: 0 - Success).``, its misspelling of
``pollFD`` kept): the connection to the store broke while the rank waited on it."""
ETCD_DIAL = re.compile(
    r"connect(?:ing)? to etcd(?: error| failed)?: dial tcp (?P<host>[\w.\[\]:-]{0,253}?):(?P<port>\d{1,5}): "
    r"(?:getsockopt: |connect: )?(?P<reason>connection refused|i/o timeout|no route to host)"
)
"""A Go program of the job (PaddlePaddle's parameter server and master on PaddleCloud / EDL) unable to
reach the etcd its trainers and servers register and find each other in (``connect to etcd error: dial
tcp :2379: getsockopt: connection refused``): the job's rendezvous is that etcd."""
CONNECTION_ERROR = re.compile(
    r"RendezvousConnectionError\b|\bThe connection to (?P<backend>the C10d store|etcd) has failed\b"
)
"""torch elastic's error for a rendezvous backend it could not reach: raised (``… The connection to
the C10d store has failed``) or named by the keep-alive heartbeat that failed with it; or its message alone,
where a launcher built on torch elastic (ColossalAI's, a platform's job status) relays it without the class
(torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py: ``The connection to the C10d store has
failed. See inner exception for details.``; etcd_rendezvous_backend.py: ``The connection to etcd has
failed. …``)."""
ELASTIC = re.compile(r"(?P<error>Rendezvous(?:Timeout|Closed|State)Error)\b")
BARRIER = re.compile(
    r"[Tt]imed out initializing process group in store[ -]based barrier"
    r"|\b(?:RuntimeError|DistStoreError): Timed out initializing process group\b"
)
"""``_store_based_barrier``'s timeout (``Timed out initializing process group in store based barrier on rank
N, for key: store_based_barrier_key:1 (world_size=…, num_workers_joined=…, timeout=…)``), a report's lower
case or hyphen kept; or the error it raises (``RuntimeError``, ``DistStoreError`` since torch 2.0) where a
title cut its words after ``process group`` or went on in its own."""
BARRIER_WAIT = re.compile(
    r"Waiting in store based barrier to initialize process group for rank: \d{1,7}, key: [^\n]{1,120}? "
    r"\(world_size=(?P<world>\d{1,7}), (?:worker_count|num_workers_joined)=(?P<count>\d{1,7})"
)
"""``_store_based_barrier``'s progress line while it waits for every rank to add itself to the store's key
(``Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1
(world_size=4, worker_count=2, timeout=0:30:00)``): alone, the ranks may still be joining; followed by a
traceback through ``init_process_group`` (:data:`BARRIER_RAISED`), the barrier gave up."""
BARRIER_RAISED = re.compile(r"\binit_process_group\(|\b_store_based_barrier\(")
BARRIER_DONE = re.compile(r"[Cc]ompleted store-based barrier for key\b")
JULIA_MANAGER = re.compile(
    r"Timeout -- the workers did not connect to the manager|\bthe workers did not connect to the manager\b"
    r"|Timed out waiting to read host:port string from worker\b"
)
"""Julia's cluster managers giving up on the workers they launched: MPIClusterManagers' (MPI.jl's) manager
(``Timeout -- the workers did not connect to the manager``), Distributed's ``addprocs`` reading each
worker's address (``Timed out waiting to read host:port string from worker.``): the workers never met it."""
RAY_JOIN = re.compile(
    r"\bFailed to get cluster ID from GCS server\b|\bTimed out while waiting for GCS to become available\b"
    r"|\bThe node registration may not be complete yet before the timeout\b"
    r"|\bFailed to connect to GCS at address=\S{1,300}\. Last exception\b"
)
"""A Ray node failing to join its cluster's head (its GCS), after its retries: the GCS client's verdict
(src/ray/gcs/gcs_client/gcs_client.cc: ``Failed to get cluster ID from GCS server: TimedOut: Timed out while
waiting for GCS to become available.``), the node's own registration timing out (python/ray/_private/node.py:
``Failed to get node info … The node registration may not be complete yet before the timeout``), the
driver's connection given up (``Failed to connect to GCS at address=…. Last exception: …``). The client's
warning while it retries (``Failed to connect to GCS at address … within 5 seconds.``) is no verdict."""
HIVEMIND_BOOTSTRAP = re.compile(
    r"\bDHTNode bootstrap failed: none of the initial_peers responded to a ping\b"
    r"|\bP2PDaemonError: Daemon failed to start\b|\bfailed to connect to bootstrap peers\b"
)
"""hivemind's peers never meeting their swarm: its DHT node's bootstrap with none of ``initial_peers``
answering (hivemind/dht/node.py: ``RuntimeError: DHTNode bootstrap failed: none of the initial_peers
responded to a ping. (set ensure_bootstrap_success=False to ignore)``), its libp2p daemon (p2pd) not up in
time or exiting on its first line (hivemind/p2p/p2p_daemon.py: ``P2PDaemonError: Daemon failed to start in
15.0 seconds``, ``Daemon failed to start: … failed to connect to bootstrap peers``, go-libp2p-daemon's own
words): the swarm's rendezvous, not a connection between its peers lost later."""
XGBOOST_TRACKER = re.compile(r"\bFAULT: [Ff]ailed to start tracker\b")
"""XGBoost4J-Spark unable to start the Rabit tracker its workers meet at (ml/dmlc/xgboost4j/scala/spark/
XGBoost.scala's ``require(…, "FAULT: Failed to start tracker")``, the tracker's own ``FAULT: failed to start
tracker process``): the workers had nowhere to meet."""
TF_SESSION = re.compile(
    r"CreateSession still waiting for response from worker: "
    r"(?P<task>/job:[\w-]{1,60}/replica:\d{1,6}/task:\d{1,6})"
)
"""TensorFlow's master (tensorflow/core/distributed_runtime/master.cc, its DeviceFinder) waiting, every ten
seconds, for a task of its cluster to answer before it can create the session (``CreateSession still waiting
for response from worker: /job:ps/replica:0/task:0``): the task never started its server, or cannot be
reached at the address the cluster spec gives it. One such line is the master's ordinary report while its
tasks start; the tail ending on two or more is the session never created."""
SERVER_BIND = re.compile(
    r"\bNo address added out of total \d{1,4} resolved\b[^\n]{0,1000}?[Aa]ddress already in use"
    r"|\bCould not start gRPC server\b"
)
"""A gRPC server where the tasks meet unable to bind its port: gRPC core's error (its JSON,
``{"description":"No address added out of total 1 resolved", … "os_error":"Address already in
use","syscall":"bind"}``, or its
newer ``UNKNOWN:No address added out of total 1 resolved on [::]:2222 …``) as TensorFlow's tf.train.Server
or a coordination service starts it, and TensorFlow 2's own ``Could not start gRPC server``."""
SERVER_FRAME = re.compile(r"\blighthouse_main\b|\bLighthouseServer\(")
"""A traceback frame starting torchft's lighthouse, the server its replica groups meet at for each quorum:
an ``Address already in use (os error 98)`` (Rust's io::Error) raised under it is its port taken."""
ETCD = re.compile(
    r"etcd\.(?P<error>EtcdKeyNotFound|EtcdConnectionFailed|EtcdWatchTimedOut)\b"
    r"|Key not found : (?P<key>/torch(?:elastic|/elastic)/[\w/.-]{0,200})"
)
"""torch elastic's etcd rendezvous backend (``etcd`` / ``etcd-v2``): python-etcd's errors, raised from
it, for an etcd it could not reach or a rendezvous key that is gone (``etcd.EtcdKeyNotFound: Key not
found : /torchelastic/p2p/run_…/rdzv/active_version``)."""
ENV_UNSET = re.compile(
    r"Error initializing torch\.distributed using env:// rendezvous: environment variable "
    r"(?P<var>[A-Z_]{2,40}) expected, but not set"
)
"""``init_process_group``'s ``env://`` handler (the default init method, and torch.distributed.rpc's)
finding a variable it reads the rendezvous from unset (``ValueError: Error initializing torch.distributed
using env:// rendezvous: environment variable MASTER_ADDR expected, but not set``): the process never looked
for the others."""
RENDEZVOUS_SIGNS: tuple[re.Pattern[str], ...] = (
    CLIENT_TIMEOUT, CLIENT_FAILED, STORE_CLIENT, CONNECT_TIMEOUT, STORE_WAIT, STORE_BIND,
    CONNECTION_ERROR, ELASTIC, ETCD, BARRIER, STARTUP_BARRIER, STORE_GET, STORE_TIMEOUT, HTTP_STORE,
    STORE_INPUT, HOROVOD_START, STORE_POLL, ETCD_DIAL, STORE_TITLED, JULIA_MANAGER, STORE_WAITED,
    ENV_UNSET, GLOO_STORE_WAIT, RAY_JOIN, XGBOOST_TRACKER, SERVER_BIND, JULIA_MASTER_WAIT,
    DASK_SCHEDULER, HIVEMIND_BOOTSTRAP,
)  # fmt: skip
"""Every wording of a missed rendezvous (the live reader's catalog lists them)."""
