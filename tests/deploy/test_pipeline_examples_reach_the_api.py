"""The Kubernetes Job of docs/pipelines.md is one a cluster accepts and that reaches the API as
the manifests serve it: its variables are settings, its URL is the API's Service over https on
its port, its token is a projected service-account token of the audience the API asks for, and
its CA file and token file are on that projected volume."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controller.contract.settings import refuse_unknown
from tests.deploy.test_deploy_manifests_render_and_validate import (
    DEPLOY,
    KUBERNETES_VERSIONS,
    NAMESPACE,
    find,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]


def _documented_job() -> Obj:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "pipelines.md").read_text(), re.DOTALL)
    (job,) = [
        doc for block in blocks if isinstance(doc := yaml.safe_load(block), dict) and doc.get("kind") == "Job"
    ]
    assert isinstance(job, dict)
    return job


@pytest.mark.parametrize("version", [KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]])
def test_the_documented_wait_job_is_valid(version: str) -> None:
    kubernetes_validate.validate(_documented_job(), version, strict=True)


def test_the_documented_wait_job_reaches_the_api_with_a_token_of_its_audience() -> None:
    objs = render(DEPLOY / "overlays" / "kubernetes")
    config = find(objs, "ConfigMap", "mpijc-config")["data"]
    service = find(objs, "Service", "mpijc-api")
    pod = _documented_job()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    refuse_unknown(env)

    port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "https")
    assert env["MPIJC_CLIENT__API_URL"] == f"https://{service['metadata']['name']}.{NAMESPACE}.svc:{port}"
    (mount,) = container["volumeMounts"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    files = {}
    for source in volume["projected"]["sources"]:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            assert [token["audience"]] == json.loads(config["MPIJC_API__TOKEN_AUDIENCES"])
            files[token["path"]] = "token"
        else:
            files |= {item["path"]: "ca" for item in source["configMap"]["items"]}
    mounted = {f"{mount['mountPath']}/{path}": what for path, what in files.items()}
    assert mounted[env["MPIJC_CLIENT__TOKEN_FILE"]] == "token"
    assert mounted[env["MPIJC_CLIENT__CA_FILE"]] == "ca"
