"""Log tails and termination messages leave the watcher with secrets redacted and without the
control characters (NUL above all) that PostgreSQL cannot store."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from controller.contract.events import JobRef
from controller.contract.redaction import REDACTED, redact, scrub, scrub_lines
from controller.testing import objects as k
from watchers.normalizing import normalize_event, normalize_pod

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
REF = JobRef(uid="uid-pi", kind="MPIJob", namespace="team-a", name="pi")
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "A1b2C3d4E5" * 4

LEAKY_TAIL = (
    "Epoch 3 step 1200 loss 2.31",
    "DEBUG botocore: Authorization: Bearer sk-live-1234567890abcdef",
    f"export AWS_ACCESS_KEY_ID={AWS_KEY_ID}",
    f"aws_secret_access_key = {AWS_SECRET}",
    "connecting to postgresql://trainer:hunter2@db:5432/runs",
    'config: {"password": "p@ss word", "token": "t0k3n", "max_tokens": 512}',
    f"git clone https://x-access-token:{GITHUB}@github.com/org/repo",
    "slack: xoxb-123456789012-abcdefABCDEF",
    f"session {JWT} expired",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "-----END OPENSSH PRIVATE KEY-----",
    "null\x00byte and \x1b[31mcolour\x1b[0m\r",
    "Killed",
)
SECRETS = (
    "sk-live-1234567890abcdef",
    AWS_KEY_ID,
    AWS_SECRET,
    "hunter2",
    "p@ss",
    "t0k3n",
    GITHUB,
    "xoxb-123456789012",
    JWT,
    "b3BlbnNzaC1rZXkt",
)


def oom_pod(message: str) -> dict[str, object]:
    job = k.mpijob("pi", workers=2)
    pod = k.pod(job, "worker", 1, node="gpu-node-a1")
    return k.with_container_state(
        pod,
        {"terminated": {"exitCode": 1, "reason": "Error", "message": message}},
        phase="Failed",
    )


def test_the_watcher_publishes_log_tails_and_termination_messages_redacted() -> None:
    message = f"fatal: token={GITHUB}\nAuthorization: Basic dXNlcjpwYXNz\nnul\x00here"
    observed = normalize_pod(oom_pod(message), "MODIFIED", REF, NOW, LEAKY_TAIL)
    published = observed.model_dump_json()

    for secret in SECRETS:
        assert secret not in published, secret
    assert "\\u0000" not in published and "\x00" not in published and "\\u001b" not in published
    tail = observed.log_tail
    assert tail[0] == "Epoch 3 step 1200 loss 2.31" and tail[-1] == "Killed"
    assert tail[1] == f"DEBUG botocore: Authorization: Bearer {REDACTED}"
    assert tail[2] == f"export AWS_ACCESS_KEY_ID={REDACTED}"
    assert tail[3] == f"aws_secret_access_key = {REDACTED}"
    assert tail[4] == f"connecting to postgresql://trainer:{REDACTED}@db:5432/runs"
    assert tail[5] == f'config: {{"password": "{REDACTED} word", "token": "{REDACTED}", "max_tokens": 512}}'
    assert REDACTED in tail[6] and REDACTED in tail[7] and tail[8] == f"session {REDACTED} expired"
    assert tail[9] == REDACTED  # the whole key block, as one line
    assert tail[10] == "null byte and colour "
    (container,) = observed.containers
    assert container.message == f"fatal: token={REDACTED}\nAuthorization: Basic {REDACTED}\nnul here"


def test_event_messages_are_scrubbed_too() -> None:
    pod = oom_pod("x")
    event = k.event(pod, "Failed", f"pull failed: password={AWS_SECRET}\x00", type_="Warning")
    observed = normalize_event(event, "ADDED", REF, NOW)
    assert observed.message == f"pull failed: password={REDACTED} "


@pytest.mark.parametrize(
    "text",
    [
        "NCCL WARN Net : Connection closed by remote peer worker-1<38452>",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "max_tokens=512 num_tokens: 9 tokenizer=bpe secretary=no",
        "ORTE has lost communication with a remote daemon.",
    ],
)
def test_ordinary_lines_pass_unchanged(text: str) -> None:
    assert redact(text) == text and scrub(text) == text and scrub_lines([text]) == (text,)


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("login with hf_" + "AbCdEfGhIj" * 3 + "KlMn now", "hf_" + "AbCdEfGhIj" * 3 + "KlMn"),
        ("using api_org_" + "kLmNoPqRsT" * 3 + "uvwx", "api_org_" + "kLmNoPqRsT" * 3 + "uvwx"),
        ("openai key sk-" + "A1b2C3d4E5" * 4 + "T3BlbkFJ" + "x" * 20, "sk-" + "A1b2C3d4E5" * 4),
        ("client(sk-proj-" + "Ab_9-Zy8Xw" * 8 + ")", "sk-proj-" + "Ab_9-Zy8Xw" * 8),
        ("ANTHROPIC sk-ant-api03-" + "q" * 93 + "AA", "sk-ant-api03-" + "q" * 93),
        ("stripe.api = sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("maps?k=AIzaSy" + "D-9tSrke72PouQMnMX7a_7k1OpQ3PaKhH", "AIzaSyD-9tSrke72PouQMnMX7a_7k1OpQ3PaKhH"),
    ],
)
def test_hugging_face_openai_style_and_google_keys_are_redacted(line: str, secret: str) -> None:
    (published,) = scrub_lines([line])
    assert secret not in published and REDACTED in published, published


@pytest.mark.parametrize(
    "text", ["task-1234567890abcdefghij done", "disk-pressure on node-sk-12345678901234567890"]
)
def test_words_ending_in_sk_are_not_keys(text: str) -> None:
    assert redact(text) == text


def test_a_cut_off_private_key_is_redacted_to_the_end() -> None:
    assert scrub_lines(["ok", "-----BEGIN RSA PRIVATE KEY-----", "MIIEow", "MIIEpA"]) == ("ok", REDACTED)


@pytest.mark.parametrize(
    "unit",
    [
        "eyJ",
        "a",
        "-----BEGIN ",
        "password",
        "token=  ",
        "x://",
        "a:",
        "AKIA",
        "bearer ",
        "ghp_",
        "xoxb-",
        "hf_",
        "sk-",
        "sk_live_",
        "AIza",
        "--password ",
        "--a-",
        "glpat-",
        "hooks.slack.com/services/",
        "AccountKey=",
    ],
)
def test_hostile_lines_cost_linear_time(unit: str) -> None:
    small, large = cpu_cost(redact, unit * 1_000), cpu_cost(redact, unit * 32_000)
    # 32x the text: linear is ~32x the time, quadratic ~1000x; 200 lies between them, far from both
    assert large < 0.05 or large < max(small, 1e-5) * 200, (unit, small, large)


def cpu_cost(scrub_text: Callable[[str], object], text: str, repeats: int = 5) -> float:
    """CPU seconds this thread spends on ``scrub_text(text)``, the least of ``repeats``: time the
    thread waits for a core on a loaded machine is not counted, nor a slower repeat."""

    def once() -> float:
        started = time.thread_time()
        scrub_text(text)
        return time.thread_time() - started

    return min(once() for _ in range(repeats))
