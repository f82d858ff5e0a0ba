"""The micro-batcher on its own: batches form, each caller gets its own result or the batch's error."""

from __future__ import annotations

import threading
import time

import pytest

from app.serve.batcher import MicroBatcher, QueueFull


def test_each_caller_gets_its_own_result_and_batches_form():
    seen: list[list[int]] = []

    def square(items):  # noqa: ANN001, ANN202
        seen.append(list(items))
        return [x * x for x in items]

    b = MicroBatcher(square, max_batch=4, max_wait=0.2)
    futures = b.submit_many(list(range(10)))
    assert [f.result(5) for f in futures] == [x * x for x in range(10)]
    assert max(len(s) for s in seen) == 4 and sum(len(s) for s in seen) == 10
    assert sorted(x for s in seen for x in s) == list(range(10))
    b.close()


def test_threads_submitting_at_once_share_batches():
    b = MicroBatcher(lambda items: [f"r{x}" for x in items], max_batch=16, max_wait=0.1)
    out: dict[int, str] = {}
    barrier = threading.Barrier(8)

    def call(i: int) -> None:
        barrier.wait()
        out[i] = b.submit(i).result(5)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: f"r{i}" for i in range(8)}
    assert max(b.batches) > 1
    b.close()


def test_an_error_reaches_every_caller_of_that_batch_only():
    def fail_on_odd(items):  # noqa: ANN001, ANN202
        if any(x % 2 for x in items):
            raise ValueError("odd")
        return items

    b = MicroBatcher(fail_on_odd, max_batch=1, max_wait=0)
    good, bad = b.submit(2), b.submit(3)
    assert good.result(5) == 2
    with pytest.raises(ValueError, match="odd"):
        bad.result(5)
    b.close()


def test_a_wrong_number_of_results_is_an_error_not_a_mixup():
    b = MicroBatcher(lambda items: list(items)[:-1], max_batch=2, max_wait=0.2)
    f1, f2 = b.submit_many([1, 2])
    with pytest.raises(RuntimeError, match="returned 1 results for 2 items"):
        f1.result(5)
    with pytest.raises(RuntimeError):
        f2.result(5)
    b.close()


def test_cancelled_items_are_not_run():
    started = threading.Event()
    release = threading.Event()
    ran: list[int] = []

    def slow(items):  # noqa: ANN001, ANN202
        started.set()
        release.wait(5)
        ran.extend(items)
        return items

    b = MicroBatcher(slow, max_batch=1, max_wait=0)
    first = b.submit(1)
    assert started.wait(5)
    second = b.submit(2)
    assert second.cancel()
    release.set()
    assert first.result(5) == 1
    time.sleep(0.1)
    assert ran == [1]
    b.close()
    with pytest.raises(RuntimeError, match="closed"):
        b.submit(3)


def test_a_full_queue_refuses_a_request_whole_and_says_when_to_retry():
    release = threading.Event()
    started = threading.Event()

    def held(items):  # noqa: ANN001, ANN202
        started.set()
        release.wait(5)
        return items

    b = MicroBatcher(held, max_batch=2, max_wait=0, max_queue=3)
    running = b.submit_many([0])  # taken by the worker at once: it waits no more
    assert started.wait(5)
    waiting = b.submit_many([1, 2, 3])
    with pytest.raises(QueueFull) as full:
        b.submit_many([4])
    assert full.value.waiting == 3 and full.value.retry_after >= 1
    with pytest.raises(QueueFull):
        b.submit_many([5, 6])  # none of them queued: all or nothing
    release.set()
    assert [f.result(5) for f in running + waiting] == [0, 1, 2, 3]
    assert b.submit_many([7])[0].result(5) == 7  # room again
    b.close()


@pytest.mark.parametrize("kwargs", [{"max_batch": 0}, {"max_wait": -1}, {"max_queue": 0}])
def test_bad_settings(kwargs):
    with pytest.raises(ValueError):
        MicroBatcher(lambda items: items, **kwargs)


def test_a_lone_item_is_not_held_for_the_whole_wait_but_a_burst_is_one_batch():
    b = MicroBatcher(lambda items: list(items), max_batch=64, max_wait=5.0, gap=0.05)
    t = time.monotonic()
    assert b.submit(1).result(10) == 1
    assert time.monotonic() - t < 2.5  # not the 5 s max_wait: nothing came within the gap
    futures = b.submit_many(list(range(20)))  # a burst: each item well within the gap of the last
    assert [f.result(10) for f in futures] == list(range(20))
    assert b.batches[-1] == 20
    b.close()
