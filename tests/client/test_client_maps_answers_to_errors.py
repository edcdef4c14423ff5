"""The client's one boundary (``controller.client.connection``): each answer of the API becomes the
error the commands exit with; settings given as arguments replace the environment's, checked before
anything is sent; runs are named one way; importing the client stays light."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import controller.client
from controller.client import ClientError, Exit, NotFound, Refused, RunRef, Unreachable, UsageError
from controller.client.connection import raise_for, settings_with
from controller.client.refs import job_ref, run_ref
from controller.contract.settings import ClientSettings


@pytest.mark.parametrize(
    ("status", "body", "headers", "error", "exit", "line"),
    [
        (401, {"detail": "token not accepted"}, {}, Refused, Exit.REFUSED, "HTTP 401: token not accepted"),
        (
            403,
            {"detail": "may not list in team-b"},
            {},
            Refused,
            Exit.REFUSED,
            "HTTP 403: may not list in team-b",
        ),
        (404, {"detail": "no such run"}, {}, NotFound, Exit.NOT_FOUND, "HTTP 404: no such run"),
        (
            422,
            {"detail": [{"loc": ["query", "limit"], "msg": "less than or equal to 500", "type": "x"}]},
            {},
            Refused,
            Exit.REFUSED,
            "HTTP 422: limit: less than or equal to 500",
        ),
        (429, {"detail": "too many streams"}, {"Retry-After": "3"}, Unreachable, Exit.REFUSED, "HTTP 429"),
        (503, "<html>busy</html>", {}, Unreachable, Exit.REFUSED, "HTTP 503: <html>busy</html>"),
    ],
    ids=["401", "403", "404", "422-validation", "429-retry-after", "503-not-json"],
)
def test_each_status_is_one_error_with_its_exit_status(
    status: int,
    body: object,
    headers: dict[str, str],
    error: type[ClientError],
    exit: Exit,
    line: str,
) -> None:
    content = {"json": body} if not isinstance(body, str) else {"text": body}
    response = httpx.Response(status, headers=headers, **content)  # type: ignore[arg-type]

    with pytest.raises(error) as raised:
        raise_for(response)

    assert type(raised.value) is error and raised.value.status == exit
    assert str(raised.value).startswith(line)
    if headers:
        assert isinstance(raised.value, Unreachable) and raised.value.after == 3.0


def test_a_success_raises_nothing() -> None:
    raise_for(httpx.Response(200, json={"items": []}))


def test_arguments_replace_the_environments_settings() -> None:
    base = ClientSettings(token="from-env", api_url="http://127.0.0.1:1")

    by_file = settings_with(base, {"token_file": "/run/token", "api_url": None})
    by_token = settings_with(base, {"token": "given", "token_file": "/run/token"})

    assert by_file.token is None and by_file.token_file == "/run/token" and by_file.api_url == base.api_url
    assert by_token.token is not None and by_token.token.get_secret_value() == "given"
    with pytest.raises(UsageError, match="is not an http\\(s\\) URL") as raised:
        settings_with(base, {"api_url": "ftp://somewhere"})
    assert raised.value.status == Exit.USAGE


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("b1fdb6b8-4d6d-4c82-a330-d3513782520d", RunRef(uid="b1fdb6b8-4d6d-4c82-a330-d3513782520d")),
        ("team-a/train", RunRef(namespace="team-a", name="train")),
        ("team-a/train.v2@12", RunRef(namespace="team-a", name="train.v2", attempt=12)),
    ],
    ids=["uid", "newest", "attempt"],
)
def test_a_run_is_named_by_uid_job_or_attempt(text: str, ref: RunRef) -> None:
    assert run_ref(text) == ref and str(ref) == text


@pytest.mark.parametrize("text", ["Team-A/train", "team-a/train@0", "team-a/", "a b", "team-a/train@x"])
def test_a_malformed_name_is_refused_before_anything_is_sent(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(text)):
        run_ref(text)


def test_a_job_is_namespace_slash_name() -> None:
    assert job_ref("team-a/train") == ("team-a", "train")
    with pytest.raises(ValueError, match="is not NAMESPACE/JOB"):
        job_ref("team-a")


def test_the_package_exports_what_it_documents() -> None:
    exported = {name: getattr(controller.client, name) for name in controller.client.__all__}

    assert sorted(controller.client.__all__) == sorted(dir(controller.client))
    assert all(value is not None for value in exported.values())
    with pytest.raises(AttributeError):
        _ = controller.client.ApiClient  # type: ignore[attr-defined]


def test_importing_the_client_loads_no_web_framework_database_or_broker() -> None:
    code = (
        "import sys; from controller.client import AsyncClient, Client, RunDetail; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'fastapi', 'starlette', 'uvicorn', 'sqlalchemy', 'asyncpg', 'alembic', 'nats', 'kubernetes', 're2'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_python_blocks_of_docs_client_md_are_python() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)

    assert len(blocks) >= 3
    for block in blocks:
        compile(block, "docs/client.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
