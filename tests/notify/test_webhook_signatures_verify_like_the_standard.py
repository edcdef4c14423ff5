"""controller.contract.signing signs exactly as Standard Webhooks does (the reference library's vector) and
its verifier rejects each failure mode with the one error type, naming the reason."""

from __future__ import annotations

import base64

import pytest

from controller.contract.signing import (
    WebhookVerificationError,
    generate_secret,
    sign,
    signed_headers,
    verify,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
BODY = b'{"test": 2432232314}'
NOW = 1614265330


def headers(**overrides: str) -> dict[str, str]:
    return {**signed_headers([SECRET], MSG_ID, BODY, NOW), **overrides}


def test_the_signature_matches_the_reference_vector() -> None:
    assert sign(SECRET, MSG_ID, NOW, BODY) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_valid_webhook_verifies_and_returns_its_json() -> None:
    assert verify(SECRET, BODY, headers(), now=NOW) == {"test": 2432232314}
    unprefixed = SECRET.removeprefix("whsec_")
    assert verify(unprefixed, BODY.decode(), {k.upper(): v for k, v in headers().items()}, now=NOW)


def test_any_of_several_signatures_may_match_for_key_rotation() -> None:
    other = generate_secret()
    both = signed_headers([other, SECRET], MSG_ID, BODY, NOW)
    assert len(both["webhook-signature"].split(" ")) == 2
    assert verify(SECRET, BODY, both, now=NOW) == verify(other, BODY, both, now=NOW)
    noisy = f"v1a,abc v2,{base64.b64encode(b'x').decode()} v1,!!! {headers()['webhook-signature']}"
    assert verify(SECRET, BODY, headers(**{"webhook-signature": noisy}), now=NOW)


@pytest.mark.parametrize(
    ("body", "changed", "now", "reason"),
    [
        (BODY, {"webhook-id": ""}, NOW, "missing webhook-id"),
        (BODY, {"webhook-signature": ""}, NOW, "missing webhook-id, webhook-timestamp or webhook-signature"),
        (BODY, {"webhook-timestamp": "hello"}, NOW, "is not integer Unix seconds"),
        (BODY, {}, NOW + 301, "message timestamp too old (301 s)"),
        (BODY, {}, NOW - 301, "message timestamp too new (301 s ahead)"),
        (BODY + b" ", {}, NOW, "no matching v1 signature"),
        (BODY, {"webhook-id": "msg_other"}, NOW, "no matching v1 signature"),
        (BODY, {"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="}, NOW, "no matching"),
        (BODY, {"webhook-signature": "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}, NOW, "no matching"),
    ],
    ids=[
        "no-id",
        "no-signature",
        "bad-timestamp",
        "too-old",
        "too-new",
        "tampered-body",
        "other-id",
        "wrong-signature",
        "unknown-version",
    ],
)
def test_each_failure_is_one_error_type_naming_its_reason(
    body: bytes, changed: dict[str, str], now: int, reason: str
) -> None:
    with pytest.raises(WebhookVerificationError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        verify(SECRET, body, headers(**changed), now=now)


def test_the_wrong_secret_does_not_verify() -> None:
    with pytest.raises(WebhookVerificationError, match="no matching v1 signature"):
        verify(generate_secret(), BODY, headers(), now=NOW)
    with pytest.raises(WebhookVerificationError, match="not whsec_ followed by base64"):
        verify("whsec_not base64!", BODY, headers(), now=NOW)


def test_secrets_are_random_whsec_base64_of_24_to_64_bytes() -> None:
    secret = generate_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    assert generate_secret() != secret
    with pytest.raises(ValueError, match="24 to 64 bytes"):
        generate_secret(16)
    with pytest.raises(ValueError, match=r"contain no '\.'"):
        sign(SECRET, "msg.with.dots", NOW, BODY)
