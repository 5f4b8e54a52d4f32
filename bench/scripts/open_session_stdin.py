"""examples/open_session.py for the manual gdb recipe: imports TF, says "waiting", reads one line
from stdin (so that gdb can attach and arm its breakpoint first), then runs the example's main()."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

import open_session  # noqa: E402  (imports TensorFlow)

if __name__ == "__main__":
    print("waiting", flush=True)
    sys.stdin.readline()
    open_session.main()
