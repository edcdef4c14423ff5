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
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from controller.contract.clock import pause

__all__ = ["CertificateReloader", "UnreadableCertificate"]

log = logging.getLogger(__name__)

_CERTIFICATE = "certificate"
_CLIENT_CA = "client CA bundle"


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
        self._seen: dict[str, tuple[int, ...]] = {_CLIENT_CA: ()}
        """The files' stamps when each of the certificate and the client CA bundle was last loaded."""
        try:
            self._seen[_CERTIFICATE] = _stamp(cert_file, key_file)
            self.context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise UnreadableCertificate("cert_file", f"{cert_file} with {key_file}: {exc}") from exc
        if client_ca_file is not None:  # only the API server, with its client certificate, gets in
            self.context.verify_mode = ssl.CERT_REQUIRED
            try:
                self._seen[_CLIENT_CA] = _stamp(client_ca_file)
                self.context.load_verify_locations(cafile=client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise UnreadableCertificate("client_ca_file", f"{client_ca_file}: {exc}") from exc

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; a half-written pair keeps the old certificate."""
        return self._reload_client_ca() | self._reload_certificate()

    def _reload_certificate(self) -> bool:
        return self._reload(
            _CERTIFICATE,
            (self.cert_file, self.key_file),
            lambda: self.context.load_cert_chain(self.cert_file, self.key_file),
            f"reloaded the TLS certificate from {self.cert_file}",
        )

    def _reload_client_ca(self) -> bool:
        if self.client_ca_file is None:
            return False
        ca_file = self.client_ca_file
        return self._reload(
            _CLIENT_CA,
            (ca_file,),
            lambda: self.context.load_verify_locations(cafile=ca_file),
            f"added the client CA bundle of {ca_file} to the trusted CAs",
        )

    def _reload(self, what: str, files: tuple[Path, ...], load: Callable[[], None], done: str) -> bool:
        """Whether ``load`` took ``files`` in again because they changed since ``what`` was last
        loaded; unreadable ones keep the current ``what``, with a warning."""
        try:
            stamp = _stamp(*files)
            if stamp == self._seen[what]:
                return False
            load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("%s not reloaded (keeping the current one): %s", what, exc)
            return False
        self._seen[what] = stamp
        log.info("%s", done)
        return True

    async def run(self, stop: asyncio.Event, interval_s: float) -> None:
        """Check every ``interval_s`` until ``stop`` is set."""
        while not stop.is_set():
            await pause(stop, interval_s)
            self.reload_if_changed()
