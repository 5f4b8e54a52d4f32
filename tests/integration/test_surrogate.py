"""Surrogate symbol files, proven with real gdb on a real TensorFlow process.

One hung TensorFlow process (a tf.function blocked in a tf.py_function that
sleeps: the main thread waits inside TFE_Execute) is attached twice:

* "full": plain ``gdb -p`` (reads the 1.2 M minimal symbols of libtensorflow_cc);
* "fast": ``-iex 'set auto-solib-add off'``, ``sharedlibrary`` for every library
  except libtensorflow_cc.so.2, then ``add-symbol-file SURROGATE -o LOAD_BASE``
  (the surrogate: the library's CFI and no symbols, as tfnative gives gdb).

The backtraces must have the same frame addresses in the same order, and the
frames in libtensorflow_cc named by ElfIndex must equal gdb's names in the
full run.  Attach time and gdb's peak RSS of both ways are printed (run with
-s), not asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator

import pytest

from tests.utils import ROOT, requires_gdb, requires_tf
from tfnative.core.binary.cxxnames import demangle
from tfnative.core.binary.elf import ElfFile
from tfnative.core.binary.loadbase import load_base, mapped_libraries
from tfnative.core.binary.symindex import ElfIndex
from tfnative.gdb.surrogate import build_surrogate, gdb_regex_escape, surrogate_path

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf, pytest.mark.slow]

TARGET = r"""
import sys, time
import tensorflow as tf

def slow(x):
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(3600)
    return x

@tf.function(autograph=False)
def f(x):
    return tf.py_function(slow, [x], tf.float32)

f(tf.constant(1.0))
"""

# Runs inside gdb: every thread's frames as (pc, name, library), the breakpoints'
# resolved addresses, and gdb's own peak RSS.
DUMP = r"""
import gdb, json
out = {"threads": {}, "bps": []}
for th in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    th.switch()
    frames = []
    f = gdb.newest_frame()
    while f is not None and len(frames) < 256:
        pc = f.pc()
        frames.append([pc, f.name(), gdb.solib_name(pc)])
        try:
            f = f.older()
        except gdb.error as exc:
            frames.append([0, "<error: %s>" % exc, None])
            break
    out["threads"][str(th.ptid[1])] = frames
for b in gdb.breakpoints():
    out["bps"].append([b.location, b.pending, [loc.address for loc in b.locations]])
out["solibs"] = gdb.execute("info sharedlibrary", to_string=True)
with open("/proc/self/status") as st:
    out["hwm_kb"] = [int(ln.split()[1]) for ln in st if ln.startswith("VmHWM")][0]
print("@@JSON" + json.dumps(out))
"""

# Runs inside gdb with auto-solib-add off: full symbols for every library but the huge one.
SOLIBS = r"""
import gdb, re, sys
sys.path.insert(0, %(root)r)
from tfnative.gdb.surrogate import gdb_regex_escape
text = gdb.execute("info sharedlibrary", to_string=True)
names = re.findall(r"^(?:0x\S+\s+0x\S+\s+)?(?:Yes \(\*\)|Yes|No)\s+(/.*)$", text, re.M)
skipped = [n for n in names if "libtensorflow_cc.so" in n]
for n in names:
    if n not in skipped:
        gdb.execute("sharedlibrary ^%%s$" %% gdb_regex_escape(n), to_string=True)
