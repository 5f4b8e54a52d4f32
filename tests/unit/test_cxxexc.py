"""The C++ exception reader (``core/cxxexc.py``) on libstdc++'s structures built in fake memory.

The layouts are the Itanium C++ ABI's on x86-64 as libstdc++ lays them out
(checked on a real TensorFlow crash by tests/integration/test_cxx_exception.py);
the TLS sequence is the bytes of Debian's libstdc++.so.6.0.30 ``__cxa_get_globals``.
"""

import struct

import pytest

from tfnative.analysis import pyop
from tfnative.core import cxxexc
from tfnative.core.cxxexc import GNU_CXX, GNU_CXX_DEPENDENT, HEADER, TlsRecipe
from tfnative.core.model import CrashSummary, Op, Thread
from tfnative.output import render, report

from .fakemem import FakeMemory

# Debian 12's libstdc++.so.6.0.30: __cxa_get_globals at 0xa80e0 (objdump -d)
DEBIAN_GET_GLOBALS = bytes.fromhex("f30f1efa4883ec08488d3d71ad1600e83c2cffff4883c408480500000000c390")


def test_the_local_dynamic_sequence_of_debians_libstdcxx():
    recipe = cxxexc.tls_recipe(DEBIAN_GET_GLOBALS, 0xA80E0)
    assert recipe == TlsRecipe("dynamic", 0xA80EF + 0x16AD71, 0)  # lea 0x16ad71(%rip),%rdi -> 0x212e60
    assert recipe.got == 0x212E60


def test_other_tls_models_and_what_is_refused():
    ie = b"\x48\x8b\x05" + struct.pack("<i", 0x100) + b"\x64\x48\x03\x04\x25\x00\x00\x00\x00\xc3"
    assert cxxexc.tls_recipe(ie, 0x1000) == TlsRecipe("initial-exec", 0x1007 + 0x100, 0)
    ie2 = (b"\xf3\x0f\x1e\xfa\x64\x48\x8b\x04\x25\x00\x00\x00\x00\x48\x03\x05" + struct.pack("<i", -8)
           + b"\x48\x8d\x40\x10\xc3")
    assert cxxexc.tls_recipe(ie2, 0x2000) == TlsRecipe("initial-exec", 0x2000 + 20 - 8, 0x10)
    le = b"\x64\x48\x8b\x04\x25\x00\x00\x00\x00\x48\x8d\x80" + struct.pack("<i", -0x40) + b"\xc3"
    assert cxxexc.tls_recipe(le, 0) == TlsRecipe("local-exec", 0, -0x40)
    gd = (b"\x66\x48\x8d\x3d" + struct.pack("<i", 0x10) + b"\x66\x66\x48\xe8" + struct.pack("<i", 0)
          + b"\xc3")
    assert cxxexc.tls_recipe(gd, 0x3000) == TlsRecipe("dynamic", 0x3008 + 0x10, 0)
    tlsdesc = b"\x48\x8d\x05" + struct.pack("<i", 0x10) + b"\xff\x10\x64\x48\x03\x04\x25\x00\x00\x00\x00\xc3"
    assert cxxexc.tls_recipe(tlsdesc, 0) is None
    assert cxxexc.tls_recipe(b"\xc3", 0) is None  # no TLS access at all
    assert cxxexc.tls_recipe(DEBIAN_GET_GLOBALS[:20], 0) is None  # cut before the ret


BIAS = 0x7F0000000000
GOT = 0x212E60
TP = 0x7F1000001000  # the thread pointer (fs_base)
DTV = 0x7F2000000010
BLOCK = 0x5600000100  # libstdc++'s TLS block of the thread
HEAP = 0x5600010000
RODATA = 0x7F0000300000


