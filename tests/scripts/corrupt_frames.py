"""Corrupts its own Python frame chain with ctypes, then waits in C (time.sleep) so nothing walks it.

usage: corrupt_frames.py cycle|unreadable READY_FILE

cycle: ``outer``'s caller link points back at ``inner``'s frame
(inner -> middle -> outer -> inner ...);
unreadable: ``middle``'s code pointer points at an unmapped address.
The chain fields are CPython's own: 3.10's PyFrameObject (f_back at 24,
f_code at 32), 3.11+'s _PyInterpreterFrame (f_code at 0, previous at 8),
reached from a frame object's f_frame (at 24).
"""

import ctypes
import sys
import time

MODE = sys.argv[1]
PREVIOUS, CODE = (24, 32) if sys.version_info < (3, 11) else (8, 0)


def _word(addr):
    return ctypes.c_void_p.from_address(addr)


def _chain_frame(frame):
    return id(frame) if sys.version_info < (3, 11) else _word(id(frame) + 24).value


def bottom():
    inner_f = _chain_frame(sys._getframe(1))
    middle_f = _chain_frame(sys._getframe(2))
    outer_f = _chain_frame(sys._getframe(3))
    if MODE == "cycle":
        _word(outer_f + PREVIOUS).value = inner_f
    else:
        _word(middle_f + CODE).value = 0x10
    with open(sys.argv[2], "w") as f:
        f.write("ready")
    while True:
        time.sleep(0.05)


def inner():
    bottom()


def middle():
    inner()


def outer():
    middle()


outer()
