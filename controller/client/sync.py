"""The client for code that is not asynchronous (a notebook cell, a pipeline step): the very
:class:`~controller.client.aio.AsyncClient`, its calls run on an event loop of its own in a
background thread. So the two clients cannot drift apart, and it works where an event loop is
already running in the caller's thread (Jupyter's), which ``asyncio.run`` refuses.

Ctrl-C (a notebook's "interrupt") while a call waits cancels that call on the client's loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

from controller.client.aio import AsyncClient
from controller.contract.runs import LogEntry

__all__ = ["Client"]

T = TypeVar("T")
P = ParamSpec("P")


async def _next(iterator: AsyncIterator[T]) -> T:
    return await anext(iterator)


def _arguments_of(
    source: Callable[Concatenate[AsyncClient, P], object],
) -> Callable[[Callable[Concatenate[Client, ...], T]], Callable[Concatenate[Client, P], T]]:
    """A method of :class:`Client` that passes its arguments on to :class:`AsyncClient`'s ``source``:
    it takes the very arguments, as type checkers and ``help()`` see them, and returns its own."""

    def taking(method: Callable[Concatenate[Client, ...], T]) -> Callable[Concatenate[Client, P], T]:
        returns = inspect.signature(method).return_annotation
        method.__signature__ = inspect.signature(source).replace(return_annotation=returns)  # type: ignore[attr-defined]
        return method

    return taking


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]], note: str = ""
) -> Callable[Concatenate[Client, P], T]:
    """A method of :class:`~controller.client.aio.AsyncClient` as a method of :class:`Client`: the
    very arguments (the signature is the async method's), the call run on the client's loop until
    it returns."""

    def blocking(client: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return client._call(method(client._async, *args, **kwargs))

    blocking.__name__ = method.__name__
    blocking.__qualname__ = f"Client.{method.__name__}"
    blocking.__doc__ = f":meth:`AsyncClient.{method.__name__}`{note}."
    blocking.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return blocking


class Client:
    """Reads of the API, blocking: ``with Client() as api: api.runs(...)``. Arguments, settings,
    methods and errors are :class:`~controller.client.aio.AsyncClient`'s; ``logs`` is an iterator."""

    @_arguments_of(AsyncClient.__init__)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._async = AsyncClient(*args, **kwargs)
        self.settings = self._async.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mpijc-client", daemon=True)
        self._thread.start()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections kept open and stop the client's thread; the client is done."""
        if self._loop.is_closed():
            return
        self._call(self._async.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _call(self, call: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        try:
            return future.result()
        except BaseException:  # Ctrl-C included: the call stops there too
            future.cancel()
            raise

    runs = _blocking(AsyncClient.runs)
    find_attempt = _blocking(AsyncClient.find_attempt)
    run = _blocking(AsyncClient.run)
    findings = _blocking(AsyncClient.findings)
    compare = _blocking(AsyncClient.compare)
    wait = _blocking(AsyncClient.wait, " (``on_event`` is told each event on the client's thread)")

    @_arguments_of(AsyncClient.logs)
    def logs(self, *args: Any, **kwargs: Any) -> Iterator[LogEntry]:
        """:meth:`AsyncClient.logs`, as an iterator (stop iterating to stop following)."""
        lines = self._async.logs(*args, **kwargs)
        try:
            while True:
                try:
                    yield self._call(_next(lines))
                except StopAsyncIteration:
                    return
        finally:
            if not self._loop.is_closed():
                self._call(lines.aclose())
