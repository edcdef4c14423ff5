"""The webhook's TLS context, reloaded when cert-manager renews the certificate files."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from pathlib import Path

__all__ = ["CertificateReloader"]

log = logging.getLogger(__name__)


class CertificateReloader:
    """A server ``SSLContext`` that picks up a renewed certificate and key from their files."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        if client_ca_file is not None:  # only the API server, with its client certificate, gets in
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(cafile=client_ca_file)
        self._seen = self._stamp()
        self.context.load_cert_chain(cert_file, key_file)

    def _stamp(self) -> tuple[int, ...]:
        cert, key = self.cert_file.stat(), self.key_file.stat()
        return (cert.st_mtime_ns, cert.st_size, cert.st_ino, key.st_mtime_ns, key.st_size, key.st_ino)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; a half-written pair keeps the old certificate."""
        try:
            stamp = self._stamp()
            if stamp == self._seen:
                return False
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate not reloaded (keeping the current one): %s", exc)
            return False
        self._seen = stamp
        log.info("reloaded the webhook certificate from %s", self.cert_file)
        return True

    async def run(self, stop: asyncio.Event, interval_s: float) -> None:
        """Check every ``interval_s`` until ``stop`` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            self.reload_if_changed()
