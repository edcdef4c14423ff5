"""Rule ``rendezvous``: the processes of a launcher-less job never met.

torchrun (a PyTorchJob's replicas, a TrainJob on the torch runtime) starts by meeting the other
nodes at a rendezvous: a c10d TCP store that the master (rank 0, ``MASTER_ADDR``/``MASTER_PORT``
or ``--rdzv-endpoint``) hosts. When that fails, each node says so in its own log, in one of a
few stable wordings:

- the client side (c10d's ``socket.cpp`` and ``TCPStore.cpp``, in every release's wording):
  ``[c10d] The client socket has timed out after 60s while trying to connect to (host, port)``
  (``after 600000ms`` since 2.3, or raised as a bare ``TimeoutError``), ``The client socket has
  failed to connect to any network address of (host, port)`` (every address it resolved failed;
  the per-address ``[W socket.cpp]`` lines before it are retries), ``TCP client failed to
  connect/validate to host host:port - timed out``, ``connect() timed out. Original timeout was
  60000 ms.``,
  ``RendezvousConnectionError: The connection to the C10d store has failed``;
- the store side: ``DistStoreError: Timed out after 901 seconds waiting for clients. 1/3
  clients joined.`` (the master waited for nodes that never came; the count alone, ``DistStoreError:
  16/32 clients joined``, says the same), or the store's server unable to listen on its port
  (``DistNetworkError: The server socket has failed to listen on any local network address … (errno:
  98 - Address already in use)``, older torch's bare ``RuntimeError: Address already in use`` raised
  under ``TCPStore(``): the store of the rendezvous never started, and the remedy is a free port;
- torch elastic's own verdict, its rendezvous handler's errors by class: ``RendezvousTimeoutError``,
  ``RendezvousClosedError``, ``RendezvousStateError``, and ``RendezvousConnectionError`` wherever it
  is named (a keep-alive heartbeat or a shutdown that failed with it);
- torch elastic's etcd backend (``--rdzv-backend=etcd`` / ``etcd-v2``): python-etcd's errors raised
  through it, ``etcd.EtcdKeyNotFound: Key not found : /torchelastic/…`` (the rendezvous's state is
  gone) or ``etcd.EtcdConnectionFailed`` (etcd not reached);
- the process group's barrier: ``Timed out initializing process group in store based barrier``;
- a rank setting up its NCCL communicator that could not get the communicator's unique id from the
  store (``… retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but
  store->get('0') got error: …``): rank 0 publishes it there, and the wait for it is the store's;
- the store's client timing out on a wait or a get, raised bare (``DistStoreError: Socket Timeout``);
- Horovod's Gloo workers giving up on the launcher's HTTP rendezvous store (``http_store.cc:96] HTTP GET
  request failed too many times, aborting.``);
- JAX's and TensorFlow's coordination service, where every task registers at start-up: its barrier
  timing out (``Barrier_id: PjRT_Client_Connect``, ``Wait_for_all_tasks_to_register``) or the
  cluster registration failing (:data:`~consumers.rules.families.STARTUP_BARRIER`); a heartbeat or
  a barrier timing out later is the mesh (``mpi-comm``).

A line that only names one of these (a tip, a setting made *to avoid* it, a summary counting them:
``- 0 RendezvousClosedError``) or a timeout followed by a retry or a connection that worked is no
miss.

The sentence names the replica that said it, the endpoint when the log gives it, and how many
joined. A peer that could not start at all (its image, a node, memory, scheduling) is the real
cause and explains this finding (:mod:`consumers.rules.catalog`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consumers.rules.facts import pod_text
from consumers.rules.rendezvouslines import (
    ADDRESS_IN_USE,
    BARRIER,
    BARRIER_DONE,
    BARRIER_RAISED,
    BARRIER_WAIT,
    CLIENT_FAILED,
    CLIENT_TIMEOUT,
    CONNECT_RAISED,
    CONNECT_TIMEOUT,
    CONNECTION_ERROR,
    DASK_SCHEDULER,
    ELASTIC,
    ENV_UNSET,
    ETCD,
    ETCD_DIAL,
    GLOO_STORE_WAIT,
    HIVEMIND_BOOTSTRAP,
    HOROVOD_START,
    HTTP_STORE,
    INIT_FRAME,
    JULIA_MANAGER,
    JULIA_MASTER_WAIT,
    RAY_JOIN,
    RENDEZVOUS_SIGNS,
    RETRY_SPENT,
    SERVER_BIND,
    SERVER_FRAME,
    STORE_BIND,
    STORE_CLIENT,
    STORE_FRAME,
    STORE_GET,
    STORE_INPUT,
    STORE_POLL,
    STORE_RESET,
    STORE_SETUP,
    STORE_TIMEOUT,
    STORE_TITLED,
    STORE_WAIT,
    STORE_WAITED,
    TF_SESSION,
    XGBOOST_TRACKER,
)
from consumers.rules.rule import Context, Detection, Rule, log_facts
from consumers.rules.state import PodState, RunState
from consumers.rules.tails import HANDLED_WITHIN, bounded, handled, is_mention
from consumers.rules.wording import also, who


@dataclass(frozen=True)
class Miss:
    """What one pod's log says about its rendezvous."""

    pod: PodState
    what: str
    lines: tuple[str, ...]
    bind: bool = False
    """The store itself could not listen on its port (not the others failing to reach it)."""
    steps: tuple[str, ...] | None = None
    """The steps of the launcher whose rendezvous it is, where it is not torch's."""


