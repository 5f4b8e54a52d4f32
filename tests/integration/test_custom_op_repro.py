"""``attach --repro`` and ``core --repro`` on a custom op's crash (issue #45): ``zero_out_oob``
(``tests/custom_op/zero_out_oob.cc``, built by ``tests/kernels.py``), whose kernel reads out of bounds and dies
of SIGSEGV, called eagerly by ``tests/scripts/kernel_case.py``.  The script tfnative writes loads the op's library
by its path (``tf.load_op_library``), calls the library's own op function, and dies in its kernel again, alone
too.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest

from tfnative.attach.repro import _wrapper_op

from ..kernels import build_op
from ..utils import SCRIPTS, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def test_a_custom_ops_wrapper_names_the_op():
    """The call ``tf.load_op_library`` generates is exec'd code: faulthandler names its file ``<string>``."""
    stderr = ('Current thread 0x00007fd707aa2b80 (most recent call first):\n'
              '  File "<string>", line 43 in zero_out_oob\n  File "/tmp/r/repro.py", line 6 in <module>\n')
    assert _wrapper_op(stderr, "ZeroOutOob") == "ZeroOutOob"


def test_attach_repro_of_a_custom_ops_sigsegv(tmp_path):
    lib = build_op("zero_out_oob")
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["attach", "--json", str(out), "--repro", str(repro),
                      os.path.join(SCRIPTS, "kernel_case.py"), lib, "oob", "eager"], timeout=600)
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr[-3000:]
    # the op line (its argument names where the OpDef was read from memory: not on every path yet)
    assert re.search(r"^ *op ZeroOutOob\((to_zero: )?int32\[3\]=\[1,2,3\], (keep: )?int64\[\]=1099511627776\)$",
                     r.stdout + r.stderr, re.M), r.stderr[-3000:]
    line = next((x for x in r.stderr.splitlines() if "tfnative: repro:" in x), "(no repro line)")
    assert re.match(r"tfnative: repro: repro\.py \(\d+ lines\) dies of SIGSEGV in op ZeroOutOob, as the original "
                    r"did$", line), line
    rep = load_json(out)["triage"]["reproducer"]
    assert (rep["op"], rep["check"]["outcome"], rep["check"]["signal"], rep["check"]["op"]) == (
        "ZeroOutOob", "same", "SIGSEGV", "ZeroOutOob"), rep
    script = repro.read_text()
    assert "tf.load_op_library(%r)" % lib in script, script
    assert "lib.zero_out_oob(" in script and "tf.raw_ops" not in script, script
    # alone: plain python, a fresh directory, no core; it dies in the library's op, as faulthandler says
    _dies_alone_in_zero_out_oob(tmp_path, repro)


def test_core_repro_of_a_custom_ops_sigsegv(tmp_path):
    """From the core of the same crash: the script loads the library by the path the core's mappings give and dies
    in its kernel again, under tfnative's check and alone."""
    lib = build_op("zero_out_oob")
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "kernel_case.py"), lib, "oob", "eager", "core"],
                          cwd=str(tmp_path), capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGSEGV and (tmp_path / "core").exists(), proc.stderr[-2000:]
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["core", str(tmp_path / "core"), os.path.realpath(sys.executable), "--json", str(out),
                      "--repro", str(repro)], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next((x for x in r.stderr.splitlines() if "tfnative: repro:" in x), "(no repro line)")
    assert re.match(r"tfnative: repro: repro\.py \(\d+ lines\) dies of SIGSEGV in op ZeroOutOob, as the original "
                    r"did$", line), line
    rep = load_json(out)["triage"]["reproducer"]
    assert (rep["op"], rep["library"], rep["check"]["outcome"], rep["check"]["op"]) == (
        "ZeroOutOob", lib, "same", "ZeroOutOob"), rep
    script = repro.read_text()
    assert "tf.load_op_library(%r)" % lib in script and "lib.zero_out_oob(" in script, script
    assert "kernel_case" not in script and "run_case" not in script, script
    (tmp_path / "core").unlink()
    _dies_alone_in_zero_out_oob(tmp_path, repro)


def _dies_alone_in_zero_out_oob(tmp_path, repro):
    """The script alone: plain python, a fresh directory, no core; it dies in the library's op, as faulthandler
    says."""
    alone = tmp_path / "alone"
    alone.mkdir()
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(repro)], cwd=str(alone), capture_output=True,
                          text=True, timeout=300, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    assert proc.returncode == -signal.SIGSEGV, proc.stderr[-2000:]
    assert _wrapper_op(proc.stderr, "ZeroOutOob") == "ZeroOutOob", proc.stderr[-2000:]
