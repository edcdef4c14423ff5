"""The options of the commands that ask the API (``wait``, ``logs``, ``runs``, ``findings``,
``compare``): where it is and the caller's token, over the ``MPIJC_CLIENT__*`` settings.

The commands ask through the Python client (:mod:`controller.client`): one client, not two. Its
errors carry their exit status (:mod:`controller.client.errors`); its door
(:mod:`controller.client.connection`) reads the token, refuses to send it over plain http to
another machine, and rides out a lost event stream.
"""

from __future__ import annotations

from typing import Any

from controller.client.connection import settings_with
from controller.contract.settings import ClientSettings

__all__ = ["add_client_options", "client_of"]


def add_client_options(parser: Any) -> None:
    """``--api-url`` (alias ``--api``), ``--token``, ``--token-file``, ``--ca-file`` and
    ``--insecure-http`` on an argparse parser."""
    parser.add_argument(
        "--api-url",
        "--api",
        dest="api_url",
        metavar="URL",
        help="the API's base URL (default: MPIJC_CLIENT__API_URL)",
    )
    parser.add_argument(
        "--token",
        help="the bearer token itself (visible to other users of this machine in its process list: "
        "prefer MPIJC_CLIENT__TOKEN or a token file)",
    )
    parser.add_argument(
        "--token-file",
        help="file holding the bearer token (default: MPIJC_CLIENT__TOKEN, else MPIJC_CLIENT__TOKEN_FILE, "
        "a pod's service-account token)",
    )
    parser.add_argument(
        "--ca-file",
        help="CA bundle that signs the https API's certificate (default: MPIJC_CLIENT__CA_FILE, else the "
        "system's)",
    )
    parser.add_argument(
        "--insecure-http",
        action="store_true",
        default=None,
        help="send the token over plain http to a host that is not this machine (default: "
        "MPIJC_CLIENT__ALLOW_INSECURE_HTTP; anyone on the path can read it)",
    )


def client_of(settings: ClientSettings, args: Any) -> ClientSettings:
    """``settings`` with the command line's ``--api-url``, ``--token``, ``--token-file``, ``--ca-file``
    and ``--insecure-http`` over them (either token option replaces both token settings);
    :class:`~controller.client.errors.UsageError` naming the option when one is malformed."""
    return settings_with(
        settings,
        {
            "api_url": getattr(args, "api_url", None),
            "token_file": getattr(args, "token_file", None),
            "token": getattr(args, "token", None),
            "ca_file": getattr(args, "ca_file", None),
            "allow_insecure_http": True if getattr(args, "insecure_http", None) else None,
        },
    )
