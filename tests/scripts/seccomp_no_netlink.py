"""Run ARGV under a seccomp filter that makes socket(AF_NETLINK, ...) fail with EPERM: a kernel or a
container that does not let the process hear of other processes' forks and exits."""
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SYS_SOCKET, AF_NETLINK = 41, 16  # x86-64


def bpf(code, jt, jf, k):
    return struct.pack("<HBBI", code, jt, jf, k)


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


program = b"".join([
    bpf(0x20, 0, 0, 0),  # load the syscall number
    bpf(0x15, 0, 3, SYS_SOCKET),  # socket? else allow
    bpf(0x20, 0, 0, 16),  # load its first argument (the domain, low 32 bits)
    bpf(0x15, 0, 1, AF_NETLINK),  # netlink? else allow
    bpf(0x06, 0, 0, 0x00050000 | 1),  # return ERRNO(EPERM)
    bpf(0x06, 0, 0, 0x7FFF0000),  # allow
])
buf = ctypes.create_string_buffer(program)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(Fprog(len(program) // 8,
                                                                          ctypes.addressof(buf))), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
