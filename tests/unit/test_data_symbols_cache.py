"""``datasyms.data_symbols`` keeps its answer per file as it is now: the same answer from the cache, a new one
when the file changes, and a damaged entry read as no entry."""

import os
import shutil
import sys

from tfnative.core.binary import datasyms


def _interpreter_file() -> str:
    """The ELF file that defines ``_PyRuntime`` in this process: libpython where Python is shared, else the
    executable."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "libpython" in os.path.basename(path):
                return path
    return os.path.realpath(sys.executable)


def test_the_answer_is_kept_per_file_and_follows_a_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TFNATIVE_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libpy.so"
    shutil.copy(_interpreter_file(), lib)
    first = datasyms.data_symbols(str(lib), ["_PyRuntime", "no_such_symbol"])
    assert set(first) == {"_PyRuntime"} and first["_PyRuntime"] > 0
    entries = list((tmp_path / "cache" / "index").glob("syms-*.json"))
    assert len(entries) == 1
    entries[0].write_text('{"_PyRuntime": 4096}')  # what the cache says is what comes back
    assert datasyms.data_symbols(str(lib), ["_PyRuntime", "no_such_symbol"]) == {"_PyRuntime": 4096}
    assert datasyms.data_symbols(str(lib), ["_PyRuntime"]) == first  # other names: another entry
    with open(lib, "ab") as f:
        f.write(b"\0")  # the file changed: the answer is read from it again
    assert datasyms.data_symbols(str(lib), ["_PyRuntime", "no_such_symbol"]) == first


def test_a_damaged_entry_is_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("TFNATIVE_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libpy.so"
    shutil.copy(_interpreter_file(), lib)
    first = datasyms.data_symbols(str(lib), ["_PyRuntime"])
    (entry,) = (tmp_path / "cache" / "index").glob("syms-*.json")
    entry.write_text('{"_PyRuntime": "0x10"')
    assert datasyms.data_symbols(str(lib), ["_PyRuntime"]) == first
