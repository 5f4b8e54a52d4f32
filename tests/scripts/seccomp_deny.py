"""seccomp_deny.py ptrace|netlink ARGV...: run ARGV under a seccomp filter that fails one thing with EPERM.

``ptrace``: ptrace(2), as Docker's default profile does.  ``netlink``:
socket(AF_NETLINK, ...), a kernel or a container that does not let the
process hear of other processes' forks and exits.
"""
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SYS_PTRACE, SYS_SOCKET, AF_NETLINK = 101, 41, 16  # x86-64
LOAD_NR, LOAD_ARG0, JEQ, RET = (0x20, 0, 0, 0), (0x20, 0, 0, 16), 0x15, 0x06
EPERM, ALLOW = 0x00050000 | 1, 0x7FFF0000


def bpf(code, jt, jf, k):
    return struct.pack("<HBBI", code, jt, jf, k)


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


TESTS = {  # the checks before "return EPERM"; each jumps to "allow" when it fails
    "ptrace": [bpf(*LOAD_NR), bpf(JEQ, 0, 1, SYS_PTRACE)],
    "netlink": [bpf(*LOAD_NR), bpf(JEQ, 0, 3, SYS_SOCKET), bpf(*LOAD_ARG0), bpf(JEQ, 0, 1, AF_NETLINK)],
}
program = b"".join(TESTS[sys.argv[1]] + [bpf(RET, 0, 0, EPERM), bpf(RET, 0, 0, ALLOW)])
buf = ctypes.create_string_buffer(program)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(Fprog(len(program) // 8,
                                                                          ctypes.addressof(buf))), 0, 0) == 0
os.execv(sys.argv[2], sys.argv[2:])
