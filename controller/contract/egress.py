"""Where outbound webhooks may go: the SSRF guard.

A subscription's URL is input from whoever may create subscriptions, and the controller
runs inside the cluster; without a guard a webhook could reach the cloud metadata service,
the Kubernetes API or a database. So an address that is not globally routable — loopback,
private (RFC 1918, IPv6 ULA), link-local (including ``169.254.169.254``), shared/CGNAT,
multicast, reserved, unspecified, IPv6 site-local (``fec0::/10``) — is refused unless it lies
in a CIDR the operator allowlisted (``notify.allow_cidrs``). IPv6 forms that carry an IPv4
address are decoded and the IPv4 rules applied to what they carry: IPv4-mapped
(``::ffff:0:0/96``), IPv4-compatible (``::/96``), 6to4 (``2002::/16``), Teredo (``2001::/32``,
server and client) and NAT64 (``64:ff9b::/96``; the local-use ``64:ff9b:1::/48`` is refused
outright), so ``2002:a00:1::`` is refused like ``10.0.0.1``.

Ports are restricted too: 80 and 443 (:data:`ALLOWED_PORTS`), except towards addresses the
operator allowlisted, which may use any port (an in-cluster receiver on 8080). The refusal
says only that the host "resolves to a private, loopback or link-local address", never the
address: the API must not become a way to learn what internal names resolve to.

The host is resolved and *every* address it resolves to is checked: a name answering one
public and one private address is refused. The check runs when a subscription is created
and again before every attempt, and the sender then connects to the address that was
checked (:meth:`Target.pinned_url`), so a DNS answer that changes between the check and the
connection (rebinding) cannot redirect a webhook.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit, urlunsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

__all__ = ["EgressPolicy", "EgressRefusedError", "Target", "system_resolver"]

_LITERAL_CACHE = 10_000

ALLOWED_PORTS: frozenset[int] = frozenset({80, 443})
"""Ports a webhook may be sent to, unless every address is in ``notify.allow_cidrs``."""

REFUSED = "resolves to a private, loopback or link-local address"

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


class EgressRefusedError(ValueError):
    """The URL may not be called; the message says why, in words fit for an API client."""


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, through the system resolver (off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 transition form carries (mapped, 6to4, Teredo, NAT64, compatible)."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    return ()


def _kind(address: IPAddress) -> str | None:
    """Why ``address`` is not public, or ``None`` when it is globally routable."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SITE_LOCAL:
            return "site-local"
        if address in _NAT64_LOCAL:
            return "private"
        embedded = _embedded_ipv4(address)
        for inner in embedded:
            kind = _kind(inner)
            if kind is not None:
                return kind
        if embedded and address.teredo is None and address not in _COMPATIBLE:
            return None  # mapped, 6to4, NAT64 of public IPv4 addresses: as public as those
    for kind, test in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if test:
            return kind
    return None if address.is_global else "non-public"


@dataclass(frozen=True)
class Target:
    """A URL whose addresses passed the guard."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[IPAddress, ...]

    def pinned_url(self) -> str:
        """The URL with its host replaced by the first checked address (send ``Host: host``)."""
        return self._pinned

    @cached_property
    def _pinned(self) -> str:  # once per target: a target of an IP literal is reused for every send
        parts = urlsplit(self.url)
        address = self.addresses[0]
        literal = f"[{address}]" if address.version == 6 else str(address)
        return urlunsplit((parts.scheme, f"{literal}:{self.port}", parts.path or "/", parts.query, ""))

    @cached_property
    def host_header(self) -> str:
        default = {"http": 80, "https": 443}[self.scheme]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class EgressPolicy:
    """Which URLs webhooks may call: http(s), no credentials, public addresses or allowlisted ones."""

    def __init__(
        self,
        allow_cidrs: Iterable[str] = (),
        resolver: Resolver = system_resolver,
        allow_ports: Iterable[int] = ALLOWED_PORTS,
    ) -> None:
        self._ports = frozenset(allow_ports)
        try:
            self._allowed: tuple[IPNetwork, ...] = tuple(
                ipaddress.ip_network(cidr, strict=False) for cidr in allow_cidrs
            )
        except ValueError as exc:
            raise ValueError(f"notify.allow_cidrs: {exc}") from exc
        self._resolve = resolver
        self._literals: dict[str, Target] = {}  # URLs with an IP address for a host never change

    def _allowlisted(self, address: IPAddress) -> bool:
        return any(address in network for network in self._allowed if network.version == address.version)

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be called (``None``: it may); for logs, it names the address."""
        kind = _kind(address)
        if kind is None or self._allowlisted(address):
            return None
        article = "an" if kind[0] in "aeiou" else "a"
        return f"{address} is {article} {kind} address"

    @staticmethod
    def parse(url: str) -> tuple[str, str, int]:
        """(scheme, host, port) of a URL a webhook may be sent to; raises :class:`EgressRefusedError`."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise EgressRefusedError(f"not a valid URL: {exc}") from exc
        if parts.scheme not in {"http", "https"}:
            raise EgressRefusedError(f"the URL must be http or https, not {parts.scheme or 'empty'!r}")
        if parts.username is not None or parts.password is not None:
            raise EgressRefusedError("the URL may not carry credentials (user:password@)")
        if not parts.hostname:
            raise EgressRefusedError("the URL has no host")
        if parts.fragment:
            raise EgressRefusedError("the URL may not have a #fragment")
        return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)

    async def check(self, url: str) -> Target:
        """Resolve the URL's host and check every address; raises :class:`EgressRefusedError`."""
        known = self._literals.get(url)
        if known is not None:
            return known
        scheme, host, port = self.parse(url)
        try:
            found: list[str] = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                found = await self._resolve(host, port)
            except OSError as exc:
                raise EgressRefusedError(f"host {host!r} does not resolve: {exc}") from exc
        if not found:
            raise EgressRefusedError(f"host {host!r} resolves to no address")
        addresses = tuple(ipaddress.ip_address(a.split("%", 1)[0]) for a in found)
        if any(self.refusal(address) for address in addresses):
            raise EgressRefusedError(  # never which address: that would tell what internal names are
                f"{url} may not be called: it {REFUSED}; webhooks go to public addresses only "
                "unless the operator allowlists the range (notify.allow_cidrs)"
            )
        if port not in self._ports and not all(self._allowlisted(a) for a in addresses):
            raise EgressRefusedError(
                f"{url} may not be called: port {port} is not allowed; webhooks go to ports "
                f"{', '.join(map(str, sorted(self._ports)))} only (notify.allow_ports), unless the "
                "operator allowlists the address range (notify.allow_cidrs)"
            )
        target = Target(url, scheme, host, port, addresses)
        if found == [host] and len(self._literals) < _LITERAL_CACHE:
            self._literals[url] = target
        return target
