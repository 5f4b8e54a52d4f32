"""--interactive: gdb on the user's terminal (a real pty), with tf-bt loaded."""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

from ..utils import ROOT, TFNATIVE, line_of, requires_gdb, script

pytestmark = requires_gdb


class Terminal:
    def __init__(self, argv):
        self.master, slave = pty.openpty()
        # a tall window, as a real terminal has: gdb pages output to the window's height
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 500, 200, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.buf = ""

    def expect(self, text, timeout=120):
        deadline = time.monotonic() + timeout
        while text not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                raise AssertionError("did not see %r in:\n%s" % (text, self.buf))
            r, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if r:
                try:
                    self.buf += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:
                    pass
        return self.buf

    def prompt(self, timeout=120, since=0):
        """Wait for gdb's own prompt at the end of the output (a warning may quote "(gdb)" in its text)."""
        deadline = time.monotonic() + timeout
        while not re.search(r"\(gdb\) $", self.buf[since:]):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                raise AssertionError("no gdb prompt at the end of:\n%s" % self.buf)
            if select.select([self.master], [], [], min(left, 0.5))[0]:
                try:
                    self.buf += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:
                    pass
        return self.buf

    def send(self, text):
        os.write(self.master, text.encode())

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.master)


def test_interactive_gdb_at_first_hit():
    term = Terminal(TFNATIVE + ["attach", "--interactive", "--break", "uname", script("nested_uname.py")])
    try:
        term.expect("breakpoint uname hit")
        term.expect("handing the stopped script to an interactive gdb")
        term.prompt()
        assert "Attaching to process" in term.buf and "is a zombie" not in term.buf
        # tf-bt already ran once on entry; run it again, as a user would, and read only its output
        start = len(term.buf)
        term.send("tf-bt\n")
        path = script("nested_uname.py")
        out = term.prompt(60, since=start)[start:]
        leaf = "[py] leaf at %s:%d" % (path, line_of(path, "os.uname()"))
        assert leaf in out and "[py] <module> at" in out, "tf-bt printed:\n" + out
        term.send("continue\n")
        term.prompt(60)
        term.send("detach\n")
        term.send("quit\n")
        term.expect("done []", 60)
        assert term.proc.wait(60) == 0
    finally:
        term.close()


def test_interactive_gdb_at_a_fatal_signal():
    """The fault is not delivered on handoff: it happens again under the interactive gdb."""
    term = Terminal(TFNATIVE + ["attach", "--interactive", script("segv.py")])
    try:
        term.expect("fatal signal SIGSEGV")
        term.prompt()
        term.send("continue\n")
        term.expect("received signal SIGSEGV", 60)
        start = len(term.prompt(60, since=len(term.buf) - len("received signal SIGSEGV")))
        term.send("tf-bt\n")
        out = term.prompt(60, since=start)[start:]
        poke = "[py] poke at %s:%d" % (script("segv.py"), line_of(script("segv.py"), "string_at(0)"))
        assert poke in out and "[py] <module> at" in out, "tf-bt printed:\n" + out
        term.send("kill\n")
        term.expect("(y or n)", 30)
        term.send("y\n")
        term.expect("killed", 30)
        term.send("quit\n")
        assert term.proc.wait(60) == 128 + 9
    finally:
        term.close()
