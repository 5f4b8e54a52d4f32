"""``attach --repro`` on a real crash whose input is larger than tfnative reads whole (issue #45):
``tests/scripts/tf_big_input.py``, Reshape's SIGFPE on a float32[5000, 5000] input (100 MB).  The data file holds
the input byte for byte (the script's own SHA-256 of it), the script written dies the same way, and tfnative's
own peak RSS stays far below the input's size (the input was copied a chunk at a time), with ``--repro-minimize``
too."""

from __future__ import annotations

import hashlib
import re
import signal
import struct
import subprocess
import time
import zipfile

import pytest

from ..utils import ROOT, TFNATIVE, load_json, requires_gdb, requires_tf

SCRIPT = ROOT + "/tests/scripts/tf_big_input.py"
INPUT_BYTES = 4 * 5000 * 5000


def _peak_kb(pid: int, last: int) -> int:
    """The process's peak RSS (VmHWM) so far, in kB; ``last`` where it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return last


def _attach(args: list) -> tuple:
    """``tfnative attach ARGS``: (its stderr, its own peak RSS in kB), once it has died of the script's SIGFPE."""
    proc = subprocess.Popen(TFNATIVE + ["attach"] + args, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, began = 0, time.monotonic()
    while proc.poll() is None and time.monotonic() - began < 300:
        peak = _peak_kb(proc.pid, peak)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGFPE, err[-3000:]
    return err, peak


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_an_input_over_64_mib_is_written_in_bounded_memory_and_the_script_dies_the_same_way(tmp_path):
    out, repro, digest = tmp_path / "s.json", tmp_path / "repro.py", tmp_path / "sum.txt"
    err, peak = _attach(["--json", str(out), "--repro", str(repro), SCRIPT, str(digest)])
    lines = [x for x in err.splitlines() if "tfnative: repro:" in x]
    assert lines == ["tfnative: repro: repro.py (6 lines) dies of SIGFPE in op Reshape, as the original did"], err
    assert 0 < peak * 1024 < INPUT_BYTES * 3 // 4, peak  # tfnative's own process: ~51 MB where the input is 100 MB
    with zipfile.ZipFile(str(repro) + ".npz") as z, z.open("tensor.npy") as member:
        head = member.read(10)
        header = member.read(struct.unpack_from("<H", head, 8)[0]).decode()
        assert re.match(r"\{'descr': '<f4', 'fortran_order': False, 'shape': \(5000, 5000\), \}", header), header
        sha = hashlib.sha256()
        for chunk in iter(lambda: member.read(1 << 22), b""):
            sha.update(chunk)
    assert sha.hexdigest() == digest.read_text().strip()
    assert "values" not in load_json(out)["triage"]["op"]["inputs"][0]


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_an_input_over_64_mib_is_minimized_in_bounded_memory(tmp_path):
    """``--repro-minimize`` on the same crash: the copy shrunk without being read into memory (its tries' data
    written a chunk at a time), to one element (Reshape's SIGFPE does not need the values), and tfnative's own
    peak RSS as far below the input's size as without it."""
    repro = tmp_path / "repro.py"
    err, peak = _attach(["--repro", str(repro), "--repro-minimize", SCRIPT])
    lines = [x for x in err.splitlines() if "tfnative: repro:" in x]
    assert re.match(r"tfnative: repro: minimized in 1 try, \d+ s \(1 kept\): 25,000,005 -> 6 elements$",
                    lines[0]), lines
    assert lines[1:] == ["tfnative: repro: repro.py (4 lines) dies of SIGFPE in op Reshape, as the original did"]
    assert 0 < peak * 1024 < INPUT_BYTES * 3 // 4, peak  # ~48 MB where the input is 100 MB
    assert "tensor = tf.constant([0.0], shape=[1, 1], dtype=tf.float32)" in repro.read_text()
    assert not (tmp_path / "repro.py.npz").exists()
