"""ElfIndex on real libraries: TensorFlow's two big ones and the stripped libc, checked against nm."""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Dict, Iterator, List, Tuple

import pytest

from tests.utils import ROOT, has_tensorflow
from tfnative.core.binary.cxxnames import demangle
from tfnative.core.binary.elf import ElfFile, read_build_id
from tfnative.core.binary.loadbase import load_base
from tfnative.core.binary.symindex import ElfIndex
from tfnative.files import cache_dir

requires_nm = pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm is not installed")
requires_tf_libs = pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed")
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def tf_lib(name: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None and spec.submodule_search_locations
    return os.path.join(list(spec.submodule_search_locations)[0], name)


@pytest.fixture()
def cache(monkeypatch) -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="tfnative-idx-")
    monkeypatch.setenv("TFNATIVE_CACHE_DIR", d)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def exec_ranges(path: str) -> List[Tuple[int, int]]:
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return [(s.addr, s.addr + s.size) for s in ElfFile(mm, path).sections if s.flags & 0x4]


def nm_functions(path: str, dynamic: bool) -> Dict[int, List[Tuple[str, int]]]:
    """addr -> [(name, size)] of the defined code symbols nm lists (T/t/W/w/i in an executable section)."""
    args = ["nm", "--defined-only", "-S"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    ranges = exec_ranges(path)
    by_addr: Dict[int, List[Tuple[str, int]]] = defaultdict(list)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "TtWwi":
            addr = int(parts[0], 16)
            if any(lo <= addr < hi for lo, hi in ranges):
                by_addr[addr].append((parts[3].split("@")[0], int(parts[1], 16)))
    return by_addr


def check_against_nm(idx: ElfIndex, by_addr: Dict[int, List[Tuple[str, int]]], sample: int) -> int:
    addrs = sorted(by_addr)
    step = max(1, len(addrs) // sample)
    checked = 0
    for a in addrs[::step]:
        syms = by_addr[a]
        sized = [(n, s) for n, s in syms if s]
        if not sized:
            continue
        got = idx.symbolize(a)
        assert got is not None, hex(a)
        name, off = got
        assert off == 0
        assert name in {n for n, _ in sized}, (hex(a), name, syms)
        size = max(s for _, s in sized)
        end = idx.symbolize(a + size - 1)
        assert end is not None and end[1] <= size - 1
        checked += 1
    return checked


@requires_nm
@requires_tf_libs
def test_framework_symtab_against_nm(cache):
    lib = tf_lib("libtensorflow_framework.so.2")
    idx = ElfIndex.open(lib)
    try:
        assert idx.table == ".symtab"
        assert len(idx) > 50_000
        assert check_against_nm(idx, nm_functions(lib, dynamic=False), 3000) > 1000
    finally:
        idx.close()


@requires_nm
@requires_tf_libs
def test_tensorflow_cc_against_nm(cache):
    lib = tf_lib("libtensorflow_cc.so.2")
    t0 = time.monotonic()
    idx = ElfIndex.open(lib)
    built = time.monotonic() - t0
    try:
        assert idx.table == ".symtab" and idx.build_id is None  # TF's wheels carry no build-id
        assert len(idx) > 500_000
        dyn = nm_functions(lib, dynamic=True)
        assert check_against_nm(idx, dyn, 3000) > 1000
        exported = {n: a for a, syms in dyn.items() for n, _ in syms}
        for name in ("TF_NewSession", "TF_SessionRun", "TF_FinishOperation", "TF_LoadLibrary", "TFE_NewContext",
                     "TFE_NewOp", "TFE_OpGetName", "TFE_Execute"):
            assert idx.find(name) == [(name, exported[name])]
            assert idx.symbolize(exported[name] + 1) == (name, 1)
    finally:
        idx.close()
    t0 = time.monotonic()
    again = ElfIndex.open(lib)
    loaded = time.monotonic() - t0
    again.close()
    assert again.from_cache
    print("\n[symindex] libtensorflow_cc.so.2: build %.2f s, cached load %.3f s" % (built, loaded))


@requires_nm
def test_libc_dynsym_fallback(cache):
    idx = ElfIndex.open(LIBC)
    try:
        expected = subprocess.run(["readelf", "-n", LIBC], capture_output=True, text=True).stdout
        if idx.table == ".dynsym":  # Debian's libc is stripped: no .symtab
            assert check_against_nm(idx, nm_functions(LIBC, dynamic=True), 1000) > 500
        assert idx.build_id is not None and ("Build ID: " + idx.build_id) in expected
        assert read_build_id(LIBC) == idx.build_id
        (name, vaddr), = idx.find("nanosleep")
        assert name == "nanosleep"
        libc = ctypes.CDLL(LIBC)
        real = ctypes.cast(libc.nanosleep, ctypes.c_void_p).value
        assert real == load_base(os.getpid(), LIBC) + vaddr
    finally:
        idx.close()


@requires_tf_libs
def test_find_cxx_names(cache):
    fw = ElfIndex.open(tf_lib("libtensorflow_framework.so.2"))
    cc = ElfIndex.open(tf_lib("libtensorflow_cc.so.2"))
    try:
        mangled = "_ZN10tensorflow16ThreadPoolDevice7ComputeEPNS_8OpKernelEPNS_15OpKernelContextE"
        for q in ("tensorflow::ThreadPoolDevice::Compute",
                  "tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)",
                  "tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel *,tensorflow::OpKernelContext *)",
                  "ThreadPoolDevice::Compute", mangled):
            got = fw.find(q)
            assert [n for n, _ in got] == [mangled], q
        assert fw.find("tensorflow::ThreadPoolDevice::Compute(int)") == []
        assert fw.find("tensorflow::NoSuchClass::Compute") == []
        inputs = demangle([n for n, _ in fw.find("tensorflow::OpKernelContext::input")])
        assert "tensorflow::OpKernelContext::input(int) const" in inputs and len(inputs) >= 2
        assert demangle([n for n, _ in fw.find("tensorflow::OpKernelContext::input(int)")]) == [
            "tensorflow::OpKernelContext::input(int) const"]
        # templates: with or without the arguments
        full = cc.find("tensorflow::BaseBatchMatMulOp<Eigen::ThreadPoolDevice, float, float, float>::Compute")
        assert len(full) == 1
        assert full[0] in cc.find("tensorflow::BaseBatchMatMulOp::Compute")
        assert len(cc.find("tensorflow::BaseBatchMatMulOp::Compute")) > 1
        # destructors and constructors, no thunks
        dtors = demangle([n for n, _ in cc.find("tensorflow::EagerContext::~EagerContext")])
        assert dtors and all(d == "tensorflow::EagerContext::~EagerContext()" for d in dtors)
        assert cc.find("TF_NoSuchFunction") == []
    finally:
        fw.close()
        cc.close()


def test_a_library_and_its_debug_file_keep_their_own_cache_entries(cache):
    """They share a build-id: one entry for both made every snapshot rebuild the two (issue #26)."""
    from tfnative.core.binary.debugfiles import separate_debug_files

    with ElfIndex.open(LIBC) as idx:
        debug = next(iter(separate_debug_files(LIBC, idx.build_id)), None) if idx.build_id else None
    if debug is None or not os.path.exists(debug):
        pytest.skip("no separate debug file for libc (libc6-dbg)")
    ElfIndex.open(debug).close()
    for path in (LIBC, debug):
        with ElfIndex.open(path) as again:
            assert again.from_cache, path
    assert len(os.listdir(os.path.join(cache, "index"))) == 2


def test_demangle_batch():
    names = ["_ZN10tensorflow12EagerContextD2Ev", "TF_NewSession", "_ZNK10tensorflow15OpKernelContext5inputEi"]
    assert demangle(names) == ["tensorflow::EagerContext::~EagerContext()", "TF_NewSession",
                               "tensorflow::OpKernelContext::input(int) const"]
    assert demangle([]) == []


def test_cache_reuse(cache):
    idx = ElfIndex.open(LIBC)
    assert not idx.from_cache
    first = idx.find("malloc")
    idx.close()
    entries = os.listdir(os.path.join(cache, "index"))
    assert len(entries) == 1 and entries[0].startswith("bid-")
    again = ElfIndex.open(LIBC)
    try:
        assert again.from_cache and again.find("malloc") == first and len(again) == len(idx)
    finally:
        again.close()
    assert cache_dir() == cache


def _patch_dynsym_value(path: str, name: str, delta: int) -> int:
    """Add ``delta`` to the st_value of ``name`` in .dynsym, in place; return the new value."""
    import mmap

    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        elf = ElfFile(mm, path)
        dynsym = elf.section(".dynsym")
        dynstr = elf.sections[dynsym.link]
        for off in range(dynsym.offset, dynsym.offset + dynsym.size, 24):
            st_name, _i, _o, _s, value, _size = struct.unpack_from("<IBBHQQ", mm, off)
            if elf.cstr(dynstr.offset + st_name) == name.encode():
                struct.pack_into("<Q", mm, off + 8, value + delta)
                mm.flush()
                return value + delta
    raise AssertionError(name)


def test_changed_file_is_reindexed(cache):
    tmp = tempfile.mkdtemp(prefix="tfnative-lib-")
    try:
        lib = os.path.join(tmp, "libc-copy.so.6")
        shutil.copyfile(LIBC, lib)
        idx = ElfIndex.open(lib)
        (_, before), = idx.find("nanosleep")
        idx.close()
        assert ElfIndex.open(lib).from_cache
        st = os.stat(lib)
        new = _patch_dynsym_value(lib, "nanosleep", 0x10)  # same size, same build-id, new mtime
        os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        changed = ElfIndex.open(lib)
        try:
            assert not changed.from_cache
            assert changed.find("nanosleep") == [("nanosleep", new)] and new == before + 0x10
        finally:
            changed.close()
        with open(lib, "ab") as f:  # a different size
            f.write(b"\0" * 4096)
        grown = ElfIndex.open(lib)
        assert not grown.from_cache
        grown.close()
        assert ElfIndex.open(lib).from_cache
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CONCURRENT = r"""
import os, sys, time
sys.path.insert(0, %(root)r)
from tfnative.core.binary.elf import ElfFile
from tfnative.core.binary.symindex import ElfIndex, _cache_path, _load_cache, _store_cache
lib = %(lib)r
idx = ElfIndex.open(lib, use_cache=False)
entry = _cache_path(lib, idx.build_id, ElfFile(idx._mm, lib))
st = os.stat(lib)
want = idx.find("TF_NewStatus")
reads = 0
deadline = time.monotonic() + 4
while time.monotonic() < deadline:
    _store_cache(entry, idx, st)          # a writer...
    got = _load_cache(entry, st, idx.build_id, idx._mm, lib)   # ...and a reader, racing the other process
    assert got is not None, "a reader saw a partial or corrupt cache entry"
    assert len(got) == len(idx) and got.find("TF_NewStatus") == want
    reads += 1
print("ok", reads)
"""


@requires_tf_libs
def test_concurrent_builders_do_not_corrupt_the_cache(cache):
    lib = tf_lib("libtensorflow_framework.so.2")
    code = CONCURRENT % {"root": ROOT, "lib": lib}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ)) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.startswith("ok") and int(out.split()[1]) > 3
    names = os.listdir(os.path.join(cache, "index"))
    assert len(names) == 1 and not names[0].startswith(".tmp-")  # no temp file left behind
    idx = ElfIndex.open(lib)
    try:
        assert idx.from_cache and idx.find("TF_NewStatus")
    finally:
        idx.close()
