"""How findings speak: names of pods and hosts, lists and durations, in the user's words.

Every root-cause sentence is built from these helpers so the same thing is always said the
same way: ``Worker 2`` (not ``pi-worker-2`` or ``worker #2``), ``worker-1`` for a host
named in an MPI log, ``20m`` for a duration, ``; also worker 3`` for further pods with the
same problem.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from datetime import datetime

from consumers.rules.state import PodState, RunState


def who(pod: PodState) -> str:
    """``Worker 2``, ``Launcher``, a training-operator replica by type and index (``Master-0``,
    ``Worker-3``, ``PS-1``), or ``Pod <name>`` when the role slot is unknown."""
    if pod.replica_name is not None:
        return pod.replica_name
    if pod.role == "launcher":
        return "Launcher"
    if pod.index is not None:
        return f"Worker {pod.index}"
    return f"Pod {pod.name}"


def listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def also(pods: Sequence[PodState]) -> str:
    """``; also worker 3 and worker 5`` for pods beyond the first one named, else ``""``."""
    if not pods:
        return ""
    return "; also " + listing([mention(p) for p in pods])


def mention(pod: PodState) -> str:
    """:func:`who` mid-sentence: ``worker 3``, but a replica's name as it is (``Worker-3``)."""
    return who(pod) if pod.replica_name is not None else lower_first(who(pod))


def duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``20m``, ``1h5m``, ``2h`` (floored)."""
    total = max(int(seconds), 0)
    if total < 60:
        return f"{total}s"
    hours, rest = divmod(total, 3600)
    minutes = rest // 60
    if hours == 0:
        return f"{minutes}m"
    return f"{hours}h{minutes}m" if minutes else f"{hours}h"


def short_host(host: str) -> str:
    """The first DNS label of a host name (``pi-worker-1.pi.team-a.svc`` → ``pi-worker-1``)."""
    host = host.strip().strip("[]()\"'.,:")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0]
    return host


_GENERATED = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}")
"""The suffix ``generateName`` adds: a Job's pods are ``<hostname>-x7k2p``, JobSet's included."""


def _named_after(pod_name: str, host: str) -> bool:
    """Whether a pod was generated from ``host``: a JobSet pod's hostname is its Job's name and
    completion index (``llm-node-0-1``), the pod's name that plus a random suffix."""
    return pod_name.startswith(host) and _GENERATED.fullmatch(pod_name[len(host) :]) is not None


def host_label(host: str, state: RunState) -> str:
    """How to call a host named in an MPI or torch log: ``worker-1`` if it is one of the run's pods."""
    short = short_host(host)
    prefix = f"{state.ref.name}-"
    for pod in state.current_pods():
        if short in (pod.name, pod.node) or host == pod.node or _named_after(pod.name, short):
            return "launcher" if pod.role == "launcher" else _slot_label(pod)
    return short.removeprefix(prefix) if short.startswith(prefix) else short


MAX_QUOTED_CHARS = 160
"""Characters of a seen line an observation quotes (the evidence carries it whole)."""


def quoted(line: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """A log line put in a sentence: stripped, in quotes, cut with ``…`` past ``limit``."""
    text = " ".join(line.split())
    return f'"{text if len(text) <= limit else text[: limit - 1].rstrip() + "…"}"'


def clock_time(at: datetime) -> str:
    """``10:42:07 UTC``: when something was seen, to the second."""
    return f"{at:%H:%M:%S} UTC"


def printed(subject: str, line: str, at: datetime) -> str:
    """What a running job was seen printing, as a fact and not a verdict:
    ``Worker-1 printed "… CUDA out of memory …" at 10:42:07 UTC; the job is still running``."""
    return f"{subject} printed {quoted(line)} at {clock_time(at)}; the job is still running"


def first_sentence(message: str) -> str:
    """The first sentence of a Kubernetes message, without its final period."""
    head = message.strip().split(". ", 1)[0]
    return head.rstrip(".")


def quantity(count: int, noun: str) -> str:
    """``1 GPU``, ``8 GPUs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _slot_label(pod: PodState) -> str:
    if pod.replica_name is not None:
        return pod.replica_name
    return f"worker-{pod.index}" if pod.index is not None else pod.name


def lower_first(text: str) -> str:
    """Lower-case the first letter, for a name or message put mid-sentence."""
    return text[:1].lower() + text[1:]


def rank_subject(state: RunState, pod: PodState, rank: int | None) -> str:
    """Who a log line speaks for: ``Worker 2``, ``Worker 1 (rank 11)``, or for the launcher,
    which carries every rank's output under mpirun, ``Rank 17 on worker-2`` / ``A rank``."""
    if pod.role != "launcher":
        return who(pod) + (f" (rank {rank})" if rank is not None else "")
    if rank is None:
        return "A rank"
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    return f"Rank {rank} on worker-{rank // slots}" if slots else f"Rank {rank}"


SIGNALS: dict[int, str] = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    5: "SIGTRAP",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    10: "SIGUSR1",
    11: "SIGSEGV",
    12: "SIGUSR2",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
}
"""Linux signal numbers (x86 and arm64 agree on these), for exit codes 128 + N."""

_SIGNAL_MEANINGS: dict[int, str] = {
    4: "illegal instruction: a binary built for another CPU",
    6: "aborted: a failed assertion, abort() or an uncaught C++ exception",
    7: "bus error: a bad memory access, often a full /dev/shm",
    8: "arithmetic error",
    9: "killed from outside: the OOM killer, a deletion or preemption past its grace period, or kill -9",
    11: "segmentation fault in native code",
    13: "wrote to a closed pipe or socket",
    15: "asked to stop: a deletion, a preemption, or the launcher stopping the ranks after another failed",
}
_EXIT_MEANINGS: dict[int, str] = {
    1: "a general error",
    2: "misuse of a command: bad arguments or a shell syntax error",
    126: "the command is not executable",
    127: "command not found",
    255: "exit status 255: ssh, mpirun and exit(-1) all use it for any failure",
}


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9, ``signal 42`` for a number without a name here."""
    return SIGNALS.get(number, f"signal {number}")


def exit_signal(code: int | None) -> int | None:
    """The signal an exit code reports (128 + N, as the shell and the kubelet say), if any."""
    return code - 128 if code is not None and 128 < code < 160 else None


def exit_meaning(code: int) -> str:
    """What an exit code usually means, in a few words."""
    signal = exit_signal(code)
    if signal is not None:
        return _SIGNAL_MEANINGS.get(signal, f"killed by {signal_name(signal)}")
    return _EXIT_MEANINGS.get(code, "an error code of the program")
