"""JSON Schemas of the custom resources the manifests use, for the fields they use.

``kubernetes-validate`` knows the built-in kinds only. These follow the upstream CRDs
(prometheus-operator ``monitoring.coreos.com/v1`` ServiceMonitor and PrometheusRule,
OpenShift ``route.openshift.io/v1`` Route, cert-manager ``cert-manager.io/v1`` Issuer and
Certificate, CloudNativePG ``postgresql.cnpg.io/v1`` Cluster): types, required fields, enums and duration
patterns, and no unknown fields where the manifests set them, so a typo fails the test.
"""

from __future__ import annotations

from typing import Any

DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": STRINGS},
}


def closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object of these ``properties`` (the ``required`` ones among them) and no others."""
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return closed(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": METADATA,
            "spec": spec,
        },
        ["apiVersion", "kind", "metadata", "spec"],
    )


LABEL_SELECTOR = closed({"matchLabels": STRINGS, "matchExpressions": {"type": "array"}})

SECRET_OR_CONFIGMAP = closed(
    {
        "secret": {"type": "object", "required": ["name", "key"]},
        "configMap": {"type": "object", "required": ["name", "key"]},
    }
)
TLS_CONFIG = closed(
    {
        "insecureSkipVerify": {"type": "boolean"},
        "serverName": {"type": "string"},
        "ca": SECRET_OR_CONFIGMAP,
        "cert": SECRET_OR_CONFIGMAP,
        "keySecret": {"type": "object", "required": ["name", "key"]},
    }
)

SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    closed(
        {
            "selector": LABEL_SELECTOR,
            "jobLabel": {"type": "string"},
            "podTargetLabels": {"type": "array", "items": {"type": "string"}},
            "targetLabels": {"type": "array", "items": {"type": "string"}},
            "namespaceSelector": closed(
                {
                    "any": {"type": "boolean"},
                    "matchNames": {"type": "array", "items": {"type": "string"}},
                }
            ),
            "endpoints": {
                "type": "array",
                "items": closed(
                    {
                        "port": {"type": "string"},
                        "targetPort": {"type": ["integer", "string"]},
                        "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": DURATION},
                        "scrapeTimeout": {"type": "string", "pattern": DURATION},
                        "honorLabels": {"type": "boolean"},
                        "tlsConfig": TLS_CONFIG,
                    }
                ),
            },
        },
        ["selector"],
    ),
)

RULE = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "properties": {
        "alert": {"type": "string"},
        "record": {"type": "string"},
        "expr": {"type": ["string", "integer"]},
        "for": {"type": "string", "pattern": DURATION},
        "keep_firing_for": {"type": "string", "pattern": DURATION},
        "labels": STRINGS,
        "annotations": STRINGS,
    },
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
}

PROMETHEUS_RULE = _resource(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    closed(
        {
            "groups": {
                "type": "array",
                "items": closed(
                    {
                        "name": {"type": "string", "minLength": 1},
                        "interval": {"type": "string", "pattern": DURATION},
                        "rules": {"type": "array", "items": RULE},
                    },
                    ["name"],
                ),
            }
        }
    ),
)

ROUTE = _resource(
    "route.openshift.io/v1",
    "Route",
    closed(
        {
            "host": {"type": "string"},
            "path": {"type": "string"},
            "to": closed(
                {
                    "kind": {"enum": ["Service", ""]},
                    "name": {"type": "string"},
                    "weight": {"type": "integer"},
                },
                ["kind", "name"],
            ),
            "port": closed({"targetPort": {"type": ["integer", "string"]}}, ["targetPort"]),
            "tls": closed(
                {
                    "termination": {"enum": ["edge", "passthrough", "reencrypt"]},
                    "insecureEdgeTerminationPolicy": {"enum": ["Allow", "None", "Redirect", ""]},
                },
                ["termination"],
            ),
        },
        ["to"],
    ),
)

ISSUER_REF = closed(
    {
        "name": {"type": "string"},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"type": "string"},
    },
    ["name"],
)

ISSUER = _resource(
    "cert-manager.io/v1",
    "Issuer",
    {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {
            "selfSigned": {"type": "object"},
            "ca": closed({"secretName": {"type": "string"}}, ["secretName"]),
        },
    },
)

KEY_USAGES = [
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
]  # fmt: skip

CERTIFICATE = _resource(
    "cert-manager.io/v1",
    "Certificate",
    closed(
        {
            "secretName": {"type": "string"},
            "issuerRef": ISSUER_REF,
            "isCA": {"type": "boolean"},
            "commonName": {"type": "string"},
            "dnsNames": {"type": "array", "items": {"type": "string"}},
            "duration": {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"},
            "renewBefore": {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"},
            "usages": {"type": "array", "items": {"enum": KEY_USAGES}},
            "privateKey": closed(
                {
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                    "encoding": {"enum": ["PKCS1", "PKCS8"]},
                    "rotationPolicy": {"enum": ["Never", "Always"]},
                }
            ),
        },
        ["secretName", "issuerRef"],
    ),
)

_OBJECT_REF = closed({"name": {"type": "string"}}, ["name"])
CNPG_CLUSTER = _resource(
    "postgresql.cnpg.io/v1",
    "Cluster",
    closed(
        {
            "instances": {"type": "integer", "minimum": 1},
            "primaryUpdateStrategy": {"enum": ["unsupervised", "supervised"]},
            "enableSuperuserAccess": {"type": "boolean"},
            "bootstrap": closed(
                {"initdb": closed({"database": {"type": "string"}, "owner": {"type": "string"}})}
            ),
            "managed": closed(
                {
                    "roles": {
                        "type": "array",
                        "items": closed(
                            {
                                "name": {"type": "string"},
                                "ensure": {"enum": ["present", "absent"]},
                                "login": {"type": "boolean"},
                                "passwordSecret": _OBJECT_REF,
                            },
                            ["name"],
                        ),
                    }
                }
            ),
            "affinity": closed(
                {
                    "enablePodAntiAffinity": {"type": "boolean"},
                    "topologyKey": {"type": "string"},
                }
            ),
            "storage": closed({"size": {"type": "string"}, "storageClass": {"type": "string"}}, ["size"]),
            "resources": closed({"requests": STRINGS, "limits": STRINGS}),
        },
        ["instances", "storage"],
    ),
)

CUSTOM: dict[tuple[str, str], dict[str, Any]] = {
    ("postgresql.cnpg.io/v1", "Cluster"): CNPG_CLUSTER,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("route.openshift.io/v1", "Route"): ROUTE,
    ("cert-manager.io/v1", "Issuer"): ISSUER,
    ("cert-manager.io/v1", "Certificate"): CERTIFICATE,
}