def _miss(pod: PodState) -> Miss | None:
    lines = bounded(pod_text(pod))
    said = [
        line
        for i, line in enumerate(lines)
        if (
            _said(line)
            or _store_bind(lines, i)
            or _server_bind(lines, i)
            or _session_waited(lines, i)
            or _init_connect(lines, i)
            or _store_reset(lines, i)
            or _barrier_gave_up(lines, i)
        )
        and not _recovered(lines, i)
    ]
    if not said:
        return None
    text = "\n".join(said)
    steps: tuple[str, ...] | None = None
    if (lost := _lost_store(text)) is not None:
        what, steps = lost
    elif (m := STORE_WAIT.search(text)) is not None:
        joined = f"only {m['joined']} of {m['expected']} joined"
        waited = f"waited {m['after']}s" if m["after"] else "waited"
        what = f"{waited} for the others at its c10d store and {joined}"
    elif (m := STORE_WAITED.search(text)) is not None:
        what = f"waited {m['after']}s for the others at its c10d store and not all joined"
    elif STORE_BIND.search(text) is not None or (
        ADDRESS_IN_USE.search(text) is not None and _server_taken(text, lines) is None
    ):
        port = next((m["port"] for m in STORE_BIND.finditer(text) if m["port"]), None)
        on = f"port {port}" if port else "its port"
        what = (
            f"could not start the c10d store of the rendezvous: {on} was already in use (another "
            f"process on the node, or an earlier run's, holds it)"
        )
    elif (m := CLIENT_TIMEOUT.search(text)) is not None:
        after = int(m["after"]) // 1000 if m["unit"] == "ms" else int(m["after"])
        at = f" at {m['host']}:{m['port']}" if m["host"] else ""
        what = f"could not reach the c10d store{at} within {after}s"
    elif (m := STORE_CLIENT.search(text) or CLIENT_FAILED.search(text)) is not None:
        why = f" ({reason.rstrip('. ')})" if (reason := m.groupdict().get("reason")) else ""
        what = f"could not reach the c10d store at {m['host']}:{m['port']}{why}"
    elif (m := CONNECT_TIMEOUT.search(text)) is not None:
        what = f"could not reach the c10d store within {int(m['ms']) // 1000}s"
    elif (m := STORE_GET.search(text)) is not None:
        what = (
            f"could not get NCCL's unique id from rank {m['root']} through the c10d store "
            f"({m['error'].strip().rstrip('.')})"
        )
    elif (m := STORE_INPUT.search(text)) is not None:
        what = (
            f"waited {int(m['ms']) // 1000}s for the c10d store at {m['host']}:{m['port']} to answer and "
            f"got nothing"
        )
    elif (outwaited := _waited_out(text, said)) is not None:
        what, steps = outwaited
    elif (m := next((m for line in said if (m := CONNECT_RAISED.match(line))), None)) is not None:
        what = (
            f"could not connect to the others while the process group was set up ({m['error']}, raised "
            f"under init_process_group's store or Gloo's mesh)"
        )
    elif STORE_RESET.search(text) is not None:
        what = (
            "had its connection to the c10d store reset while the store was being set up (its server on the "
            "master closed it: rank 0 gone, or more clients at once than its listen backlog holds)"
        )
    elif HTTP_STORE.search(text) is not None:
        what = (
            "could not reach the launcher's HTTP rendezvous store (Horovod's Gloo: its requests failed too "
            "many times)"
        )
    elif (named := _named_error(text)) is not None:
        what = named
    elif (m := ETCD.search(text)) is not None:
        what = (
            "could not reach the etcd server of its rendezvous (--rdzv-endpoint)"
            if m["error"] == "EtcdConnectionFailed"
            else "found its rendezvous's state in etcd gone or never written (etcd's key not found: the "
            "rendezvous of this --rdzv-id was closed, expired or removed)"
        )
    elif (launched := _launcher_miss(text, lines)) is not None:
        what, steps = launched
    elif BARRIER.search(text) is not None:
        what = "timed out in the process group's store barrier"
    else:
        what = "could not register all tasks with the coordination service (JAX / TensorFlow) at start-up"
    bind = what.startswith("could not start the c10d store")
    return Miss(pod, what, tuple(dict.fromkeys(said))[:6], bind, steps)


