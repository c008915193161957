"""Thread pools whose threads are running before the first request.

``ThreadPoolExecutor`` starts a thread from the thread that submits work when
none is idle. In ``llog serve`` that is the event loop, and under load
``Thread.start()`` waits there for the new thread to take the GIL (3-10 ms
each, measured at 32 clients): a burst of long polls or of requests for cold
topics held every connection up while it grew the pool. Threads started here,
before serving, are reused; only a burst beyond them still starts one on the loop.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

START_TIMEOUT_S = 30.0


def started_pool(max_workers: int, name: str, *, started: int | None = None) -> ThreadPoolExecutor:
    """A pool of at most ``max_workers`` threads named ``name_N``, ``started`` of them (default all) running.

    Each started thread is held in a barrier until all are up, so that every submission finds none idle
    and starts a new one.
    """
    count = max_workers if started is None else min(started, max_workers)
    pool = ThreadPoolExecutor(max_workers, thread_name_prefix=name)
    all_up = threading.Barrier(count + 1, timeout=START_TIMEOUT_S)
    try:
        for _ in range(count):
            pool.submit(all_up.wait)
        all_up.wait()
    except BaseException:
        all_up.abort()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    return pool