print("@@SOLIBS" + repr((len(names), skipped)))
"""

GDB_EARLY = ["-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex", "set breakpoint pending on",
             "-iex", "set pagination off"]


def tf_lib(name: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None and spec.submodule_search_locations
    return os.path.join(list(spec.submodule_search_locations)[0], name)


def _run_gdb(args, timeout: float = 600) -> Dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(["gdb", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = time.monotonic() - t0
    doc = None
    for line in out.splitlines():
        if line.startswith("@@JSON"):
            doc = json.loads(line[6:])
    assert doc is not None, "gdb printed no result:\n" + out[-3000:]
    doc["wall_s"] = wall
    doc["log"] = out
    return doc


@pytest.fixture(scope="module")
def runs() -> Iterator[Dict]:
    """The hung process, a fresh symbol cache, and the results of both gdb attaches."""
    tmp = tempfile.mkdtemp(prefix="tfnative-surrogate-")
    old_env = os.environ.get("TFNATIVE_CACHE_DIR")
    os.environ["TFNATIVE_CACHE_DIR"] = os.path.join(tmp, "cache")
    proc = subprocess.Popen([sys.executable, "-c", TARGET], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, cwd=tmp)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", "target did not start (%r, rc=%s)" % (line, proc.poll())
        time.sleep(1.0)  # let the main thread settle in TFE_Execute's wait
        lib = tf_lib("libtensorflow_cc.so.2")
        dump = os.path.join(tmp, "dump.py")
        solibs = os.path.join(tmp, "solibs.py")
        with open(dump, "w") as f:
            f.write(DUMP)
        with open(solibs, "w") as f:
            f.write(SOLIBS % {"root": ROOT})

        t0 = time.monotonic()
        index = ElfIndex.open(lib)
        t_index = time.monotonic() - t0
        t1 = time.monotonic()
        surrogate = build_surrogate(lib)
        t_surrogate = time.monotonic() - t1
        base = load_base(proc.pid, lib)

        fast = _run_gdb(GDB_EARLY + ["-iex", "set auto-solib-add off", "-p", str(proc.pid), "-x", solibs,
                                     "-ex", "add-symbol-file %s -o 0x%x" % (surrogate, base), "-x", dump])
        full = _run_gdb(GDB_EARLY + ["-p", str(proc.pid), "-x", dump])
        print("\n[surrogate] index build %.2f s, surrogate build %.2f s (%d bytes)"
              % (t_index, t_surrogate, os.path.getsize(surrogate)))
        print("[surrogate] full gdb attach+bt: %.1f s, peak RSS %.0f MB" % (full["wall_s"], full["hwm_kb"] / 1024))
        print("[surrogate] fast gdb attach+bt: %.1f s, peak RSS %.0f MB" % (fast["wall_s"], fast["hwm_kb"] / 1024))
        yield {"pid": proc.pid, "lib": lib, "index": index, "base": base, "surrogate": surrogate,
               "full": full, "fast": fast}
        index.close()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if old_env is None:
            os.environ.pop("TFNATIVE_CACHE_DIR", None)
        else:
            os.environ["TFNATIVE_CACHE_DIR"] = old_env


def _is_cc(frame) -> bool:
    return bool(frame[2]) and os.path.basename(frame[2]) == "libtensorflow_cc.so.2"


def test_fast_run_did_not_read_libtensorflow_cc(runs):
    solibs_line = [ln for ln in runs["fast"]["log"].splitlines() if ln.startswith("@@SOLIBS")][0]
    count, skipped = eval(solibs_line[len("@@SOLIBS"):])  # noqa: S307 - our own repr
    assert count > 20 and len(skipped) == 1
    rows = {ln.split()[-1]: ln for ln in runs["fast"]["solibs"].splitlines() if ln.strip().startswith("0x")}
    cc = [ln for name, ln in rows.items() if name.endswith("libtensorflow_cc.so.2")]
    assert len(cc) == 1 and " No " in cc[0]
    assert all(" Yes" in ln for name, ln in rows.items() if not name.endswith("libtensorflow_cc.so.2"))
    cc_full = [ln for ln in runs["full"]["solibs"].splitlines() if ln.endswith("libtensorflow_cc.so.2")]
    assert len(cc_full) == 1 and " Yes" in cc_full[0]


def test_same_frames_in_same_order(runs):
    full, fast = runs["full"]["threads"], runs["fast"]["threads"]
    assert sorted(full) == sorted(fast)
    with_cc = [tid for tid, frames in full.items() if any(_is_cc(f) for f in frames)]
    main = str(runs["pid"])
    assert main in with_cc, "the main thread should be waiting inside libtensorflow_cc (TFE_Execute)"
    assert sum(_is_cc(f) for f in full[main]) >= 5
    for tid in with_cc:
        assert [f[0] for f in fast[tid]] == [f[0] for f in full[tid]], "thread %s unwinds differently" % tid
        assert not any(str(f[1]).startswith("<error") for f in fast[tid])
    # the other threads too (they sleep in futex waits; they must not have moved)
    for tid in full:
        assert [f[0] for f in fast[tid]] == [f[0] for f in full[tid]], "thread %s" % tid
    # outside libtensorflow_cc gdb names frames the same way in both runs
    for tid in full:
        for a, b in zip(full[tid], fast[tid]):
            if not _is_cc(a):
                assert a[1] == b[1]


def test_index_names_equal_gdb_full_names(runs):
    full = runs["full"]["threads"]
    index, base = runs["index"], runs["base"]
    cc = [f for frames in full.values() for f in frames if _is_cc(f)]
    assert cc
    ours = [index.symbolize(f[0] - base) for f in cc]
    assert all(o is not None for o in ours)
    names = demangle([o[0] for o in ours])
    assert names == [f[1] for f in cc]
    assert "TFE_Execute" in names


def test_fast_run_leaves_every_libtensorflow_cc_frame_to_the_index(runs):
    fast = runs["fast"]["threads"][str(runs["pid"])]
    assert any(_is_cc(f) for f in fast)
    assert all(f[1] is None for f in fast if _is_cc(f))  # the surrogate has no symbols: ElfIndex names them


def test_surrogate_layout_and_cache(runs):
    lib, surrogate = runs["lib"], runs["surrogate"]
    import mmap

    with open(lib, "rb") as f1, mmap.mmap(f1.fileno(), 0, access=mmap.ACCESS_READ) as m1, \
            open(surrogate, "rb") as f2, mmap.mmap(f2.fileno(), 0, access=mmap.ACCESS_READ) as m2:
        orig, sur = ElfFile(m1, lib), ElfFile(m2, surrogate)
        for name in (".eh_frame", ".eh_frame_hdr", ".text"):
            a, b = orig.section(name), sur.section(name)
            assert a is not None and b is not None
            assert (a.addr, a.size) == (b.addr, b.size)
        for name in (".eh_frame", ".eh_frame_hdr"):
            a, b = orig.section(name), sur.section(name)
            assert m1[a.offset:a.offset + a.size] == m2[b.offset:b.offset + b.size]
        assert sur.section(".text").type == 8  # SHT_NOBITS
        assert os.path.getsize(surrogate) < 64 * 1024 * 1024
        orig_build_id = orig.build_id()
        assert sur.section(".symtab").size == 24  # the null symbol only
    # the same library: the cached file
    assert build_surrogate(lib) == surrogate == surrogate_path(lib, orig_build_id)
    assert runs["base"] == load_base(runs["pid"], lib)
    assert os.path.realpath(lib) in mapped_libraries(runs["pid"])


def test_gdb_regex_escape():
    assert gdb_regex_escape("/a/lib+x.so.2") == "/a/lib+x\\.so\\.2"
    assert gdb_regex_escape("/p/../[x]*$^") == "/p/\\.\\./\\[x\\]\\*\\$\\^"
