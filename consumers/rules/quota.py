"""Rule ``quota``: Kubernetes refused to create a pod of the run — ResourceQuota or LimitRange.

The refusal is a Kubernetes Event, usually not about a pod (there is none) but about what
tried to create it: the MPIJob (mpi-operator: "worker pod created failed: pods … is
forbidden: …"), the launcher's batch Job or a TrainJob's Jobs (the Job controller's
``FailedCreate``). Whatever the reason and the involved object, the message's wording says
it, in its forms since Kubernetes 1.2:

- ``is forbidden: exceeded quota: <name>, requested: …, used: …, limited: …`` — the
  sentence names the quota and each resource that would go over (``requested 2, used 2 of 2``),
  read whole where a terminal or a listing wrapped it after a comma (and as ``exceeds quota``,
  the wording guides write it in);
- ``is forbidden: failed quota: <name>: must specify limits.cpu for: <container>; …`` — the
  quota needs requests/limits the pod does not set;
- ``cpu quota is 200m, current usage is 200m, requesting 100m`` — the oldest wording;
- a LimitRange bound: ``maximum memory usage per Container is 4Gi, but limit is 8Gi``;
- a scheduler that enforces a quota itself (scheduler-plugins' capacity scheduling, a GPU quota
  extender): its ``FailedScheduling`` reason names the quota (``0/2 nodes are available: 2
  ExceedsGPUQuota.``, ``rejected in PreFilter because ElasticQuota team-a is more than Max``).

An Event is judged by the run's outcome, as a line its output printed is: the operator retries a
refused creation, and a quota freed by another job lets the run go on. So the refusal is at once
a ``pending`` finding — what Kubernetes said and when, the operator still trying — and becomes
the verdict (``firing``) when the job fails, or when the run has stayed refused for
``live_silence_s`` (the stated silence of live evidence, 5 minutes) without every pod created.
It clears once every pod of the run exists and the newest was created after the last refusal,
and a run that succeeded keeps nothing of it.

A program of the run may print the refusal itself (:data:`~consumers.rules.signatures.QUOTA_REFUSAL`):
a controller's reconcile error, a notebook spawner's 403 body, a Spark driver's client creating its
executors (``pods "x" is forbidden: exceeded quota: …``). That line is read like any other the run
printed: the live reader keeps it, a pending observation while the run goes on, the verdict once the
pod fails, nothing once it exits 0; the sentence names the object refused and the pod that printed it.
So is Google Cloud's training service refusing a job the run submitted for the project's quota (Vertex
AI's ``The following quota metrics exceed quota limits: …``, Cloud ML Engine's ``Quota failure for
project …``), with the cloud project's steps.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from consumers.rules.facts import pod_text
from consumers.rules.rule import Context, Detection, Rule, event_fact, log_facts
from consumers.rules.signatures import (
    AZUREML_DETAIL,
    AZUREML_QUOTA,
    GOOGLE_ML_QUOTA,
    PRINTED_REFUSAL,
    QUOTA_REFUSAL,
    SAGEMAKER_DETAIL,
    SAGEMAKER_LIMIT,
)
from consumers.rules.state import PodState, RunState, event_time
from consumers.rules.tails import bounded, is_mention
from consumers.rules.wording import clock_time, listing, who
from controller.contract.events import K8sEventObserved
from controller.contract.quantities import quantity as parse_quantity

_EXCEEDED = re.compile(
    r"[Ee]xceed(?:ed|s) quota: (?P<name>[^,\s]{1,253}),\s{1,4}requested: (?P<requested>\S{1,500}?),\s{1,4}"
    r"used: (?P<used>\S{1,500}?),\s{1,4}limited: (?P<limited>[^\s\"\\]{1,500})"
)
"""The quota admission's refusal, its fields apart wherever a listing wrapped it (after a comma), up to
the end of the message where a JSON body quotes it (``…limited: requests.storage=12Gi\\",\\"reason…``)."""
_MUST_SPECIFY = re.compile(r"[Ff]ailed quota: (?P<name>[^:]{1,253}): must specify (?P<what>[^\n\"\\]{1,500})")
"""The quota needing requests or limits the pod does not set, up to the end of the message where a log's
quoted field holds it (logfmt's ``msg="… must specify requests.cpu" namespace=…``)."""
_OLD_QUOTA = re.compile(  # the resource is the word before the match
    r" quota is (?P<limited>[^,\s]{1,64}), current usage is (?P<used>[^,\s]{1,64}), "
    r"requesting (?P<requested>[^\s]{1,64})"
)
_OBJECT_COUNT = re.compile(r"is forbidden: Limited to (?P<limited>\d{1,9}) (?P<resource>[a-z]{2,60})\b")
"""Kubernetes 1.0's quota admission on a count of objects (plugin/pkg/admission/resourcequota/admission.go,
``Limited to 3 pods``): the namespace's quota holds no more of them; it names no quota."""
_OLD_LIMIT_RANGE = re.compile(
    r"is forbidden: Limited to (?P<allowed>\d[\w.]{0,20}) (?P<resource>cpu|memory)"
    r"(?:, but (?P<why>[^\n\"\\]{1,200}?))?\s{0,4}(?:$|[\"\\])"
)
"""Kubernetes 1.0's LimitRanger (OpenShift 3.0's) bounding a pod's cpu or memory, its one wording (``Pod
"ruby-example-2-deploy" is forbidden: Limited to 512Mi memory, but pod has no specified memory limit``): a
quantity and its resource, where the quota's count of objects has a bare number (:data:`_OBJECT_COUNT`)."""
_LIMIT_RANGE = re.compile(
    r"(?P<bound>maximum|minimum) (?P<resource>[\w./-]{1,64}) usage per (?P<scope>Container|Pod) is "
    r"(?P<allowed>[^,\s]{1,64}?)(?:, but (?P<which>request|limit) is (?P<value>[^,\s\]]{1,64})"
    r"|\.\s{1,2}No (?P<unset>request|limit) is specified)"
)
"""A LimitRange's bound on a container's or a pod's request or limit, in each of the admission's wordings:
the value over (or under) it, or none given where the range requires one (``maximum cpu usage per
Container is 2.  No limit is specified``)."""
_LIMIT_RATIO = re.compile(  # the resource is the word before the match
    r" max limit to request ratio per (?P<scope>Container|Pod) is "
    r"(?P<allowed>[^,\s]{1,64}), but (?:provided ratio is (?P<value>[^,\s\]]{1,64})"
    r"|(?P<unset>no request is specified or request is 0))"
)
_SCHEDULER = re.compile(  # a scheduler plugin's or extender's filter reason naming a quota
    r"nodes are available: (?:[^\n]{0,400}?[,:] )?\d{1,6} (?P<reason>[A-Z]\w{0,40}Quota\w{0,40})"
    r"|rejected in PreFilter because ElasticQuota (?P<name>[^\s]{1,253}) is more than (?P<bound>Max|Min)"
)
_QUEUE = re.compile(
    r"couldn't assign flavors to pod set (?P<podset>[\w.-]{1,63}): (?P<why>[^\n;]{1,300})"
    r"|(?P<volcano>queue resource quota insufficient)"
    # Kueue's reasons on their own (a condition's message, a title): its flavor assigner's quota, or its
    # cohort's borrowing limit
    r"|(?P<kueue>insufficient (?:unused )?quota for [\w./-]{1,64} in flavor [\w.-]{1,63}"
    r"|SecondPassFailed\b[^\n]{0,60}?insufficient (?:unused )?quota\b"
    r"|borrowing limit for [\w./-]{1,64} in flavor [\w.-]{1,63} exceeded)"
)
"""A batch queue holding the job for its quota: Kueue not admitting a workload's pod set in any flavor of
its ClusterQueue (``couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in
flavor a100, 4 more needed``, ``resource cpu unavailable in ClusterQueue``), Volcano's queue without room
for the PodGroup (``queue resource quota insufficient``)."""
_CLOUD = re.compile(
    r"Quota '(?P<metric>[A-Z][A-Z0-9_]{1,60})' exceeded\.\s{0,4}Limit: (?P<limit>[\d.]{1,20})"
    r"(?: (?:in region|globally)(?: (?P<region>[\w-]{1,40}))?)?"
)
"""The cloud's own quota (Google Compute Engine's, through its API: ``googleapi: Error 403: Quota
'CPUS' exceeded. Limit: 24.0 in region us-central1.``) refusing what the cluster asked it for on the
run's behalf — a volume provisioned for its claim, a node added for its pods: the project's quota, not
the namespace's."""
_AZURE = re.compile(
    r"Operation results in exceeding quota limits of (?P<family>[\w ]{1,80}?)\. Maximum allowed: "
    r"(?P<limit>\d{1,9}), Current in use: (?P<used>\d{1,9}), Additional requested: (?P<asked>\d{1,9})"
    r"|results in exceeding approved (?P<approved>\w{1,80}) Cores quota\. Additional details - "
    r"[^\n]{0,200}?Current Limit: (?P<cap>\d{1,9}), Current Usage: (?P<usage>\d{1,9}), "
    r"Additional Required: (?P<required>\d{1,9})"
)
"""Azure refusing the cores a cluster or a training job asked for, for the subscription's quota: Azure
ML's compute resize (``Resize operation failed … Operation results in exceeding quota limits of Core.
Maximum allowed: 24, Current in use: 24, Additional requested: 24.``), the Compute provider's (AKS's node
pools, a VM scale set: ``Operation could not be completed as it results in exceeding approved
standardNCADSA100v4Family Cores quota. Additional details - … Current Limit: 24, Current Usage: 0,
Additional Required: 96, …``)."""
_EC2_VCPU = re.compile(
    r"VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of "
    r"(?P<limit>\d{1,9}) allows for the instance bucket"
)
"""EC2 refusing the instance a node provisioner (Karpenter, the cluster autoscaler, a managed node group)
launched for the run, for the account's vCPU limit of that instance family (``VcpuLimitExceeded: You have
requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the
specified instance type belongs to.``)."""
_SCALE_UP_QUOTA = re.compile(
    r"Node scale up in zones? (?P<zones>[\w, -]{1,200}?) associated with this pod failed: "
    r"(?P<cloud>GCE) quota exceeded\b"
)
"""GKE's cluster autoscaler unable to add the node the pod waits for because the project's Compute Engine
quota is used up (its visibility event ``FailedScaleUp``: ``Node scale up in zones us-central1-a associated
with this pod failed: GCE quota exceeded. Pod is at risk of not being scheduled.``)."""
_PLATFORM = re.compile(
    r"cannot (?P<verb>create|update) (?P<what>[\w.-]{1,63}), because (?P<scope>project|per-user|per-team) "
    r"(?P<limit>[\w.=/-]{1,120}) limit of (?P<count>\d{1,9}) would be exceeded"
)
"""vCluster Platform's quota admission refusing an object its project's quotas (for the project, or per user
or team) would go over (``cannot create virtualclusterinstance, because project virtualclusterinstances
limit of 5 would be exceeded``)."""
_UNENFORCED = re.compile(
    r"[Uu]nable to \w{1,20} [^\n]{1,80}? at this time because there was an error enforcing quota"
    r"|status unknown for quota: (?P<name>[^,\s]{1,253})"
)
"""The quota admission refusing what it could not evaluate against the namespace's ResourceQuota: its
error reading or updating the quota (``Unable to CREATE pods at this time because there was an error
enforcing quota``), a quota whose usage the controller has not computed yet (``status unknown for quota:
compute-resources, resources: pods``)."""
_GATEKEEPER = re.compile(
    r"admission webhook \\?\"validation\.gatekeeper\.sh\\?\" denied the request: "
    r"\[(?:denied by )?(?P<constraint>[\w.-]{1,253})\] (?P<why>[^\n\[]{1,300})"
)
"""OPA Gatekeeper's validating webhook refusing an object one of its constraints forbids: ``admission
webhook "validation.gatekeeper.sh" denied the request: [constraint] message`` (before v3.4 ``[denied by
constraint]``), one bracketed constraint per violation."""
_POD = re.compile(r"[Pp]ods? \\?\"(?P<pod>[^\"\\]{1,253})\\?\" is forbidden")


@dataclass(frozen=True)
class Refusal:
    """One refused pod creation: in words, which object refused it, and how to fix it."""

    event: K8sEventObserved
    pod: str | None
    problem: str
    kind: str
    name: str | None


def quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity of a refusal's message (``500m``, ``16Gi``, ``2``), or ``None``."""
    try:
        return parse_quantity(text.strip())
    except ValueError:
        return None


def _word_before(text: str, end: int) -> str:
    """The word of ``text`` that ends at ``end`` (``cpu`` in ``… forbidden: cpu quota is …``)."""
    words = text[max(0, end - 128) : end].split()
    return words[-1] if words else "?"


def _pairs(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def _exceeded(match: re.Match[str]) -> str:
    requested, used, limited = (_pairs(match.group(g)) for g in ("requested", "used", "limited"))
    over: list[str] = []
    for resource, amount in requested.items():
        want, have, cap = (
            quantity(amount),
            quantity(used.get(resource, "0")),
            quantity(limited.get(resource, "")),
        )
        if want is not None and have is not None and cap is not None and want + have > cap:
            over.append(
                f"{resource} (requested {amount}, used {used.get(resource, '0')} of {limited[resource]})"
            )
    name = match.group("name").strip()
    if over:
        return f"ResourceQuota {name} is exhausted for {listing(over)}"
    return (
        f"ResourceQuota {name} is exhausted (requested {match.group('requested')}, used "
        f"{match.group('used')}, limited {match.group('limited')})"
    )


def _must_specify(match: re.Match[str]) -> str:
    resources: list[str] = []
    containers: list[str] = []
    for item in match.group("what").split(";"):  # ``limits.cpu for: crd; limits.memory for: crd``
        names, _, owners = item.partition(" for: ")
        resources.extend(r.strip() for r in names.split(",") if r.strip())
        containers.extend(c.strip() for c in owners.split(",") if c.strip())
    names = list(dict.fromkeys(containers))
    who = f"container {listing(names)} does" if len(names) == 1 else f"containers {listing(names)} do"
    if not names:
        who = "the pod's containers do"
    return (
        f"ResourceQuota {match.group('name').strip()} requires {listing(list(dict.fromkeys(resources)))} "
        f"on every container and {who} not set them"
    )


def refusal(event: K8sEventObserved) -> Refusal | None:
    """The quota or LimitRange refusal an Event reports, if it reports one."""
    said = refused(event.message)
    return Refusal(event, *said) if said is not None else None


def refused(message: str) -> tuple[str | None, str, str, str | None] | None:
    """(pod, problem, kind, name) of the quota or LimitRange refusal ``message`` words, if it words one."""
    pod_match = _POD.search(message)
    pod = pod_match.group("pod") if pod_match is not None else None
    if (said := _quota_said(message)) is not None:
        return (pod, *said)
    if (match := _OLD_LIMIT_RANGE.search(message)) is not None:
        why = f", but {match['why'].rstrip('.')}" if match["why"] else ""
        problem = f"the namespace's LimitRange allows at most {match['allowed']} {match['resource']}{why}"
        return (pod, problem, "limit-range", None)
    if (match := _OBJECT_COUNT.search(message)) is not None:
        problem = (
            f"the namespace's quota allows at most {match['limited']} {match['resource']} and that many exist"
        )
        return (pod, problem, "exceeded", None)
    if (match := _OLD_QUOTA.search(message)) is not None:
        problem = (
            f"the {_word_before(message, match.start())} quota is exhausted "
            f"(requested {match.group('requested').rstrip('.')}, "
            f"used {match.group('used')} of {match.group('limited')})"
        )
        return (pod, problem, "exceeded", None)
    if (match := _SCHEDULER.search(message)) is not None:
        reason, name = match.group("reason"), match.group("name")
        problem = (
            f"the scheduler left it pending: {reason}, a quota the scheduler enforces is used up"
            if reason is not None
            else f"the scheduler left it pending: ElasticQuota {name} would go over its "
            f"{match.group('bound')}"
        )
        return (pod, problem, "scheduler", reason or name)
    if (match := _QUEUE.search(message)) is not None:
        if match["podset"]:
            why = match["why"].strip().rstrip(".")
            podset = match["podset"]
            problem = f"Kueue could not fit pod set {podset} in any flavor of its ClusterQueue: {why}"
            return (pod, problem, "queue", "kueue")
        if match["kueue"]:
            problem = f"Kueue could not admit the workload in its ClusterQueue: {match['kueue']}"
            return (pod, problem, "queue", "kueue")
        problem = "Volcano's queue has no room left in its quota (capability) for the job's PodGroup"
        return (pod, problem, "queue", "volcano")
    if (match := _PLATFORM.search(message)) is not None:
        scope = {"project": "the project's", "per-user": "its per-user", "per-team": "its per-team"}[
            match["scope"]
        ]
        problem = (
            f"vCluster Platform refused to {match['verb']} {match['what']}: {scope} {match['limit']} "
            f"limit of {match['count']} would be exceeded"
        )
        return (pod, problem, "platform", match["limit"])
    if (match := _UNENFORCED.search(message)) is not None:
        quota = f" {match['name']}" if match["name"] else ""
        problem = (
            f"the quota admission could not evaluate the namespace's ResourceQuota{quota} (its usage not "
            f"computed yet, or an error updating it), so it refused what it could not count"
        )
        return (pod, problem, "unenforced", match["name"])
    if (match := _GATEKEEPER.search(message)) is not None:
        constraints = list(dict.fromkeys(m["constraint"] for m in _GATEKEEPER_MORE.finditer(message)))
        why = match["why"].strip().rstrip(",.")
        problem = f"Gatekeeper's constraint {', '.join(constraints)} forbids it ({why})"
        return (pod, problem, "policy", constraints[0])
    if (match := _CLOUD.search(message)) is not None:
        where = f" in region {match['region']}" if match["region"] else ""
        problem = (
            f"the cloud project's quota {match['metric']} is used up (limit {match['limit']}{where}): "
            f"the cloud refused what the cluster asked it for"
        )
        return (pod, problem, "cloud", match["metric"])
    if (match := _AZURE.search(message)) is not None:
        if match["family"]:
            family, cap, used, asked = match["family"], match["limit"], match["used"], match["asked"]
        else:
            family, cap, used, asked = match["approved"], match["cap"], match["usage"], match["required"]
        problem = (
            f"Azure refused the cores asked for: the subscription's {family} quota allows {cap}, "
            f"{used} in use and {asked} more requested"
        )
        return (pod, problem, "azure", family)
    if (match := _EC2_VCPU.search(message)) is not None:
        problem = (
            f"EC2 refused the instance launched for it: the AWS account's vCPU limit of {match['limit']} "
            f"for that instance family is used up (VcpuLimitExceeded)"
        )
        return (pod, problem, "ec2", None)
    if (match := _SCALE_UP_QUOTA.search(message)) is not None:
        problem = (
            f"GKE's cluster autoscaler could not add a node in {match['zones']}: the project's Compute "
            f"Engine quota is used up (GCE quota exceeded)"
        )
        return (pod, problem, "cloud", None)
    bounds = [
        f"at {'most' if m.group('bound') == 'maximum' else 'least'} "
        f"{m.group('allowed')} {m.group('resource')} "
        f"per {m.group('scope')}, but "
        + (f"no {m['unset']} is set" if m["unset"] else f"the {m['which']} is {m['value'].rstrip('.')}")
        for m in _LIMIT_RANGE.finditer(message)
    ]
    bounds.extend(
        f"a {_word_before(message, m.start())} limit/request ratio of at most {m.group('allowed')} "
        f"per {m.group('scope')}, but "
        + ("no request is set" if m["unset"] else f"it is {m['value'].rstrip('.')}")
        for m in _LIMIT_RATIO.finditer(message)
    )
    if bounds:
        return (pod, f"the namespace's LimitRange allows {'; '.join(bounds)}", "limit-range", None)
    return None


_CLOUDS = frozenset({"cloud", "azure", "ec2"})
"""The refusals a cloud made, not Kubernetes: a program that printed one tells of the cloud's answer."""
_GATEKEEPER_MORE = re.compile(r"\[(?:denied by )?(?P<constraint>[\w.-]{1,253})\] ")


def _quota_said(message: str) -> tuple[str, str, str] | None:
    """(problem, kind, quota name) of a ResourceQuota's refusal in ``message``."""
    if (match := _EXCEEDED.search(message)) is not None:
        return _exceeded(match), "exceeded", match.group("name").strip()
    if (match := _MUST_SPECIFY.search(message)) is not None:
        return _must_specify(match), "must-specify", match.group("name").strip()
    return None


_CONTINUED = re.compile(r"^\s{2,40}\S")


def _quoted(state: RunState) -> Detection | None:
    """A refusal a pod of the run printed in its output (the run's own controller or spawner could not
    create what it asked for), read like a failure's account: only from a pod that failed, or a line the
    live reader saw and the run has not yet judged. A message wrapped over indented lines (a YAML
    status's ``reason:``) is read whole."""
    for pod in state.current_pods():
        lines = bounded(pod_text(pod))
        for i, line in enumerate(lines):
            if (cloud := GOOGLE_ML_QUOTA.search(line)) is not None and not is_mention(line, cloud.start()):
                return _google_ml(pod, line, cloud)
            if (aws := SAGEMAKER_LIMIT.search(line)) is not None and not is_mention(line, aws.start()):
                return _sagemaker(pod, lines[i : i + 3], aws)
            if (azure := AZUREML_QUOTA.search(line)) is not None and not is_mention(line, azure.start()):
                return _azureml(pod, line, azure)
            quoted = QUOTA_REFUSAL.search(line) or PRINTED_REFUSAL.search(line)
            if quoted is None or is_mention(line, quoted.start()):
                continue
            wrapped = list(itertools.takewhile(_CONTINUED.match, lines[i + 1 : i + 4]))
            said = refused(" ".join((line, *(w.strip() for w in wrapped))))
            if said is None:
                continue
            pod_name, problem, kind, name = said
            what = "an object of the job"
            if quoted.re is QUOTA_REFUSAL and quoted.group("object") is not None:
                noun = quoted.group("kind").removesuffix("s")
                what = f"{'pod' if noun == 'pod' else noun} {quoted.group('object')}"
            elif pod_name is not None:
                what = f"pod {pod_name}"
            told = (
                f"The job's queue held it: {problem}"
                if kind == "queue"
                else problem[0].upper() + problem[1:]
                if kind in _CLOUDS
                else f"Kubernetes refused to create {what}: {problem}"
            )
            return Detection(
                root_cause=f"{told} ({who(pod)} printed the refusal)",
                evidence=tuple(log_facts(pod, [line, *wrapped])),
                key=("log", f"{kind}:{name}", pod.uid),
                remediation=_remediation(kind, name),
            )
    return None


def _google_ml(pod: PodState, line: str, match: re.Match[str]) -> Detection:
    """Google Cloud's training service refused the job the run submitted, for its project's quota."""
    if match["metric"]:
        problem = f"Vertex AI refused the training job: the project's quota {match['metric']} is used up"
    else:
        problem = (
            f"Cloud ML Engine refused the training job: project {match['project']} may not have "
            f"{match['count']} {match['accelerator']} accelerators (its quota)"
        )
    return Detection(
        root_cause=f"{problem} ({who(pod)} printed the refusal)",
        evidence=tuple(log_facts(pod, [line])),
        key=("google-ml", match["metric"] or match["accelerator"], pod.uid),
        remediation=_GOOGLE_ML_STEPS,
    )


def _azureml(pod: PodState, line: str, match: re.Match[str]) -> Detection:
    """Azure Machine Learning (or Batch AI) refused the job or its compute, for the subscription's quota."""
    counts = {k: v for m in AZUREML_DETAIL.finditer(line) for k, v in m.groupdict().items() if v}
    if "family" in counts:
        name = f"{counts['family']} vCPU"
        problem = f"the subscription's {name} quota is {counts['limit']}"
        if "vcpus" in counts:
            problem += f" and the job's nodes map to {counts['vcpus']} vCPUs"
    elif match["what"]:
        name = match["what"]
        problem = f"not enough {name} quota"
        if "cap" in counts:
            problem += f" ({counts['asked']} more requested, {counts['used']} in use of {counts['cap']})"
    else:
        provider = counts.get("provider") or match["code"]
        name = provider
        problem = f"the subscription's quota of {provider} is reached"
        if "allowed" in counts:
            problem += f" (maximum {counts['allowed']}, {counts['in_use']} in use)"
    return Detection(
        root_cause=f"Azure Machine Learning refused the job's compute: {problem} "
        f"({who(pod)} printed the refusal)",
        evidence=tuple(log_facts(pod, [line])),
        key=("azureml", name, pod.uid),
        remediation=_AZUREML_STEPS,
    )


def _sagemaker(pod: PodState, lines: tuple[str, ...], match: re.Match[str]) -> Detection:
    """Amazon SageMaker refused the job the run submitted, for the AWS account's limit of an instance type;
    its message read whole where it was wrapped over the next lines."""
    detail = SAGEMAKER_DETAIL.search(" ".join(line.strip() for line in lines))
    refused = f"Amazon SageMaker refused the job ({match['operation']}): the AWS account's limit"
    if detail is None:
        problem = f"{refused} of that instance type is used up"
        name = match["operation"]
    else:
        name = detail["limit"].strip("'")
        asked = f", and it asked for {detail['delta']} more" if detail["delta"] else ""
        problem = f"{refused} '{name}' is {detail['cap']} instances with {detail['used']} in use{asked}"
    return Detection(
        root_cause=f"{problem} ({who(pod)} printed the refusal)",
        evidence=tuple(log_facts(pod, list(lines[:1]))),
        key=("sagemaker", name, pod.uid),
        remediation=_SAGEMAKER_STEPS,
    )


def _stale(state: RunState, at: datetime) -> bool:
    """Every pod of the run exists and one was created after the refusal: it no longer holds."""
    pods = [p for p in state.current_pods() if not p.deleted]
    workers = [p for p in pods if p.role == "worker"]
    if not pods or len(workers) < state.expected_workers():
        return False
    return max(p.observed.created_at for p in pods) > at


def _detect_quota(state: RunState, ctx: Context) -> Detection | None:
    refusals = sorted(
        (r for e in state.events.values() if (r := refusal(e)) is not None), key=lambda r: event_time(r.event)
    )
    if state.phase == "Succeeded":
        return None
    if not refusals or _stale(state, event_time(refusals[-1].event)):
        return _quoted(state)
    latest = refusals[-1]
    what = f"pod {latest.pod}" if latest.pod and not latest.pod.endswith("-") else "a pod of the job"
    problems = list(dict.fromkeys(r.problem for r in refusals))
    others = ""
    if len(problems) > 1:
        others = f" (and {len(problems) - 1} other refusal{'s' if len(problems) > 2 else ''})"
    refused_s = ctx.age(event_time(refusals[0].event))
    verdict = state.phase == "Failed" or refused_s >= ctx.thresholds.live_silence_s
    if latest.kind == "queue":
        held = "still waiting" if not verdict else "never admitted"
        sentence = f"The job's queue held it, {held}: {problems[-1]}{others}"
    elif verdict:
        sentence = f"Kubernetes refused to create {what}: {problems[-1]}{others}"
    else:
        sentence = (
            f"Kubernetes refused to create {what} at {clock_time(event_time(latest.event))}: "
            f"{problems[-1]}{others}; the operator is still trying"
        )
    return Detection(
        root_cause=sentence,
        evidence=tuple(dict.fromkeys(event_fact(r.event) for r in refusals[-5:])),
        key=tuple(dict.fromkeys(f"{r.kind}:{r.name or ''}" for r in refusals)),
        remediation=_remediation(latest.kind, latest.name),
        tentative=not verdict,
    )


def _remediation(kind: str, name: str | None) -> tuple[str, ...]:
    if kind == "limit-range":
        return _LIMIT_RANGE_STEPS
    if kind == "scheduler":
        return _SCHEDULER_STEPS
    if kind == "cloud":
        return _CLOUD_STEPS
    if kind == "azure":
        return _AZURE_STEPS
    if kind == "ec2":
        return _EC2_STEPS
    if kind == "unenforced":
        return _UNENFORCED_STEPS
    if kind == "policy":
        return _GATEKEEPER_STEPS
    if kind == "platform":
        return _PLATFORM_STEPS
    if kind == "queue":
        return _KUEUE_STEPS if name == "kueue" else _VOLCANO_STEPS
    return _steps(kind, name)


def _steps(kind: str, name: str | None) -> tuple[str, ...]:
    steps = _MUST_SPECIFY_STEPS if kind == "must-specify" else _EXCEEDED_STEPS
    return tuple(step.replace("<quota>", name or "<quota>") for step in steps)


_EXCEEDED_STEPS = (
    "See the quota and what uses it: kubectl -n {namespace} describe resourcequota <quota>",
    "Ask for less (fewer or smaller workers, lower requests/limits) or for a larger quota; pods of "
    "finished jobs that were not cleaned up (cleanPodPolicy: None) still count: delete them.",
    "With Kueue, submit through a LocalQueue (label kueue.x-k8s.io/queue-name): the job then waits "
    "for quota instead of failing to create its pods.",
)
_MUST_SPECIFY_STEPS = (
    "Set resources.requests and resources.limits for every resource the quota names on every "
    "container of every role — launcher and worker templates, init containers and sidecars too.",
    "See what the quota covers: kubectl -n {namespace} describe resourcequota <quota>",
    "Or ask the namespace admins for a LimitRange that sets defaults for them.",
)
_SCHEDULER_STEPS = (
    "The scheduler enforces this quota itself (a capacity-scheduling ElasticQuota or a GPU quota extender): "
    "see what it counts with kubectl -n {namespace} describe pod and the scheduler's quota objects.",
    "Ask for fewer GPUs or workers, wait for other jobs of the namespace to finish, or ask for a larger "
    "quota.",
)
_CLOUD_STEPS = (
    "The quota is the cloud project's, not the namespace's: see its use and limit in the cloud's console "
    "or CLI (gcloud compute regions describe <region>) and ask the provider for more.",
    "Or ask for less of it (smaller or fewer volumes, fewer nodes), or use a storage class or region whose "
    "quota has room.",
)
_AZURE_STEPS = (
    "The quota is the Azure subscription's, per region and VM family: see its use with az vm list-usage "
    "--location <region> (or Azure ML's Quotas page) and request an increase for the family the refusal "
    "names; GPU families of a new subscription start at 0.",
    "Or ask for less of it: fewer or smaller nodes (the compute cluster's max nodes, the node pool's count), "
    "or a VM family or region whose quota has room.",
)
_AZUREML_STEPS = (
    "The quota is the Azure subscription's, per region: vCPUs per VM family and in total, and the number "
    "of compute clusters a workspace may hold; see them on Azure ML studio's Quota page (or az ml compute "
    "list-usage, az vm list-usage --location <region>) and request an increase for the family or resource "
    "the refusal names; GPU families of a new subscription start at 0.",
    "Or ask for less: fewer nodes (the job's instance_count / node_count, the cluster's max_instances), a "
    "VM size of a family with room, or delete idle compute clusters and instances that hold the quota.",
)
_EC2_STEPS = (
    "The limit is the AWS account's, per region and instance family: find it under Service Quotas, Amazon "
    "EC2 (Running On-Demand P / G instances, or the Spot one) and request an increase.",
    "Or let the provisioner choose another family with room (Karpenter's NodePool requirements, the node "
    "group's instance types), or run fewer or smaller nodes.",
)
_GOOGLE_ML_STEPS = (
    "The quota is the Google Cloud project's, per region: find the metric the refusal names on the "
    "project's Quotas page (IAM & Admin) or with gcloud, and request an increase; GPU and TPU training "
    "quotas of a new project start at 0.",
    "Or submit the job where there is room: another region or accelerator type, fewer replicas or fewer "
    "accelerators per replica.",
)
_SAGEMAKER_STEPS = (
    "The limit is the AWS account's, per region: find it under Service Quotas, Amazon SageMaker (the name "
    "the refusal gives, '<instance type> for training job usage') and request an increase; a new account's "
    "GPU instance limits start at 0.",
    "Or ask for what has room: another instance type, fewer instances (instance_count), or wait for the "
    "account's other training jobs to end (the current utilization counts them).",
)
_KUEUE_STEPS = (
    "See what the ClusterQueue has and lends: kubectl describe clusterqueue <cq> (each flavor's "
    "nominalQuota, what is used and borrowed) and kubectl -n {namespace} describe workload for the job's.",
    "Ask for what a flavor can hold (fewer GPUs or workers, a resource the flavors cover), raise the "
    "flavor's nominalQuota or let the ClusterQueue borrow from its cohort; a resource no flavor lists is "
    "never admitted.",
)
_VOLCANO_STEPS = (
    "See the queue's capability and what it has allocated: kubectl get queue <queue> -o yaml, and kubectl "
    "-n {namespace} describe podgroup for the job's minResources.",
    "Ask for less (minAvailable, fewer or smaller workers), wait for the queue's other jobs, or raise the "
    "queue's capability (deserved with the capacity plugin).",
)
_UNENFORCED_STEPS = (
    "See whether the namespace's quotas have been counted: kubectl -n {namespace} describe resourcequota "
    "(a quota without its Used column is not computed yet: the kube-controller-manager's resourcequota "
    "controller must run and reach the API server).",
    "Once the quota shows its use, resubmit the job (or let the operator retry the pods); if the error "
    "stays, the API server's log names the quota it could not update.",
)
_GATEKEEPER_STEPS = (
    "See the constraint that refused it and what it asks: kubectl get constraints, then kubectl get "
    "<kind> <constraint> -o yaml (its parameters and match).",
    "Set what it requires on every container of every role (launcher and worker templates, init "
    "containers and sidecars too: here resources.limits), or ask the cluster admins for an exemption "
    "(the constraint's excludedNamespaces, Gatekeeper's Config).",
)
_PLATFORM_STEPS = (
    "The quota is vCluster Platform's, set on the project (its spec.quotas: project, per-user, per-team), "
    "not a namespace's ResourceQuota: see it with kubectl get project <project> -o yaml or in the "
    "platform's UI, and what counts against it (its instances, active or all).",
    "Delete or sleep instances the project no longer needs, or ask the platform's admins to raise the "
    "limit the refusal names.",
)
_LIMIT_RANGE_STEPS = (
    "See the namespace's bounds: kubectl -n {namespace} describe limitrange",
    "Keep each container's requests and limits within them (launcher and worker templates), or ask "
    "the namespace admins to change the LimitRange.",
)

QUOTA = Rule(
    id="quota",
    kind="cause",
    severity="critical",
    summary="Kubernetes refused to create a pod of the job: a ResourceQuota is exhausted or a "
    "LimitRange forbids its requests.",
    remediation=_EXCEEDED_STEPS,
    detect=_detect_quota,
)
