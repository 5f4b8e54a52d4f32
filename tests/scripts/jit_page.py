"""Runs hand-written machine code from an anonymous executable page (as a JIT does), which calls back into Python.

usage: jit_page.py fp|nofp READY_FILE

The page has no CFI and no symbols. ``fp`` code keeps a frame pointer
(push %rbp; mov %rsp,%rbp); ``nofp`` code does not, and leaves a junk
value in %rbp while it calls, as optimized JIT kernels do.
"""

import ctypes
import mmap
import sys
import time

WITH_FP = bytes([
    0x55,                          # push %rbp
    0x48, 0x89, 0xE5,              # mov %rsp,%rbp
    0x48, 0x83, 0xEC, 0x10,        # sub $16,%rsp
    0xFF, 0xD7,                    # call *%rdi
    0xC9,                          # leave
    0xC3,                          # ret
])
WITHOUT_FP = bytes([
    0x55,                          # push %rbp
    0x53,                          # push %rbx
    0x48, 0x83, 0xEC, 0x18,        # sub $24,%rsp
    0x48, 0x89, 0xFB,              # mov %rdi,%rbx
    0x48, 0xC7, 0xC5, 0x34, 0x12, 0x00, 0x00,  # mov $0x1234,%rbp (junk: no frame pointer)
    0xFF, 0xD3,                    # call *%rbx
    0x48, 0x83, 0xC4, 0x18,        # add $24,%rsp
    0x5B,                          # pop %rbx
    0x5D,                          # pop %rbp
    0xC3,                          # ret
])

CALLBACK = ctypes.CFUNCTYPE(None)


def in_callback():
    with open(sys.argv[2], "w") as f:
        f.write("ready")
    while True:
        time.sleep(0.05)  # called from the JIT page


def run_jit():
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(WITH_FP if sys.argv[1] == "fp" else WITHOUT_FP)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    jit = ctypes.CFUNCTYPE(None, CALLBACK)(address)
    callback = CALLBACK(in_callback)
    jit(callback)


run_jit()