class Heap:
    """libstdc++'s objects in fake memory: type_infos, exceptions, COW strings, the thread's TLS."""

    def __init__(self):
        self.mem = FakeMemory()
        self.mem.map(BIAS + GOT, 16)
        self.mem.map(TP, 64)
        self.mem.map(DTV - 16, 16 * 8)
        self.mem.map(BLOCK, 64)
        self.mem.map(HEAP, 1 << 16)
        self.mem.map(RODATA, 1 << 12)
        self.next, self.rodata = HEAP, RODATA
        self.vtables = {"class": 0x1000, "si": 0x2000, "vmi": 0x3000}
        self.mem.write(BIAS + GOT, struct.pack("<QQ", 5, 0))  # tls_index {module 5, offset 0}
        self.mem.u64(TP + 8, DTV)
        self.mem.u64(DTV - 16, 6)  # dtv[-1]: room for 6 modules
        for m in range(1, 6):
            self.mem.u64(DTV + 16 * m, (1 << 64) - 1)
        self.mem.u64(DTV + 16 * 5, BLOCK)

    def alloc(self, size):
        at = self.next
        self.next += (size + 15) // 16 * 16
        return at

    def cstr(self, text):
        at = self.rodata
        self.rodata += len(text) + 8
        self.mem.write(at, text.encode() + b"\0")
        return at

    def type_info(self, name, base=None):
        ti = self.alloc(24)
        kind = "si" if base else "class"
        self.mem.write(ti, struct.pack("<QQ", BIAS + self.vtables[kind] + 16, self.cstr(name)))
        if base:
            self.mem.u64(ti + 16, base)
        return ti

    def cow(self, text, length=None):
        rep = self.alloc(24 + len(text) + 1)
        n = len(text) if length is None else length
        self.mem.write(rep, struct.pack("<QQi4x", n, len(text), 0) + text.encode() + b"\0")
        return rep + 24

    def exception(self, type_info, message=None, cls=GNU_CXX, length=None):
        """A primary exception: its header's address (the thrown object is at +112)."""
        header = self.alloc(HEADER + 16)
        self.mem.u64(header, type_info)
        self.mem.u64(header + 80, cls)
        if message is not None:
            self.mem.u64(header + HEADER + 8, self.cow(message, length))
        return header

    def dependent(self, primary_header):
        header = self.alloc(HEADER)
        self.mem.u64(header, primary_header + HEADER)
        self.mem.u64(header + 80, GNU_CXX_DEPENDENT)
        return header

    def caught(self, *headers, uncaught=0):
        for h, nxt in zip(headers, list(headers[1:]) + [0]):
            self.mem.u64(h + 32, nxt)
        self.mem.write(BLOCK, struct.pack("<QI", headers[0] if headers else 0, uncaught))

    def length_error(self):
        exc = self.type_info("St9exception")
        logic = self.type_info("St11logic_error", exc)
        return self.type_info("St12length_error", logic)

    def runtime(self):
        return cxxexc.CxxRuntime(TlsRecipe("dynamic", GOT, 0), self.vtables)


def test_the_globals_through_the_threads_dtv():
    h = Heap()
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 0), BIAS, TP) == BLOCK
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 8), BIAS, TP) == BLOCK + 8
    h.mem.u64(DTV + 16 * 5, (1 << 64) - 1)  # the thread never asked for libstdc++'s TLS: no exception
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 0), BIAS, TP) is None
    h.mem.u64(DTV + 16 * 5, BLOCK)
    h.mem.u64(DTV - 16, 4)  # a DTV from before libstdc++ was loaded
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 0), BIAS, TP) is None
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 0), BIAS, 0) is None
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("dynamic", GOT, 0), BIAS, 0x7F3000000000) is None
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("local-exec", 0, -0x40), BIAS, TP) == TP - 0x40
    h.mem.write(BIAS + GOT, struct.pack("<q", -0x80))
    assert cxxexc.eh_globals_address(h.mem.read, TlsRecipe("initial-exec", GOT, 0), BIAS, TP) == TP - 0x80


def test_a_rethrown_exception_being_handled_is_read_once_with_its_message():
    """pybind11's translators: std::rethrow_exception's dependent exception over the original, both caught."""
    h = Heap()
    primary = h.exception(h.length_error(), "vector::_M_default_append")
    h.caught(h.dependent(primary), primary)
    (exc,) = cxxexc.exceptions(h.mem.read, BLOCK, {k: BIAS + v for k, v in h.vtables.items()})
    assert (exc.mangled, exc.what, exc.state, exc.address) == (
        "St12length_error", "vector::_M_default_append", "caught", primary + HEADER)
    found = cxxexc.thread_exception(h.mem.read, h.runtime(), BIAS, TP)
    assert found.to_json() == {"type": "std::length_error", "what": "vector::_M_default_append", "state": "caught"}


def test_nothing_is_trusted_without_libstdcxx_s_exception_class():
    h = Heap()
    h.caught(h.exception(h.length_error(), "x", cls=int.from_bytes(b"CLNGC++\0", "big")))  # libc++abi's
    assert cxxexc.exceptions(h.mem.read, BLOCK) == []
    h.caught()
    assert cxxexc.exceptions(h.mem.read, BLOCK) == []
    assert cxxexc.thread_exception(h.mem.read, h.runtime(), BIAS, TP) is None


