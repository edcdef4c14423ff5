"""Errors as RFC 9457 problem details: ``application/problem+json`` with ``type``, ``title``,
``status``, ``detail`` and ``instance``.

Every error the API answers goes through here: :func:`install` sets one handler for
``HTTPException`` (the routes' own 4xx/5xx, the router's 404, the rate limit's 429), one for
validation errors (422) and one for 405 (its ``Allow`` lists the methods of every route on the
path); the body gate (:mod:`controller.api.bodylimit`), which answers before routing, sends
:func:`problem` itself. ``type`` is ``about:blank`` (the status says it all, so ``title`` is the
status's phrase); ``instance`` is the request's path. ``detail`` keeps the name and value it had
before problem details (a sentence; for a 422 of declared forms FastAPI's list of
``{loc, msg, type}``), so clients reading ``{"detail": …}`` go on working.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

__all__ = ["PROBLEM_JSON", "install", "problem", "problem_bytes"]

PROBLEM_JSON = "application/problem+json"


def problem(status: int, detail: Any, instance: str) -> dict[str, Any]:
    """The problem-details object of an error ``status`` on the path ``instance``."""
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    return {"type": "about:blank", "title": title, "status": status, "detail": detail, "instance": instance}


def problem_bytes(status: int, detail: Any, instance: str) -> bytes:
    """:func:`problem` as a JSON body."""
    return json.dumps(problem(status, detail, instance)).encode()


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_JSON


def _respond(
    request: Request, status: int, detail: Any, headers: Mapping[str, str] | None = None
) -> ProblemResponse:
    body = problem(status, jsonable_encoder(detail), request.url.path)
    return ProblemResponse(body, status, headers=dict(headers or {}))


async def _http(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, HTTPException)
    return _respond(request, exc.status_code, exc.detail, exc.headers)


async def _invalid(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, RequestValidationError)
    return _respond(request, 422, exc.errors())


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


async def _method_not_allowed(request: Request, exc: Exception) -> ProblemResponse:
    """405 whose ``Allow`` lists every method some route on the path takes (``GET /webhooks``
    and ``POST /webhooks`` are two routes), each asked whether it would take the request with
    that method (routers included in others answer that too)."""
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]
    return _respond(request, 405, "Method Not Allowed", {"Allow": ", ".join(allowed)})


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as problem details, and say so in its OpenAPI schema (the
    4xx and 5xx answers' bodies are documented as ``application/problem+json``)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for status, answer in operation.get("responses", {}).items():
                    content = answer.get("content", {})
                    if status[:1] in "45" and "application/json" in content:
                        content[PROBLEM_JSON] = content.pop("application/json")
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend it
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(405, _method_not_allowed)
