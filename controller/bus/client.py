"""The NATS client's types and errors, as the rest of the project names them.

Only :mod:`controller.bus` imports ``nats`` (an import contract in ``pyproject.toml`` says so):
a role, the CLI or the API that holds a connection, a JetStream context, a message or a
key-value bucket names its type from here, and reaches the bus only through the functions of
:mod:`controller.bus`.
"""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

__all__ = ["NATS", "JetStreamContext", "KeyValue", "Msg", "NatsError"]