def test_a_message_is_read_only_where_the_layout_is_known_and_checks():
    h = Heap()
    vt = {k: BIAS + v for k, v in h.vtables.items()}
    bad_length = h.exception(h.length_error(), "abc", length=7)  # the COW header disagrees with the text
    h.caught(bad_length)
    assert cxxexc.exceptions(h.mem.read, BLOCK, vt)[0].what is None
    own = h.exception(h.type_info("N10tensorflow8MyErrorE"), "not a std::string")  # no known base
    h.caught(own)
    (exc,) = cxxexc.exceptions(h.mem.read, BLOCK, vt)
    assert (exc.mangled, exc.what) == ("N10tensorflow8MyErrorE", None)
    assert cxxexc.demangle_type("N10tensorflow8MyErrorE") in ("tensorflow::MyError", "N10tensorflow8MyErrorE")
    h.caught(h.exception(h.type_info("St9bad_alloc", h.type_info("St9exception"))))
    assert cxxexc.exceptions(h.mem.read, BLOCK, vt)[0].what == "std::bad_alloc"
    h.caught(h.exception(h.type_info("i")))  # throw 42;
    assert [(e.mangled, e.what) for e in cxxexc.exceptions(h.mem.read, BLOCK, vt)] == [("i", None)]


def test_a_chain_is_bounded_and_each_object_comes_once():
    h = Heap()
    first = h.exception(h.length_error(), "first")
    second = h.exception(h.type_info("St13runtime_error"), "second")
    h.caught(second, first)
    vt = {k: BIAS + v for k, v in h.vtables.items()}
    assert [e.what for e in cxxexc.exceptions(h.mem.read, BLOCK, vt)] == ["second", "first"]
    # without the type_info classes' vtables no base is followed: length_error's message is not read
    assert [e.what for e in cxxexc.exceptions(h.mem.read, BLOCK, {})] == ["second", None]
    h.mem.u64(first + 32, second)  # a cycle
    assert len(cxxexc.exceptions(h.mem.read, BLOCK, vt)) == 2


def test_an_exception_being_unwound_is_found_on_the_stack():
    h = Heap()
    primary = h.exception(h.type_info("St13runtime_error"), "mid-unwind")
    stack = h.alloc(256)
    h.mem.u64(stack + 64, primary + 80)  # _Unwind_RaiseException's argument: the unwindHeader
    h.caught(uncaught=1)
    (exc,) = cxxexc.exceptions(h.mem.read, BLOCK, h.vtables, (stack, stack + 256))
    assert (exc.state, exc.what) == ("uncaught", "mid-unwind")
    # a cleanup's landing pad keeps it in a callee-saved register
    (exc,) = cxxexc.exceptions(h.mem.read, BLOCK, h.vtables, None, [0, 7, primary + 80])
    assert (exc.state, exc.what) == ("uncaught", "mid-unwind")
    h.caught(uncaught=0)  # the globals count none: the stack is not searched
    assert cxxexc.exceptions(h.mem.read, BLOCK, h.vtables, (stack, stack + 256)) == []


def test_at_cxa_throw_the_arguments_give_the_exception():
    h = Heap()
    ti = h.length_error()
    header = h.exception(ti, "vector::_M_default_append", cls=0)  # __cxa_throw fills the header in later
    h.caught()
    found = cxxexc.thread_exception(h.mem.read, h.runtime(), BIAS, TP, throw_args=(header + HEADER, ti))
    assert found.to_json() == {"type": "std::length_error", "what": "vector::_M_default_append", "state": "thrown"}
    assert cxxexc.thread_exception(h.mem.read, h.runtime(), BIAS, TP, throw_args=(header + HEADER, 0)) is None


