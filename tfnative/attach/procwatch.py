"""Which of a process's descendants died of a signal, from the kernel's process events.

The kernel's process-event connector (netlink ``NETLINK_CONNECTOR``,
``CN_IDX_PROC``) reports every fork, exec and exit on the machine with the
exit's wait status, whoever reaps the process and however fast.  tfnative
listens while a session runs, keeps the tree under the script (forks of
processes already in it), and names each member that died of a signal.
Nothing is put in the script's processes, none of them is stopped or traced.

Listening needs ``CAP_NET_ADMIN`` (root); ``ChildWatch.start`` returns None
where the kernel refuses, and the caller falls back to the script's SIGCHLD.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
from typing import Callable, Dict, List, Optional

from ..core import procfs
from ..core.model import ChildDeath
from ..core.signals import signal_name

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
NLMSG_DONE = 3
PROC_EVENT_FORK, PROC_EVENT_EXEC, PROC_EVENT_EXIT = 0x1, 0x2, 0x80000000
_EVENT = 36  # nlmsghdr (16) + cn_msg (20): proc_event.what; its data start 16 bytes later
_DATA = _EVENT + 16


def _control(sock: socket.socket, op: int) -> None:
    payload = struct.pack("=I", op)
    cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
    sock.send(struct.pack("=IHHII", 16 + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn)


# ``listener(what, pid)`` hears of each fork ("fork": the new process), exec ("exec") and end ("exit") in the
# tree, on the watch's thread, as the kernel reports them: it must not block.
Listener = Callable[[str, int], None]


def listen() -> Optional[socket.socket]:
    """A socket subscribed to the kernel's process events, or None where the kernel does not let us listen."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    except (OSError, AttributeError):
        return None
    try:
        sock.bind((0, CN_IDX_PROC))
        _control(sock, PROC_CN_MCAST_LISTEN)
    except OSError:
        sock.close()
        return None
    return sock


class ChildWatch(threading.Thread):
    """Collects the descendants of ``root`` that die of a signal; ``stop()`` ends it and gives them."""

    def __init__(self, sock: socket.socket, root: int, listener: Optional[Listener] = None) -> None:
        super().__init__(name="tfnative-childwatch", daemon=True)
        self.sock = sock
        self.root = root
        self.listener = listener
        self.tree: Dict[int, str] = {root: ""}  # pid -> name (comm, after its exec)
        self.killed: List[ChildDeath] = []
        self._stop_r, self._stop_w = os.pipe()

    @classmethod
    def start_for(cls, root: int) -> Optional[ChildWatch]:
        """A running watch of ``root``'s descendants, or None where the kernel does not let us listen."""
        sock = listen()
        if sock is None:
            return None
        watch = cls(sock, root)
        watch.start()
        return watch

    def run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.sock.fileno(), self._stop_r], [], [])
                if self._stop_r in ready:  # file descriptors both
                    self._drain()
                    return
                self._handle(self.sock.recv(65536))
        except OSError:
            return

    def _drain(self) -> None:
        self.sock.setblocking(False)
        try:
            while True:
                self._handle(self.sock.recv(65536))
        except OSError:
            pass

    def _handle(self, data: bytes) -> None:
        if len(data) < _DATA + 8:
            return
        what = struct.unpack_from("=I", data, _EVENT)[0]
        if what == PROC_EVENT_FORK:
            _ppid, parent_tgid, child_pid, child_tgid = struct.unpack_from("=IIII", data, _DATA)
            if parent_tgid in self.tree and child_pid == child_tgid:
                self.tree[child_tgid] = self.tree[parent_tgid]
                self._tell("fork", child_tgid)
        elif what == PROC_EVENT_EXEC:
            pid, tgid = struct.unpack_from("=II", data, _DATA)
            if tgid in self.tree:
                self.tree[tgid] = procfs.comm(tgid)
                if tgid != self.root:
                    self._tell("exec", tgid)
        elif what == PROC_EVENT_EXIT:
            pid, tgid, status = struct.unpack_from("=III", data, _DATA)
            if pid != tgid or tgid not in self.tree or tgid == self.root:
                return
            name = self.tree.pop(tgid)
            self._tell("exit", tgid)
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                self.killed.append(ChildDeath(pid=tgid, name=name, signal=signal_name(sig),
                                              core_dumped=os.WCOREDUMP(status)))

    def _tell(self, what: str, pid: int) -> None:
        if self.listener is not None:
            self.listener(what, pid)

    def stop(self) -> List[ChildDeath]:
        """Stop listening (events already queued are read first) and return the children killed by a signal."""
        os.write(self._stop_w, b"x")
        self.join(5)
        try:
            _control(self.sock, PROC_CN_MCAST_IGNORE)
        except OSError:
            pass
        self.sock.close()
        os.close(self._stop_r)
        os.close(self._stop_w)
        return list(self.killed)
