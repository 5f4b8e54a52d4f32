"""samples.py on hand-made captures: what counts as stuck, what as moving, and the timing of the samples."""

import pytest

from tfnative.core.model import Capture
from tfnative.snapshot import samples


def thread(tid, *frames):
    out = []
    for f in frames:
        if isinstance(f, tuple):
            out.append({"kind": "python", "function": f[0], "file": "app.py", "line": f[1]})
        else:
            out.append({"kind": "native", "function": "fn", "library": "libc.so.6", "address": f})
    return {"tid": tid, "frames": out}


def capture(*threads):
    return Capture.from_json({"threads": [dict(t, frames=list(t["frames"])) for t in threads]})


def test_same_stack_in_every_sample_is_stuck_with_the_span():
    main = thread(1, "0x10", ("main", 5))
    marks = samples.progress([(10.0, capture(main)), (10.5, capture(main)), (11.25, capture(main))])
    assert marks == {1: {"progress": "stuck", "stuck_s": 1.25}}


@pytest.mark.parametrize("changed", [
    thread(2, "0x20", ("work", 8)),           # another native address (the same function, elsewhere in it)
    thread(2, "0x10", ("work", 9)),           # another Python line
    thread(2, "0x10", ("work", 8), ("run", 1)),  # deeper
])
def test_any_change_in_any_sample_is_moving(changed):
    before = thread(2, "0x10", ("work", 8))
    marks = samples.progress([(0.0, capture(before)), (1.0, capture(changed)), (2.0, capture(before))])
    assert marks == {2: {"progress": "moving"}}


def test_a_thread_missing_from_a_sample_is_moving_and_one_sample_says_nothing():
    t = thread(3, "0x10")
    assert samples.progress([(0.0, capture()), (1.0, capture(t)), (2.0, capture(t))]) == {3: {"progress": "moving"}}
    assert samples.progress([(0.0, capture(t))]) == {}


def test_take_spaces_samples_from_start_to_start_and_marks_the_last():
    now = [100.0]
    slept = []
    taken = []

    def clock():
        return now[0]

    def sleep(s):
        slept.append(round(s, 3))
        now[0] += s

    def snap():
        taken.append(now[0])
        now[0] += 0.2  # a snapshot takes time: the next one starts interval after this one started
        return capture(thread(1, "0x10"), thread(2, "0x%x" % (0x20 + len(taken))))

    last = samples.take(3, 0.5, snap, sleep=sleep, clock=clock, on_sample=lambda i: None)
    assert taken == [100.0, 100.5, 101.0]
    assert slept == [0.3, 0.3]
    assert last.samples == {"count": 3, "interval_s": 0.5, "span_s": 1.0}
    assert {t.tid: t.progress for t in last.threads} == {1: "stuck", 2: "moving"}
    assert last.threads[0].stuck_s == 1.0 and last.threads[1].stuck_s is None
    with pytest.raises(ValueError):
        samples.take(0, 1.0, snap)
