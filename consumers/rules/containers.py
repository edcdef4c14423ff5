"""Rules ``image-pull`` and ``crashloop``: containers that cannot start or keep dying.

``image-pull`` fires while a container waits in ``ErrImagePull`` / ``ImagePullBackOff``.
The back-off message only says "Back-off pulling image"; the registry's answer is in the
``ErrImagePull`` message or the kubelet's ``Failed`` Event, so both are read and boiled
down to a short cause: authentication required, not found, timeout, …

``crashloop`` fires on ``CrashLoopBackOff`` unless a more specific rule already explains
that pod (an OOM kill; a GPU out of memory or failing, a segfault, a full disk, an MPI or
NCCL failure in its log): the loop is then only the kubelet restarting the consequence.
It alternates with short Running spells, so the engine keeps it firing for ``settle_s``
after the back-off clears.
"""

from __future__ import annotations

import re

from consumers.rules.facts import pod_text, role_spec
from consumers.rules.memory import oom_kill
from consumers.rules.rule import Context, Detection, Rule, container_fact, event_fact
from consumers.rules.signatures import disk_full, gpu_errors, native_crashes, transport_failures
from consumers.rules.state import PodState, RunState
from consumers.rules.tails import comm_failures, gpu_oom_lines, rank_failures
from consumers.rules.wording import also, listing, quantity, who
from controller.contract.events import ContainerState
from controller.contract.findings import Evidence

PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"})
_IMAGE = re.compile(r"image \\?\"(?P<image>[^\"\\]+)\\?\"")

# (cause in the user's words, pattern); the first match wins, so the ambiguous Docker Hub
# answer "pull access denied, repository does not exist or may require authorization"
# is caught before the plain "not found" and "denied" patterns.
_PULL_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("not found or access denied", re.compile(r"does not exist or may require authorization", re.I)),
    ("not found", re.compile(r"not found|manifest unknown|no such image|does not exist", re.I)),
    (
        "authentication required",
        re.compile(
            r"unauthorized|authentication required|no basic auth credentials|denied|forbidden|"
            r"insufficient_scope|authorization failed|\b401\b|\b403\b",
            re.I,
        ),
    ),
    ("rate limited by the registry", re.compile(r"toomanyrequests|rate limit", re.I)),
    ("registry host not found", re.compile(r"no such host|server misbehaving", re.I)),
    ("TLS certificate not trusted", re.compile(r"x509|certificate", re.I)),
    ("timeout", re.compile(r"timeout|timed out|deadline exceeded", re.I)),
    ("invalid image name", re.compile(r"InvalidImageName|invalid reference format", re.I)),
    (
        "pulling is disabled (imagePullPolicy: Never)",
        re.compile(r"ErrImageNeverPull|PullPolicy is Never", re.I),
    ),
)


def pull_cause(text: str) -> str | None:
    """The short cause of a failed pull, from the registry's or kubelet's wording."""
    return next((cause for cause, pattern in _PULL_CAUSES if pattern.search(text)), None)


def _pulling(pod: PodState) -> list[ContainerState]:
    return [c for c in pod.containers if c.state == "waiting" and c.reason in PULL_REASONS]


def _detect_image_pull(state: RunState, ctx: Context) -> Detection | None:
    images: dict[str, str | None] = {}
    evidence: list[Evidence] = []
    for pod in state.current_pods():
        if pod.deleted:
            continue
        for c in _pulling(pod):
            texts = [c.reason or "", c.message or ""]
            evidence.append(container_fact(pod, c, "state.waiting.reason", c.reason))
            if c.message:
                evidence.append(container_fact(pod, c, "state.waiting.message", c.message))
            for event in state.events_about(pod):
                if event.reason in ("Failed", "ErrImagePull") and "pull" in event.message.lower():
                    texts.append(event.message)
                    evidence.append(event_fact(event))
            image = _image_named(texts) or _spec_image(state, pod) or c.name
            images.setdefault(image, None)
            images[image] = images[image] or pull_cause(" ".join(texts))
    if not images:
        return None
    (image, cause), *others = images.items()
    sentence = f"Failed to pull image '{image}'" + (f": {cause}" if cause else "")
    if others:
        sentence += "; also " + listing([f"'{name}'" for name, _ in others])
    return Detection(
        root_cause=sentence,
        evidence=tuple(dict.fromkeys(evidence)),
        key=tuple(f"{name}:{why}" for name, why in images.items()),
        remediation=_PULL_REMEDIATION.get(cause or ""),
    )


