"""The GPU queue: trials are served in the order they joined, and a place left early is skipped."""

from __future__ import annotations

import threading
import time

from ktx.search.gpuqueue import GpuQueue


def _serve(queue: GpuQueue, count: int, start_order: list[int]) -> list[int]:
    """Join ``count`` places in order, then let threads claim them in ``start_order``."""
    places = [queue.join() for _ in range(count)]
    served: list[int] = []

    def take(i: int) -> None:
        with places[i]:
            served.append(i)
            time.sleep(0.001)

    threads = [threading.Thread(target=take, args=(i,)) for i in start_order]
    for t in threads:
        t.start()
        time.sleep(0.005)  # the later places are already waiting when the first comes
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a place never got its turn"
    return served


def test_places_are_served_in_the_order_they_joined_not_the_order_they_wait() -> None:
    assert _serve(GpuQueue(), 6, [5, 3, 4, 1, 2, 0]) == [0, 1, 2, 3, 4, 5]


def test_a_place_left_before_its_turn_does_not_block_those_behind_it() -> None:
    queue = GpuQueue()
    first, second, third = queue.join(), queue.join(), queue.join()
    second.leave()  # an error before measuring (a prefetch that raised)
    second.leave()  # leaving twice is harmless
    with first:
        pass
    done = threading.Event()

    def last() -> None:
        with third:
            done.set()

    t = threading.Thread(target=last)
    t.start()
    t.join(10)
    assert done.is_set(), "the third place waited for the second, which had left"


def test_a_later_place_waits_while_an_earlier_one_holds_the_gpu() -> None:
    queue = GpuQueue()
    first, second = queue.join(), queue.join()
    entered = threading.Event()

    def later() -> None:
        with second:
            entered.set()

    with first:
        t = threading.Thread(target=later)
        t.start()
        assert not entered.wait(0.1), "the second place entered while the first held the GPU"
    t.join(10)
    assert entered.is_set()


def test_the_queue_itself_is_a_lock_that_keeps_the_order() -> None:
    queue = GpuQueue()
    waiting = queue.join()  # a trial that joined first, still compiling
    entered = threading.Event()

    def paired_check() -> None:
        with queue:
            entered.set()

    t = threading.Thread(target=paired_check)
    t.start()
    assert not entered.wait(0.1), "the paired check went ahead of a trial that joined first"
    with waiting:
        pass
    t.join(10)
    assert entered.is_set()
    with queue:  # free again
        pass
