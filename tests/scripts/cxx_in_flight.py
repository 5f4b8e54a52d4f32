"""Two threads hold C++ exceptions in flight: one in a catch block, one in a destructor run by the unwinding.

Usage: cxx_in_flight.py READY RELEASE.  Builds a small C++ library with g++ next to READY, runs
``hold_in_catch`` and ``hold_unwinding`` on two Python threads (ctypes releases the GIL), writes READY
once both are in place, and ends cleanly once RELEASE exists.
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

SOURCE = r"""
#include <stdexcept>
#include <unistd.h>
#include <fcntl.h>

static void mark(const char* path) { int fd = open(path, O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); }
static void wait_for(const char* path) { while (access(path, F_OK) != 0) usleep(10000); }

extern "C" int hold_in_catch(const char* ready, const char* release) {
  try {
    throw std::runtime_error("held in a catch block");
  } catch (const std::exception&) {
    mark(ready);
    wait_for(release);
  }
  return 0;
}

struct Blocker {
  const char* ready; const char* release;
  ~Blocker() { mark(ready); wait_for(release); }
};

extern "C" int hold_unwinding(const char* ready, const char* release) {
  try {
    Blocker b{ready, release};
    throw std::length_error("held while unwinding");
  } catch (const std::exception&) {
    return 1;
  }
  return 0;
}
"""


def main() -> None:
    ready, release = sys.argv[1], sys.argv[2]
    work = os.path.dirname(os.path.abspath(ready))
    src, lib = os.path.join(work, "in_flight.cc"), os.path.join(work, "libin_flight.so")
    with open(src, "w") as f:
        f.write(SOURCE)
    subprocess.run(["g++", "-O0", "-g0", "-shared", "-fPIC", "-o", lib, src], check=True)
    so = ctypes.CDLL(lib)
    marks = [os.path.join(work, "catch.ready"), os.path.join(work, "unwind.ready")]
    threads = [threading.Thread(target=so.hold_in_catch, args=(marks[0].encode(), release.encode()),
                                name="in-catch"),
               threading.Thread(target=so.hold_unwinding, args=(marks[1].encode(), release.encode()),
                                name="unwinding")]
    for t in threads:
        t.start()
    while not all(os.path.exists(m) for m in marks):
        time.sleep(0.01)
    with open(ready, "w") as f:
        f.write("ready")
    for t in threads:
        t.join()


main()
