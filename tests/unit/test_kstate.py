"""kstate.py: the system call from orig_rax, and the text a thread header shows."""

from tfnative.core import kstate
from tfnative.core.model import Thread


def test_syscall_from_orig_rax():
    assert kstate.syscall_name(202) == "futex"
    assert kstate.syscall_name(230) == "clock_nanosleep"
    assert kstate.syscall_name(999) == "syscall 999"
    assert kstate.syscall_name((1 << 64) - 1) is None  # -1: in user code
    assert kstate.syscall_name(None) is None


def test_kernel_state_and_text():
    assert kstate.kernel_state("S", {"orig_rax": 202}) == {"state": "S", "syscall": "futex"}
    assert kstate.kernel_state("R", {"orig_rax": (1 << 64) - 1}) == {"state": "R"}
    assert kstate.kernel_state(None, None) is None
    assert kstate.text({"state": "S", "syscall": "futex"}) == "S in futex"
    assert kstate.text({"state": "R"}) == "R"
    assert kstate.text(None) == ""
    threads = [Thread(tid=1), Thread(tid=2)]
    kstate.annotate(threads, {1: "D"}, {1: {"orig_rax": 0}, 2: {"orig_rax": (1 << 64) - 1}})
    assert [t.kernel for t in threads] == [{"state": "D", "syscall": "read"}, None]
