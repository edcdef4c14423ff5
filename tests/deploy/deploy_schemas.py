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


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": METADATA,
            "spec": spec,
        },
    }


LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": STRINGS, "matchExpressions": {"type": "array"}},
}

SECRET_OR_CONFIGMAP = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "secret": {"type": "object", "required": ["name", "key"]},
        "configMap": {"type": "object", "required": ["name", "key"]},
    },
}
TLS_CONFIG = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "insecureSkipVerify": {"type": "boolean"},
        "serverName": {"type": "string"},
        "ca": SECRET_OR_CONFIGMAP,
        "cert": SECRET_OR_CONFIGMAP,
        "keySecret": {"type": "object", "required": ["name", "key"]},
    },
}

SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    {
        "type": "object",
        "required": ["selector"],
        "additionalProperties": False,
        "properties": {
            "selector": LABEL_SELECTOR,
            "jobLabel": {"type": "string"},
            "podTargetLabels": {"type": "array", "items": {"type": "string"}},
            "targetLabels": {"type": "array", "items": {"type": "string"}},
            "namespaceSelector": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "any": {"type": "boolean"},
                    "matchNames": {"type": "array", "items": {"type": "string"}},
                },
            },
            "endpoints": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "targetPort": {"type": ["integer", "string"]},
                        "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": DURATION},
                        "scrapeTimeout": {"type": "string", "pattern": DURATION},
                        "honorLabels": {"type": "boolean"},
                        "tlsConfig": TLS_CONFIG,
                    },
                },
            },
        },
    },
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
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "interval": {"type": "string", "pattern": DURATION},
                        "rules": {"type": "array", "items": RULE},
                    },
                },
            }
        },
    },
)

ROUTE = _resource(
    "route.openshift.io/v1",
    "Route",
    {
        "type": "object",
        "required": ["to"],
        "additionalProperties": False,
        "properties": {
            "host": {"type": "string"},
            "path": {"type": "string"},
            "to": {
                "type": "object",
                "required": ["kind", "name"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["Service", ""]},
                    "name": {"type": "string"},
                    "weight": {"type": "integer"},
                },
            },
            "port": {
                "type": "object",
                "required": ["targetPort"],
                "additionalProperties": False,
                "properties": {"targetPort": {"type": ["integer", "string"]}},
            },
            "tls": {
                "type": "object",
                "required": ["termination"],
                "additionalProperties": False,
                "properties": {
                    "termination": {"enum": ["edge", "passthrough", "reencrypt"]},
                    "insecureEdgeTerminationPolicy": {"enum": ["Allow", "None", "Redirect", ""]},
                },
            },
        },
    },
)

ISSUER_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"type": "string"},
    },
}

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
            "ca": {
                "type": "object",
                "required": ["secretName"],
                "additionalProperties": False,
                "properties": {"secretName": {"type": "string"}},
            },
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
    {
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "additionalProperties": False,
        "properties": {
            "secretName": {"type": "string"},
            "issuerRef": ISSUER_REF,
            "isCA": {"type": "boolean"},
            "commonName": {"type": "string"},
            "dnsNames": {"type": "array", "items": {"type": "string"}},
            "duration": {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"},
            "renewBefore": {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"},
            "usages": {"type": "array", "items": {"enum": KEY_USAGES}},
            "privateKey": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                    "encoding": {"enum": ["PKCS1", "PKCS8"]},
                    "rotationPolicy": {"enum": ["Never", "Always"]},
                },
            },
        },
    },
)

_OBJECT_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}},
}
CNPG_CLUSTER = _resource(
    "postgresql.cnpg.io/v1",
    "Cluster",
    {
        "type": "object",
        "required": ["instances", "storage"],
        "additionalProperties": False,
        "properties": {
            "instances": {"type": "integer", "minimum": 1},
            "primaryUpdateStrategy": {"enum": ["unsupervised", "supervised"]},
            "enableSuperuserAccess": {"type": "boolean"},
            "bootstrap": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "initdb": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"database": {"type": "string"}, "owner": {"type": "string"}},
                    }
                },
            },
            "managed": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "roles": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string"},
                                "ensure": {"enum": ["present", "absent"]},
                                "login": {"type": "boolean"},
                                "passwordSecret": _OBJECT_REF,
                            },
                        },
                    }
                },
            },
            "affinity": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "enablePodAntiAffinity": {"type": "boolean"},
                    "topologyKey": {"type": "string"},
                },
            },
            "storage": {
                "type": "object",
                "required": ["size"],
                "additionalProperties": False,
                "properties": {"size": {"type": "string"}, "storageClass": {"type": "string"}},
            },
            "resources": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"requests": STRINGS, "limits": STRINGS},
            },
        },
    },
)

CUSTOM: dict[tuple[str, str], dict[str, Any]] = {
    ("postgresql.cnpg.io/v1", "Cluster"): CNPG_CLUSTER,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("route.openshift.io/v1", "Route"): ROUTE,
    ("cert-manager.io/v1", "Issuer"): ISSUER,
    ("cert-manager.io/v1", "Certificate"): CERTIFICATE,
}
