"""The webhook's TLS context, reloaded when cert-manager renews the certificate files (the
API's too, when it serves HTTPS: ``MPIJC_API__TLS_CERT_FILE``).

With a client CA bundle (``admission.client_ca_file``) the context requires a client certificate
that chains to it: only the API server, which was given one, completes the handshake. A changed
bundle is added to the trusted CAs without a restart (a CA rotation puts the new CA next to the
old one); OpenSSL cannot forget a CA it was given, so one removed from the bundle stays trusted
until the process restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from pathlib import Path

__all__ = ["CertificateReloader", "UnreadableCertificate"]

log = logging.getLogger(__name__)


class UnreadableCertificate(ValueError):
    """A certificate, key or CA file the webhook cannot start with; ``setting`` names its field."""

    def __init__(self, setting: str, detail: str) -> None:
        super().__init__(detail)
        self.setting = setting


def _stamp(*files: Path) -> tuple[int, ...]:
    """What changes when a file is rewritten or its Secret volume swaps the link."""
    stamp: tuple[int, ...] = ()
    for stat in (file.stat() for file in files):
        stamp += (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return stamp


class CertificateReloader:
    """A server ``SSLContext`` that picks up a renewed certificate and key, and a changed client CA
    bundle, from their files."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file, self.key_file, self.client_ca_file = cert_file, key_file, client_ca_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            self._seen = _stamp(cert_file, key_file)
            self.context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise UnreadableCertificate("cert_file", f"{cert_file} with {key_file}: {exc}") from exc
        self._seen_ca: tuple[int, ...] = ()
        if client_ca_file is not None:  # only the API server, with its client certificate, gets in
            self.context.verify_mode = ssl.CERT_REQUIRED
            try:
                self._seen_ca = _stamp(client_ca_file)
                self.context.load_verify_locations(cafile=client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise UnreadableCertificate("client_ca_file", f"{client_ca_file}: {exc}") from exc

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; a half-written pair keeps the old certificate."""
        return self._reload_client_ca() | self._reload_certificate()

    def _reload_certificate(self) -> bool:
        try:
            stamp = _stamp(self.cert_file, self.key_file)
            if stamp == self._seen:
                return False
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate not reloaded (keeping the current one): %s", exc)
            return False
        self._seen = stamp
        log.info("reloaded the TLS certificate from %s", self.cert_file)
        return True

    def _reload_client_ca(self) -> bool:
        if self.client_ca_file is None:
            return False
        try:
            stamp = _stamp(self.client_ca_file)
            if stamp == self._seen_ca:
                return False
            self.context.load_verify_locations(cafile=self.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("client CA bundle not reloaded (keeping the current one): %s", exc)
            return False
        self._seen_ca = stamp
        log.info("added the client CA bundle of %s to the trusted CAs", self.client_ca_file)
        return True

    async def run(self, stop: asyncio.Event, interval_s: float) -> None:
        """Check every ``interval_s`` until ``stop`` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            self.reload_if_changed()
