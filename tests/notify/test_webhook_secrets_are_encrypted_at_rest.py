"""Webhook signing secrets are stored encrypted (``enc:v1:<key id>:…``) when
``notify.secret_keys`` is set, decrypted only to sign; keys rotate (the first encrypts, all
decrypt); secrets stored in clear before keys were set still sign; without keys they are stored
in clear, with a warning."""

from __future__ import annotations

import base64
import logging
import os

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import NotifySettings, Settings
from controller.metrics import PipelineMetrics
from controller.store import subscriptions
from controller.store.models import SubscriptionRow
from controller.store.subscriptions import SecretBox, SecretKeyError
from controller.testing.notify import (
    api_client,
    job,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


K1, K2 = new_key(), new_key()


@pytest.fixture(autouse=True)
def fresh_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test installs its own keys; what it installs is gone afterwards."""
    monkeypatch.setattr(subscriptions, "_installed", subscriptions._Installed())
    monkeypatch.delenv(subscriptions.KEYS_VARIABLE, raising=False)


async def stored_secrets(engine: AsyncEngine, subscription_id: str) -> tuple[str | None, str | None]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(SubscriptionRow.secret, SubscriptionRow.previous_secret).where(
                    SubscriptionRow.id == subscription_id
                )
            )
        ).one()
    return row.secret, row.previous_secret


async def test_secrets_are_stored_encrypted_and_webhooks_still_verify(notifying: Notifying) -> None:
    with_notify(notifying.settings, secret_keys={"k1": K1})
    subscriptions.use_secret_keys(notifying.settings.notify.secret_keys)
    async with Receiver() as rx, notifying.api() as api:
        sub = await subscribe(api, rx, "hook", event_types=["job.created"])
        secret, _ = await stored_secrets(notifying.engine, sub["id"])
        async with notifying.running():
            await notifying.publish(job("Pending", change="ADDED"))
            (request,) = await rx.wait_for("hook", 1)

    assert sub["secret"].startswith("whsec_")
    assert secret is not None and secret.startswith("enc:v1:k1:")
    assert sub["secret"] not in secret and sub["secret"].removeprefix("whsec_") not in secret
    assert request.verified, request.error


async def test_keys_rotate_and_secrets_stored_in_clear_before_still_sign(notifying: Notifying) -> None:
    with_notify(notifying.settings)
    async with Receiver() as rx, notifying.api() as api:
        subscriptions.use_secret_keys({})  # before keys: in clear
        legacy = await subscribe(api, rx, "legacy", event_types=["job.created"])
        subscriptions.use_secret_keys({"k1": K1})
        old = await subscribe(api, rx, "old", event_types=["job.created"])
        with_notify(
            notifying.settings, secret_keys={"k2": K2, "k1": K1}
        )  # k2 is new: it encrypts from now on
        subscriptions.use_secret_keys(notifying.settings.notify.secret_keys)
        rotated = await api.post(f"/api/v1/webhooks/{old['id']}/rotate-secret")
        assert rotated.status_code == 200, rotated.text
        rx.secrets["old"] = rotated.json()["secret"]
        rotated_legacy = await api.post(f"/api/v1/webhooks/{legacy['id']}/rotate-secret")
        rx.secrets["legacy"] = rotated_legacy.json()["secret"]
        stored_old = await stored_secrets(notifying.engine, old["id"])
        stored_legacy = await stored_secrets(notifying.engine, legacy["id"])
        async with notifying.running():
            await notifying.publish(job("Pending", change="ADDED"))
            (to_old,) = await rx.wait_for("old", 1)
            (to_legacy,) = await rx.wait_for("legacy", 1)

    assert stored_old[0] is not None and stored_old[0].startswith("enc:v1:k2:")
    assert stored_old[1] is not None and stored_old[1].startswith("enc:v1:k1:")  # still readable
    assert stored_legacy[0] is not None and stored_legacy[0].startswith("enc:v1:k2:")
    assert stored_legacy[1] is not None and stored_legacy[1].startswith("enc:v1:k2:")  # encrypted now
    assert to_old.verified and to_legacy.verified
    # both signatures: the new secret and, during the overlap, the old one
    assert len(to_old.headers["webhook-signature"].split(" ")) == 2
    assert len(to_legacy.headers["webhook-signature"].split(" ")) == 2


async def test_a_clear_row_written_before_keys_signs_after_keys_are_set(notifying: Notifying) -> None:
    with_notify(notifying.settings)
    subscriptions.use_secret_keys({})
    async with Receiver() as rx, notifying.api() as api:
        sub = await subscribe(api, rx, "hook", event_types=["job.created"])
        assert (await stored_secrets(notifying.engine, sub["id"]))[0] == sub["secret"]
        with_notify(notifying.settings, secret_keys={"k1": K1})
        async with notifying.running():
            await notifying.publish(job("Pending", change="ADDED"))
            (request,) = await rx.wait_for("hook", 1)
    assert request.verified, request.error


def test_without_keys_secrets_stay_in_clear_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="controller.store.subscriptions"):
        box = subscriptions.use_secret_keys({})
        subscriptions.use_secret_keys({})
    assert box.seal("whsec_abc", "sub_1") == "whsec_abc" and box.open("whsec_abc", "sub_1") == "whsec_abc"
    warnings = [r for r in caplog.records if "stored in clear" in r.getMessage()]
    assert len(warnings) == 1 and subscriptions.KEYS_VARIABLE in warnings[0].getMessage()


def test_the_environment_variable_is_read_when_nothing_was_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(subscriptions.KEYS_VARIABLE, f'{{"env-key": "{K1}"}}')
    sealed = subscriptions.secret_box().seal("whsec_abc", "sub_1")
    assert sealed is not None and sealed.startswith("enc:v1:env-key:")
    assert NotifySettings.model_validate({"secret_keys": {"a": K1}}).secret_keys["a"].get_secret_value() == K1


def test_ciphertexts_are_bound_to_their_key_and_subscription() -> None:
    box = SecretBox.from_settings({"k1": K1})
    sealed = box.seal("whsec_abc", "sub_1")
    assert sealed is not None and box.seal("whsec_abc", "sub_1") != sealed  # a fresh nonce each time
    assert box.open(sealed, "sub_1") == "whsec_abc"
    assert box.seal(sealed, "sub_1") == sealed  # never encrypted twice
    with pytest.raises(SecretKeyError, match="does not decrypt"):
        box.open(sealed, "sub_2")  # copied to another subscription
    with pytest.raises(SecretKeyError, match="does not decrypt"):
        box.open(sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1], "sub_1")
    with pytest.raises(SecretKeyError, match="does not hold"):
        SecretBox.from_settings({"k2": K2}).open(sealed, "sub_1")
    with pytest.raises(SecretKeyError, match="32"):
        SecretBox.from_settings({"short": base64.b64encode(b"x" * 16).decode()})
    with pytest.raises(SecretKeyError, match="key id"):
        SecretBox.from_settings({"bad:id": K1})


async def test_a_row_encrypted_with_a_dropped_key_is_not_sent_unsigned(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings)
    subscriptions.use_secret_keys({"k1": K1})
    async with Receiver() as rx, api_client(settings, engine, metrics) as api:
        sub = await subscribe(api, rx, "hook")
    async with engine.begin() as conn:
        await conn.execute(
            update(SubscriptionRow).where(SubscriptionRow.id == sub["id"]).values(previous_secret=None)
        )
    record = await _record(engine, sub["id"])
    from consumers.notify.dispatch import current_secrets

    with pytest.raises(SecretKeyError):
        current_secrets(record, record.created_at, SecretBox.from_settings({"k2": K2}))


async def _record(engine: AsyncEngine, subscription_id: str) -> subscriptions.SubscriptionRecord:
    async with engine.connect() as conn:
        found = await subscriptions.get_subscription(conn, subscription_id)
    assert found is not None
    return found