def _waited_out(text: str, said: list[str]) -> tuple[str, tuple[str, ...] | None] | None:
    """What a rank said of a store of Gloo's rendezvous it waited out (:data:`GLOO_STORE_WAIT`; Horovod's
    HTTP store with its own steps), or of torch 1.x's store raising a bare ``Wait timeout`` while the process
    group was set up, or of the c10d store's own timeout (:data:`STORE_TIMEOUT`): its sentence, and its steps
    where they are not torch's."""
    if (m := STORE_TIMEOUT.search(text)) is not None:
        error = m[0].removesuffix(", keys: ").rstrip()
        return f"timed out waiting on the c10d store ({error}): a rank never wrote its key", None
    if GLOO_STORE_WAIT.search(text) is not None:
        if "http_store" in text or "HOROVOD_GLOO" in text:
            return (
                "timed out waiting on the launcher's HTTP rendezvous store (Horovod's Gloo): a rank never "
                "wrote its key",
                _HOROVOD_GLOO_STEPS,
            )
        return "timed out waiting on Gloo's rendezvous store: a rank never wrote its key", None
    if any((m := CONNECT_RAISED.match(line)) is not None and m["error"].startswith("Wait") for line in said):
        return (
            "timed out waiting on the store while the process group was set up (Wait timeout, raised under "
            "init_process_group's store or Gloo's mesh): a rank never wrote its key",
            None,
        )
    return None


def _launcher_miss(text: str, lines: tuple[str, ...]) -> tuple[str, tuple[str, ...] | None] | None:
    """What a launcher's own rendezvous said it missed (Horovod's driver, Julia's cluster managers) or the
    process group's store barrier given up: its sentence, and its steps where they are not torch's."""
    if (m := HOROVOD_START.search(text)) is not None:
        activity = m["activity"] or m["activity2"]
        return (
            f"waited in Horovod's driver for {activity} and timed out: its tasks never registered",
            _HOROVOD_STEPS,
        )
    if RAY_JOIN.search(text) is not None:
        return "could not join the Ray cluster's head (its GCS did not answer in time)", _RAY_STEPS
    if (taken := _server_taken(text, lines)) is not None:
        return taken
    if (m := TF_SESSION.search(text)) is not None:
        tasks = sorted({t["task"] for t in TF_SESSION.finditer(text)})
        return (
            f"waited for TensorFlow's master to create its session: {', '.join(tasks[:4])} never answered",
            _TF_SESSION_STEPS,
        )
    if XGBOOST_TRACKER.search(text) is not None:
        return "could not start XGBoost's Rabit tracker, where its workers meet", _XGBOOST_STEPS
    if JULIA_MANAGER.search(text) is not None:
        return (
            "launched Julia workers that never connected back to its cluster manager (addprocs timed out)",
            _JULIA_STEPS,
        )
    if DASK_SCHEDULER.search(text) is not None:
        return "could not reach Dask's scheduler (its port 8786) in time", _DASK_STEPS
    if HIVEMIND_BOOTSTRAP.search(text) is not None:
        return (
            "could not join its hivemind swarm: none of the DHT's initial peers answered, or its libp2p "
            "daemon (p2pd) did not start and reach them",
            _HIVEMIND_STEPS,
        )
    if JULIA_MASTER_WAIT.search(text) is not None:
        return (
            "launched Julia workers that the master never connected to in time (each waited "
            "JULIA_WORKER_TIMEOUT for it, then exited)",
            _JULIA_MASTER_STEPS,
        )
    if (m := BARRIER_WAIT.search(text)) is not None:
        joined = f"{m['count']} counted of world_size {m['world']}"
        extra = (
            ": more than the world size, so another run's ranks share its store and key (MASTER_PORT)"
            if int(m["count"]) > int(m["world"])
            else ""
        )
        return (
            f"waited in the process group's store barrier ({joined}) until init_process_group raised{extra}",
            None,
        )
    return None