def test_the_thread_field_travels_and_is_shown():
    exc = {"type": "std::length_error", "what": "vector::_M_default_append", "state": "caught"}
    t = Thread(tid=7, name="python3", cxx_exception=exc)
    assert t.to_json()["cxx_exception"] == exc
    assert Thread.from_json(t.to_json()).cxx_exception == exc
    assert Thread.from_json(t.capture_json()).cxx_exception == exc
    assert "cxx_exception" not in Thread(tid=8).to_json()
    assert render.thread_block(t)[1] == (
        '  C++ exception in flight: std::length_error: "vector::_M_default_append" (being handled)')
    t = CrashSummary(signal="SIGSEGV", cxx_exception=exc, op=Op(type="AudioSpectrogram",
                                                                    from_="gen_audio_ops.audio_spectrogram"))
    parts = report.summary_phrases(t)
    assert 'C++ exception std::length_error: "vector::_M_default_append" (being handled)' in parts
    assert "op AudioSpectrogram (from gen_audio_ops.audio_spectrogram)" in parts
    assert parts[-1] == ("to stop where it was thrown (in the kernel it escaped from): rerun with "
                         "--break-throw std::length_error")
    t.breakpoints = {"__cxa_throw": 1}  # seen already
    assert not any("rerun" in p for p in report.summary_phrases(t))
    t.breakpoints = {"throw std::length_error": 1}
    assert not any("rerun" in p for p in report.summary_phrases(t))
    t.breakpoints, exc["type"] = {}, "std::vector<int>::oops"  # no plain class name: any type
    assert report.summary_phrases(t)[-1].startswith("to stop where it was thrown (in the kernel it escaped from): "
                                                    "rerun with --break-throw=any (--max-hits N")


GEN_OPS = '''
def audio_spectrogram(input, window_size, stride, magnitude_squared=False, name=None):
  _result = pywrap_tfe.TFE_Py_FastPathExecute(
    _ctx, "AudioSpectrogram", name, input, "window_size", window_size)

AudioSpectrogram = tf_export("raw_ops.AudioSpectrogram")(_ops.to_raw_op(audio_spectrogram))


def lrn_grad(input_grads, name=None):
  _result = pywrap_tfe.TFE_Py_FastPathExecute(_ctx, "LRNGrad", name, input_grads, "depth_radius")


def audio_spectrogram_eager_fallback(input, window_size, stride, magnitude_squared, name, ctx):
  _result = _execute.execute(b"AudioSpectrogram", 1, inputs=_inputs_flat, attrs=_attrs, ctx=ctx, name=name)
'''


@pytest.fixture()
def gen_ops(tmp_path):
    d = tmp_path / "site-packages" / "tensorflow" / "python" / "ops"
    d.mkdir(parents=True)
    (d / "gen_audio_ops.py").write_text(GEN_OPS)
    return str(d / "gen_audio_ops.py")


def test_the_op_of_a_generated_wrapper_comes_from_its_source(gen_ops):
    from tfnative.core.model import NativeFrame, PythonFrame
    frames = [NativeFrame("PyErr_Occurred"), PythonFrame("audio_spectrogram", gen_ops, 3),
              PythonFrame("<module>", "/home/u/train.py", 14)]
    assert pyop.python_op(frames) == Op(type="AudioSpectrogram", from_="gen_audio_ops.audio_spectrogram")
    assert pyop.python_op([PythonFrame("lrn_grad", gen_ops, 9)]).type == "LRNGrad"  # not "LrnGrad"
    assert pyop.python_op([PythonFrame("audio_spectrogram_eager_fallback", gen_ops, 14)]).type == \
        "AudioSpectrogram"
    assert pyop.python_op([PythonFrame("decode_wav", gen_ops, 1)]) is None  # not in the file: no guess
    assert pyop.python_op([PythonFrame("audio_spectrogram", "/home/u/gen_audio_ops.py", 3)]) is None
    quick = PythonFrame("quick_execute", "/x/tensorflow/python/eager/execute.py", 53,
                        locals={"op_name": "LSTMBlockCell"})
    assert pyop.python_op([quick]).type == "LSTMBlockCell"
    quick.locals = {"op_name": "__inference_step_24"}
    assert pyop.python_op([quick]) is None


def test_threads_with_other_exceptions_in_flight_are_not_grouped():
    from tfnative.output.threadgroups import group_threads
    exc = {"type": "std::length_error", "what": "x", "state": "caught"}
    threads = [Thread(tid=1, name="w", cxx_exception=exc), Thread(tid=2, name="w"),
               Thread(tid=3, name="w", cxx_exception=dict(exc))]
    assert [[t.tid for t in g] for g in group_threads((t, "") for t in threads)] == [[1, 3], [2]]


def test_terminate_is_abort_called_from_libstdcxx():
    libc, cxx = "libc.so.6", "libstdc++.so.6"
    assert cxxexc.terminating([("raise", libc), ("abort", libc), ("??", cxx), ("std::terminate()", cxx)])
    assert not cxxexc.terminating([("raise", libc), ("abort", libc), ("tsl::internal::LogMessageFatal", "libtf")])
    assert not cxxexc.terminating([("PyErr_Occurred", "libpython3.11.so.1.0"), ("raise_err", "x.so")])
