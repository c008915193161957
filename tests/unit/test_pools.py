import threading

import pytest

from server.pools import started_pool


def pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{name}_")]


def test_the_started_threads_are_running_when_the_pool_is_returned():
    pool = started_pool(16, "pools-a", started=6)
    try:
        up = pool_threads("pools-a")
        assert len(up) == 6
        assert all(t.is_alive() for t in up)
        # No exact count after a burst: a worker makes itself idle a few bytecodes after its task's result is
        # set, and a submission in between starts a thread (ThreadPoolExecutor's own race, harmless here).
        assert pool.submit(lambda: threading.current_thread().name).result(10).startswith("pools-a_")
    finally:
        pool.shutdown()


def test_a_burst_beyond_the_started_threads_grows_the_pool_up_to_its_bound():
    pool = started_pool(4, "pools-b", started=1)
    try:
        release, busy = threading.Event(), threading.Barrier(5, timeout=10)

        def hold() -> None:
            busy.wait()
            release.wait(10)

        burst = [pool.submit(hold) for _ in range(4)]
        busy.wait()
        assert len(pool_threads("pools-b")) == 4
        release.set()
        for f in burst:
            f.result(10)
    finally:
        pool.shutdown()


def test_by_default_every_thread_is_started_and_started_is_capped_by_the_bound():
    for pool, name, expected in ((started_pool(3, "pools-c"), "pools-c", 3),
                                 (started_pool(2, "pools-d", started=50), "pools-d", 2)):  # fmt: skip
        try:
            assert len(pool_threads(name)) == expected
        finally:
            pool.shutdown()


def test_a_thread_that_cannot_start_fails_the_pool_and_leaves_no_thread_waiting(monkeypatch):
    starts = 0
    real_start = threading.Thread.start

    def start_twice(self: threading.Thread) -> None:
        nonlocal starts
        starts += 1
        if starts > 2:
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start_twice)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        started_pool(5, "pools-e")
    monkeypatch.undo()
    for thread in pool_threads("pools-e"):
        thread.join(10)
        assert not thread.is_alive()