def _server_taken(text: str, lines: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """What a rank said of a server its peers meet at, other than the c10d store, unable to bind its port
    (a gRPC server of TensorFlow's, torchft's lighthouse): its sentence and its steps."""
    if SERVER_BIND.search(text) is not None:
        port = _BOUND_PORT.search(text)
        on = f"port {port['port'] or port['port2']}" if port else "its port"
        return (
            f"could not start the gRPC server its cluster's tasks meet at (TensorFlow's tf.train.Server or "
            f"its coordination service): {on} was already in use",
            _GRPC_BIND_STEPS,
        )
    if ADDRESS_IN_USE.search(text) is not None and any(map(SERVER_FRAME.search, lines)):
        return (
            "could not start torchft's lighthouse, where its replica groups meet for each quorum: its port "
            "was already in use",
            _LIGHTHOUSE_STEPS,
        )
    return None


def _lost_store(text: str) -> tuple[str, tuple[str, ...] | None] | None:
    """What a rank said of the store it lost or never reached, where it is the c10d socket's poll or a
    job's etcd, or of the store's address it never had (env:// with a variable unset): its sentence, and its
    steps where they are not torch's."""
    if (m := ENV_UNSET.search(text)) is not None:
        return (
            f"found {m['var']} unset, which init_process_group's env:// rendezvous reads the others' meeting "
            f"place from",
            _ENV_STEPS,
        )
    if (m := STORE_POLL.search(text)) is not None:
        reason = m["reason"].rstrip(". ")
        return (
            f"lost its connection to the c10d store while waiting for its answer (polling the socket "
            f"failed: {reason})",
            None,
        )
    if (m := ETCD_DIAL.search(text)) is not None:
        at = f"{m['host']}:{m['port']}" if m["host"] else f"port {m['port']}"
        return (
            f"could not reach the etcd its trainers and parameter servers register in ({at}: {m['reason']})",
            _ETCD_STEPS,
        )
    return None


def _named_error(text: str) -> str | None:
    """What an error class of torch's rendezvous named in ``text`` says, with no more said than its name:
    the c10d store's named with a count or the run that hit it, elastic's handler's errors."""
    if STORE_TITLED.search(text) is not None:
        return "failed at the c10d store: not every rank joined it (torch.distributed's store error)"
    if CONNECTION_ERROR.search(text) is not None:
        if any(m["backend"] == "etcd" for m in CONNECTION_ERROR.finditer(text)):
            return "could not connect to the etcd server of its rendezvous (--rdzv-endpoint)"
        return "could not connect to the c10d store of the rendezvous"
    if (m := ELASTIC.search(text)) is not None:
        closed = m["error"] == "RendezvousClosedError"
        return "found the rendezvous closed" if closed else "timed out waiting at the rendezvous"
    return None


def _said(line: str) -> bool:
    return any(
        (m := p.search(line)) is not None and not is_mention(line, m.start()) for p in RENDEZVOUS_SIGNS
    )


def _store_bind(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` raises ``Address already in use`` under a frame creating the c10d store."""
    line = lines[index]
    if (m := ADDRESS_IN_USE.search(line)) is None or is_mention(line, m.start()):
        return False
    return any(STORE_FRAME.search(before) for before in lines[max(0, index - _FRAMES) : index])


def _server_bind(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` raises ``Address already in use`` under a frame starting torchft's lighthouse
    (:data:`SERVER_FRAME`)."""
    line = lines[index]
    if (m := ADDRESS_IN_USE.search(line)) is None or is_mention(line, m.start()):
        return False
    return any(SERVER_FRAME.search(before) for before in lines[max(0, index - _FRAMES) : index])


def _session_waited(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` is TensorFlow's master still waiting for a task (:data:`TF_SESSION`) and it
    said so more than once in the tail: one report is its ordinary wait while the tasks start."""
    if TF_SESSION.search(lines[index]) is None:
        return False
    return sum(1 for line in lines if TF_SESSION.search(line)) > 1


def _init_connect(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` raises a bare connection failure under a frame where the processes meet
    (:data:`INIT_FRAME`): older torch's ``RuntimeError: Connection timed out`` under ``TCPStore(``."""
    if CONNECT_RAISED.match(lines[index]) is None:
        return False
    return any(INIT_FRAME.search(before) for before in lines[max(0, index - _FRAMES) : index])


def _barrier_gave_up(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` is the store barrier's progress line (:data:`BARRIER_WAIT`) and a traceback
    through ``init_process_group`` follows it with no barrier completed: the barrier gave up, even where
    the tail lost the timeout's own message."""
    if BARRIER_WAIT.search(lines[index]) is None or any(BARRIER_DONE.search(line) for line in lines):
        return False
    after = lines[index + 1 :]
    raised = next((j for j, line in enumerate(after) if line.startswith("Traceback (most recent call")), None)
    return raised is not None and any(BARRIER_RAISED.search(line) for line in after[raised:])


def _store_reset(lines: tuple[str, ...], index: int) -> bool:
    """Whether ``lines[index]`` says a connection was reset, raised under a frame that creates or first awaits
    the c10d store (:data:`STORE_SETUP`, on its line or above it, or in c10's C++ frames listed under it after
    ``Exception raised from``: ``c10d::TCPStore::ping()`` in ``c10d::TCPStore::TCPStore(…)``): a reset later
    in training is the mesh's."""
    line = lines[index]
    if (m := STORE_RESET.search(line)) is None or is_mention(line, m.start()):
        return False
    if any(STORE_SETUP.search(before) for before in lines[max(0, index - _FRAMES) : index + 1]):
        return True
    after = lines[index + 1 : index + 2 + _CPP_FRAMES]
    return (
        bool(after)
        and _RAISED.match(after[0]) is not None
        and any(_CPP_FRAME.match(frame) and STORE_SETUP.search(frame) for frame in after[1:])
    )


_CPP_FRAMES = 8
"""How far under c10's ``Exception raised from`` line its frames are read."""
_CPP_FRAME = re.compile(r"^\s{0,8}(?:\[rank\d{1,7}\]: ?)?frame #\d{1,3}: ")


_FRAMES = 6
"""How far above an exception the frame that raised it is looked for."""
_CONNECTED = re.compile(r"[Cc]onnected to\b|has connected\b|[Rr]econnected\b|[Ss]uccessfully connected")


def _recovered(lines: tuple[str, ...], index: int) -> bool:
    """Whether the miss on ``lines[index]`` was retried or followed by a connection that worked."""
    spent = RETRY_SPENT.search(lines[index])
    if spent is not None and int(spent["after"]) >= int(spent["timeout"]):
        return False  # its whole timeout waited out before the retry: no retry is left
    after = lines[index + 1 : index + 1 + HANDLED_WITHIN]
    if after and _RAISED.match(after[0]):
        return False  # the exception the retried call raised follows: the retries ended in it
    return handled(lines, index) or any(_CONNECTED.search(line) for line in after)


_RAISED = re.compile(r"^\s{0,8}(?:\[rank\d{1,7}\]: ?)?Exception raised from \w{1,80} at ")
"""c10's account of the C++ exception just raised (``Exception raised from recvBytes at …``)."""


def _detect_rendezvous(state: RunState, ctx: Context) -> Detection | None:
    misses = [m for pod in state.current_pods() if not pod.deleted and (m := _miss(pod)) is not None]
    if not misses:
        return None
    first = misses[0]
    return Detection(
        root_cause=f"{who(first.pod)} {first.what}: the processes never all met"
        f"{also([m.pod for m in misses[1:]])}",
        evidence=tuple(e for m in misses for e in log_facts(m.pod, m.lines)),
        key=tuple(f"{m.pod.uid}/{m.what}" for m in misses),
        remediation=_BIND_STEPS if first.bind else first.steps,
    )


_ETCD_STEPS = (
    "Check the etcd endpoint the job's processes are given (PaddlePaddle's etcd endpoints, --rdzv-endpoint "
    "for torch's etcd backend): from a pod, etcdctl --endpoints=<host>:2379 endpoint health.",
    "Start etcd (its Service and pod) before the job's servers and trainers, and let the NetworkPolicies "
    "of the namespace allow port 2379 from them: kubectl -n {namespace} get networkpolicy",
)
_JULIA_STEPS = (
    "Julia's cluster manager waited for the workers it launched to connect back and none did in time: "
    "check each worker starts (its own output, julia found at the same path on every host), and raise "
    "JULIA_WORKER_TIMEOUT (60 s by default) where they start slowly.",
    "The workers connect to the manager's address and port: check the manager's host name resolves from "
    "the workers (bind_to= / --bind-to) and no NetworkPolicy or firewall blocks the port it listens on.",
)
_DASK_STEPS = (
    "Dask: the client and every worker connect to the scheduler's address (tcp://<host>:8786); check the "
    "scheduler's pod is Running and listening (its log's 'Scheduler at: tcp://…'), that the address given "
    "to Client() / dask worker resolves from the pods (its Service, not 127.0.0.1 or a container's own IP), "
    "and that no NetworkPolicy blocks 8786.",
    "Where the scheduler starts after them, raise distributed.comm.timeouts.connect "
    "(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT) or start the scheduler first.",
)
_HIVEMIND_STEPS = (
    "hivemind: each peer joins the swarm through the multiaddrs of its initial_peers (/ip4/<ip>/tcp/<port>/"
    "p2p/<id>); check they are the announced address and port of a peer that is running (its "
    "host_maddrs / announce_maddrs, the public address behind NAT), and that its port is open between the "
    "pods or hosts (a Service or hostPort, no NetworkPolicy or firewall dropping it).",
    "Where the daemon is only slow to start (a loaded or small host), raise its startup_timeout; "
    "ensure_bootstrap_success=False lets the first peer of a new swarm start alone.",
)
_JULIA_MASTER_STEPS = (
    "Julia's Distributed: each worker addprocs launched printed its address and waited for the master to "
    "connect to it; none came in time. Check the master reaches each worker's host and port (the worker's "
    "host name resolves from the master's pod, bind_to= / --bind-to names an address the master can "
    "route to, no NetworkPolicy or firewall blocks the workers' ports), and raise JULIA_WORKER_TIMEOUT "
    "(60 s by default) where the master is slow to get to every worker (hundreds of them, a busy scheduler).",
)
_HOROVOD_STEPS = (
    "Horovod's driver waits --start-timeout (HOROVOD_START_TIMEOUT, 30 s by default) for every task to "
    "register: check every worker pod (or Ray actor) started, and raise the timeout where they start "
    "slowly (image pulls, scheduling).",
    "The tasks register with the driver over the network: the driver's host and port must be reachable "
    "from every worker (NetworkPolicies; HOROVOD_GLOO_IFACE / --network-interface naming the pods' "
    "interface).",
)


_RAY_STEPS = (
    "A Ray node joins its cluster at the head's GCS address (ray start --address=<head>:6379, the "
    "RayCluster's head service): check the head pod is running and its GCS listening, and that the "
    "address the worker was given is the head's (not empty, not 127.0.0.1 on another pod).",
    "The GCS port (6379 by default) and the node manager's ports must be reachable from every worker "
    "(NetworkPolicies); where the head starts slowly, raise RAY_raylet_start_wait_time_s or start the "
    "workers after it.",
)
_BOUND_PORT = re.compile(
    r"\"target_address\":\"[^\"]{0,200}:(?P<port>\d{1,5})\"|resolved on \S{0,200}:(?P<port2>\d{1,5})"
)
_TF_SESSION_STEPS = (
    "TensorFlow's master waits for every task of its cluster spec before it creates the session: check the "
    "task it names is running and started its server (tf.train.Server / tf.distribute.Server), and that "
    "the host:port its entry in TF_CONFIG (or --ps_hosts / --worker_hosts) gives resolves to that pod and "
    "is open (its headless Service, NetworkPolicies).",
    "A task that exited or was never scheduled leaves the others waiting for ever; a device_filters entry in "
    "the session's ConfigProto stops a worker waiting for the other workers it does not use.",
)
_GRPC_BIND_STEPS = (
    "Find what holds the port on that pod or node (kubectl -n {namespace} exec <pod> -- ss -ltnp): a server "
    "of an earlier attempt still running, another task given the same host:port in the cluster spec, or "
    "another job's pod on the node's host network.",
    "Each task's server must bind the port its own entry in TF_CONFIG (or the cluster spec) names: give "
    "every task a port nothing else on its host uses.",
)
_LIGHTHOUSE_STEPS = (
    "torchft's lighthouse binds its --bind address (port 29510 by default): find what holds it (ss -ltnp; a "
    "lighthouse of an earlier run still running), or start it on a free port and point the replica groups' "
    "TORCHFT_LIGHTHOUSE at that one.",
)
_XGBOOST_STEPS = (
    "XGBoost4J-Spark starts a Rabit tracker on the driver for its workers to meet at: check the driver's "
    "log for why it could not (its port, its host's address: xgboost's tracker_conf / "
    "spark.driver.host), and that the driver can bind it.",
    "The executors connect to the tracker on the driver's host: its port must be reachable from every "
    "executor (NetworkPolicies, the Spark driver's service).",
)
_HOROVOD_GLOO_STEPS = (
    "Horovod's Gloo workers wait HOROVOD_GLOO_TIMEOUT_SECONDS (30 s by default) at the launcher's HTTP store "
    "for every rank's key: check every worker pod (or Ray actor) started and reached hvd.init(), and raise "
    "the timeout where they start slowly (image pulls, scheduling, data loading before init).",
    "The workers reach the store at the launcher's address and port: it must be reachable from every worker "
    "(NetworkPolicies; HOROVOD_GLOO_IFACE / --network-interface naming the pods' interface).",
)


_ENV_STEPS = (
    "init_process_group's env:// rendezvous reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from each "
    "process's environment: a PyTorchJob's operator and torchrun set them for the processes they start, a "
    "script started by hand, by mpirun or by a plain Job must set them itself.",
    "Or pass the meeting place explicitly: init_method='tcp://<rank 0 host>:<port>' with rank and world_size "
    "(torch.distributed.rpc's init_rpc takes the same through its rpc_backend_options).",
)
_BIND_STEPS = (
    "The master's c10d store could not listen on MASTER_PORT (--rdzv-endpoint's port): find what holds it "
    "on that pod or node: kubectl -n {namespace} exec <master pod> -- ss -ltnp (a leftover torchrun of an "
    "earlier attempt, or another job where the pods use hostNetwork).",
    "Give the job a port nothing else uses, or let torchrun pick one (--standalone, --rdzv-endpoint "
    "host:0 for a single node); do not start two torchrun on one pod with the same port.",
)


RENDEZVOUS = Rule(
    id="rendezvous",
    kind="cause",
    severity="critical",
    summary="The processes of a launcher-less job (torchrun) never met: the c10d store / rendezvous "
    "timed out or could not be reached.",
    remediation=(
        "Check that the master replica (rank 0) is Running and that the endpoint the others use "
        "(MASTER_ADDR/MASTER_PORT, --rdzv-endpoint) is its Service: kubectl -n {namespace} get pods,svc "
        "-l training.kubeflow.org/job-name={job}",
        "Allow pod-to-pod traffic on the rendezvous port between the job's pods (NetworkPolicies, "
        "sidecar injection).",
        "If some replicas start much later than others (image pulls, scheduling), use gang scheduling "
        "or raise the rendezvous timeout (--rdzv-conf timeout=…, init_process_group(timeout=…)).",
    ),
    detect=_detect_rendezvous,
)
