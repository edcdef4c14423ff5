"""JSON Schemas of the custom resources the manifests use, for the fields they use.

``kubernetes-validate`` knows the built-in kinds only. These follow the upstream CRDs
(prometheus-operator ``monitoring.coreos.com/v1`` ServiceMonitor and PrometheusRule,
OpenShift ``route.openshift.io/v1`` Route): types, required fields, enums and duration
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
            "namespaceSelector": {"type": "object"},
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

CUSTOM: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("route.openshift.io/v1", "Route"): ROUTE,
}
