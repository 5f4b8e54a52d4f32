"""A C++ exception thrown out of a ``noexcept`` function: ``std::terminate``, then SIGABRT.

Usage: cxx_terminate.py WORKDIR.  Builds a small C++ library with g++ in WORKDIR and calls it.
"""
import ctypes
import os
import subprocess
import sys

SOURCE = r"""
#include <stdexcept>
extern "C" void escape() noexcept { throw std::runtime_error("escaped a noexcept function"); }
"""

work = sys.argv[1]
src, lib = os.path.join(work, "terminate.cc"), os.path.join(work, "libterminate.so")
with open(src, "w") as f:
    f.write(SOURCE)
subprocess.run(["g++", "-O1", "-w", "-shared", "-fPIC", "-o", lib, src], check=True)
ctypes.CDLL(lib).escape()  # SIGABRT from std::terminate
