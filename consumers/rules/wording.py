"""How findings speak: names of pods and hosts, lists and durations, in the user's words.

Every root-cause sentence is built from these helpers so the same thing is always said the
same way: ``Worker 2`` (not ``pi-worker-2`` or ``worker #2``), ``worker-1`` for a host
named in an MPI log, ``20m`` for a duration, ``; also worker 3`` for further pods with the
same problem.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from consumers.rules.state import PodState, RunState


def who(pod: PodState) -> str:
    """``Worker 2``, ``Launcher``, or ``Pod <name>`` when the role slot is unknown."""
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
    return "; also " + listing([lower_first(who(p)) for p in pods])


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


def host_label(host: str, state: RunState) -> str:
    """How to call a host named in an MPI log: ``worker-1`` if it is one of the run's pods."""
    short = short_host(host)
    prefix = f"{state.ref.name}-"
    for pod in state.current_pods():
        if short in (pod.name, pod.node) or host == pod.node:
            return "launcher" if pod.role == "launcher" else _slot_label(pod)
    return short.removeprefix(prefix) if short.startswith(prefix) else short


def first_sentence(message: str) -> str:
    """The first sentence of a Kubernetes message, without its final period."""
    head = message.strip().split(". ", 1)[0]
    return head.rstrip(".")


def quantity(count: int, noun: str) -> str:
    """``1 GPU``, ``8 GPUs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _slot_label(pod: PodState) -> str:
    return f"worker-{pod.index}" if pod.index is not None else pod.name


def lower_first(text: str) -> str:
    """Lower-case the first letter, for a name or message put mid-sentence."""
    return text[:1].lower() + text[1:]