def _image_named(texts: list[str]) -> str | None:
    for text in texts:
        match = _IMAGE.search(text)
        if match is not None:
            return match.group("image")
    return None


def _spec_image(state: RunState, pod: PodState) -> str | None:
    spec = role_spec(state, pod)
    return spec.image if spec is not None else None


def _explained_elsewhere(state: RunState, pod: PodState, ctx: Context) -> bool:
    """Another rule names the reason this pod keeps restarting: its own OOM, a GPU, crash,
    disk or communication failure in its own log, or for the launcher an MPI failure in its
    log or workers that cannot start (no node, no image)."""
    text = pod_text(pod)
    if oom_kill(state, pod, ctx) is not None or gpu_oom_lines(text):
        return True
    if gpu_errors(text) or native_crashes(text) or disk_full(text) or transport_failures(text):
        return True
    if comm_failures(text) or rank_failures(text):
        return True
    if pod.role != "launcher":
        return False
    return any(not w.scheduled or _pulling(w) for w in state.workers() if not w.deleted)


def _detect_crashloop(state: RunState, ctx: Context) -> Detection | None:
    looping: list[tuple[PodState, ContainerState]] = []
    for pod in state.current_pods():
        if pod.deleted or _explained_elsewhere(state, pod, ctx):
            continue
        looping.extend(
            (pod, c) for c in pod.containers if c.state == "waiting" and c.reason == "CrashLoopBackOff"
        )
    if not looping:
        return None
    pod, c = looping[0]
    last = f", last exit code {c.last_exit_code}" if c.last_exit_code is not None else ""
    if c.last_reason not in (None, "Error") and last:
        last += f" ({c.last_reason})"
    evidence: list[Evidence] = []
    for p, container in looping:
        evidence.append(container_fact(p, container, "state.waiting.reason", container.reason))
        evidence.append(container_fact(p, container, "restartCount", container.restart_count))
        if container.last_exit_code is not None:
            evidence.append(
                container_fact(p, container, "lastState.terminated.exitCode", container.last_exit_code)
            )
    others = [state.pods[uid] for uid in dict.fromkeys(p.uid for p, _ in looping) if uid != pod.uid]
    return Detection(
        root_cause=f"{who(pod)} is crash-looping: "
        f"restarted {quantity(c.restart_count, 'time')}{last}{also(others)}",
        evidence=tuple(evidence),
        # a new revision when the restart count doubles: the sentence stays roughly true, the
        # people told are not told again on every restart of a flapping container
        key=tuple(
            f"{p.uid}/{container.name}/{restart_bucket(container.restart_count)}" for p, container in looping
        ),
    )


def restart_bucket(restarts: int) -> int:
    """The largest power of two not above ``restarts`` (0 for none)."""
    return 1 << (restarts.bit_length() - 1) if restarts > 0 else 0


_PULL_REMEDIATION: dict[str, tuple[str, ...]] = {
    "authentication required": (
        "Create a docker-registry Secret with credentials for the registry and list it under "
        "imagePullSecrets of every role (or of the namespace's default ServiceAccount).",
        "Check the Secret is in namespace {namespace} and that the credentials have not expired.",
    ),
    "not found": (
        "Check the image name and tag for typos and that the tag was pushed: "
        "the registry does not know this reference.",
    ),
    "not found or access denied": (
        "Check the image name and tag; if the repository is private, add imagePullSecrets.",
    ),
    "timeout": (
        "Check that nodes can reach the registry (egress firewall, proxy, DNS).",
        "For very large images, pre-pull them or use a registry mirror close to the cluster.",
    ),
}

IMAGE_PULL = Rule(
    id="image-pull",
    kind="cause",
    severity="warning",
    summary="A container image cannot be pulled.",
    remediation=(
        "Read the exact registry answer: kubectl -n {namespace} describe pod <pod> (Events section).",
        "Check the image reference, that the tag exists, and the job's imagePullSecrets.",
    ),
    detect=_detect_image_pull,
)

CRASHLOOP = Rule(
    id="crashloop",
    kind="cause",
    severity="warning",
    summary="A container keeps exiting and the kubelet keeps restarting it.",
    remediation=(
        "Read the last crash: kubectl -n {namespace} logs <pod> -c <container> --previous",
        "Check the command, arguments, mounted files and environment of that role's template.",
        "Exit code 1 is usually the program's own error; 127 a missing binary; 126 a file "
        "that is not executable; 139 a segmentation fault.",
    ),
    detect=_detect_crashloop,
    settle_s=lambda thresholds: thresholds.settle_s,
)
