"""Start-up: each command loads what it runs when it runs (issue #26).

``tfnative --version`` loads no more than the package's ``__init__``; ``--help`` of any
command loads click and the command modules, never the attach loop, gdb's driver,
psutil, the snapshot path or merge.  The modules are read from ``-X importtime``.
"""

import os
import subprocess
import sys

import pytest

from ..installed import from_source

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What only the commands that use them may load.
HEAVY = ("tfnative.attach.session", "tfnative.snapshot.process", "tfnative.gdb.mi", "tfnative.snapshot.pipeline",
         "tfnative.snapshot.many", "tfnative.output.merge", "tfnative.output.report", "tfnative.corefile.source",
         "tfnative.toolchain.doctor", "psutil", "pygdbmi", "tfnative_gdb")


def imported_modules(*args):
    # From outside the checkout: ``-m`` puts the working directory first on sys.path.
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "tfnative", *args],
                       cwd=ROOT if from_source() else "/", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    mods = set()
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            mods.add(line.rsplit("|", 1)[1].strip())
    return r.stdout, mods


def test_version_loads_neither_click_nor_the_commands():
    out, mods = imported_modules("--version")
    assert out.startswith("tfnative, version ")
    assert "tfnative" in mods  # the parse found the package itself
    assert not [m for m in mods if m.startswith("tfnative.") or m == "click"]


@pytest.mark.parametrize("argv", [["--help"], ["stack", "--help"], ["attach", "--help"], ["core", "--help"],
                                  ["merge", "--help"], ["report", "--help"]])
def test_help_loads_no_command_body(argv):
    out, mods = imported_modules(*argv)
    assert "Usage:" in out
    assert "tfnative.cli" in mods and "click" in mods
    assert sorted(m for m in mods if m in HEAVY) == []
