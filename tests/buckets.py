"""What a JetStream key-value bucket holds, read the way the server stores it."""

from __future__ import annotations

from nats.js import JetStreamContext


async def bucket_keys(js: JetStreamContext, bucket: str) -> set[str]:
    """The keys ``bucket``'s stream holds any message for: values and delete markers alike."""
    info = await js.stream_info(f"KV_{bucket}", subjects_filter=">")
    return {subject.removeprefix(f"$KV.{bucket}.") for subject in info.state.subjects or {}}


async def object_keys(js: JetStreamContext, bucket: str, positions: str) -> set[str]:
    """:func:`bucket_keys` less the keys starting with ``positions`` (where each watch stood)."""
    return {key for key in await bucket_keys(js, bucket) if not key.startswith(positions)}
