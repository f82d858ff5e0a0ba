"""Waiting for a request's verdicts, and dropping its work when nobody waits any more.

A request's claims wait in their config's batcher queue as futures.  When the request
passes its timeout, or its client disconnects, or its handler is cancelled, every one
of its futures is cancelled: the batcher skips a cancelled future unrun
(``Future.set_running_or_notify_cancel``), so no verifier time goes to an answer that
nobody will read.  Claims already inside a running batch finish with it.

The disconnect is seen by a task that waits on the request's ASGI ``receive``: once the
body is read, the next message a server sends is ``http.disconnect``.  (Starlette's
``Request.is_disconnected`` polls ``receive`` inside a cancelled scope, which under the
app's ``BaseHTTPMiddleware`` never reports the disconnect.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

Receive = Callable[[], Awaitable[dict]]


class ClientGone(Exception):
    """The client disconnected before its verdicts were ready."""


async def _disconnected(receive: Receive) -> None:
    """Returns once ``receive`` gives ``http.disconnect``."""
    while (await receive()).get("type") != "http.disconnect":
        await asyncio.sleep(0.05)  # a server that repeats other messages is not spun on


async def wait_for_results(
    futures: Sequence[Future], timeout: float, receive: Receive | None = None
) -> list[Any]:
    """The futures' results in order.

    Args:
        receive: the request's ASGI receive, after its body was read (None: no disconnect check).

    Raises:
        asyncio.TimeoutError: not all results within ``timeout`` seconds.
        ClientGone: the client disconnected first.
        Exception: the first future's exception (the batch function failed).
    In every case but success, all futures are cancelled first.
    """
    waiter = asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
    gone = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
    try:
        done, _ = await asyncio.wait(
            [waiter] if gone is None else [waiter, gone], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if waiter in done:
            return list(waiter.result())
        if gone is not None and gone in done:
            gone.exception()  # a receive that failed: the connection is gone all the same
            raise ClientGone
        raise asyncio.TimeoutError
    except BaseException:
        for f in futures:
            f.cancel()
        # retrieved once done (a cancelled gather ends with CancelledError set as its exception):
        # no "exception was never retrieved" in the log
        waiter.add_done_callback(lambda w: w.cancelled() or w.exception())
        waiter.cancel()
        raise
    finally:
        if gone is not None and not gone.done():
            gone.cancel()
