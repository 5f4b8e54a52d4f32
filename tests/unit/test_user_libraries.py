"""Which native frames are the user's own (``frameclass.library_class``), what a library file says about
itself (``libfacts``), and how the text marks the user's kernel: the rule on paths, on real files."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from tfnative.core import frameclass
from tfnative.core.binary import libfacts
from tfnative.core.model import EventNativeFrame, Op
from tfnative.output.render import frame_line, is_marked

SITE = "/home/me/.venv/lib/python3.11/site-packages"


def _never() -> bool:
    raise AssertionError("the file was read where the path decides")


def _yes() -> bool:
    return True


def _no() -> bool:
    return False


@pytest.mark.parametrize("path, links, expected", [
    # the user's tree: yours, whatever it links (tf.load_op_library's library, a ctypes.CDLL)
    ("/home/me/ops/zero_out.so", _never, "user"),
    ("/tmp/build/libmykernels.so", _never, "user"),
    ("/home/me/tensorflow/bazel-bin/tensorflow/core/user_ops/zero_out.so", _never, "user"),
    # TensorFlow's, by name or under its wheel
    (SITE + "/tensorflow/libtensorflow_framework.so.2", _never, "tensorflow-native"),
    (SITE + "/tensorflow/core/kernels/libtfkernel_sobol_op.so", _never, "tensorflow-native"),
    ("/home/me/tf/bazel-bin/tensorflow/libtensorflow_cc.so.2", _never, "tensorflow-native"),
    # installed packages: a custom-op package is yours when it links TensorFlow; numpy's is not
    (SITE + "/tensorflow_zero_out/python/ops/_zero_out_ops.so", _yes, "user"),
    (SITE + "/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", _no, None),
    (SITE + "/tensorflow-plugins/libitex_cpu.so", _never, None),  # TensorFlow loads it, not the program
    # the system's and the interpreter's
    ("/lib/x86_64-linux-gnu/libc.so.6", _no, None),
    ("/usr/local/lib/libtf_ops.so", _yes, "user"),
    ("/root/.pyenv/versions/3.11.9/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so", _never, None),
    ("/root/.pyenv/versions/3.11.9/bin/python3.11", _never, None),
    ("/opt/conda/lib/libstdc++.so.6", _no, None),
    # no path to judge: the name decides (frame_class)
    (None, _never, None), ("linux-vdso.so.1", _never, None), ("/memfd:jit (deleted)", _never, None),
])
def test_library_class_rule(path, links, expected):
    assert frameclass.library_class(path, links, ["/opt/conda/"]) == expected


def test_interpreter_prefixes():
    paths = ["/root/.pyenv/versions/3.11.9/bin/python3.11", "/opt/conda/lib/libpython3.12.so.1.0",
             "/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so", "/lib/x86_64-linux-gnu/libc.so.6",
             "/python3.11", "/srv/py/3.12.1/lib/python3.12/lib-dynload/_ssl.cpython-312-x86_64-linux-gnu.so"]
    # /usr is no prefix of its own (it is the system's); nor is "/"
    assert frameclass.interpreter_prefixes(paths) == ["/root/.pyenv/versions/3.11.9/", "/opt/conda/", "/srv/py/3.12.1/"]


def test_a_frame_classed_user_stays_so_and_is_marked():
    kernel = EventNativeFrame(function="ZeroOutOp::Compute", library="zero_out.so", address="0x1",
                         op=Op(type="ZeroOut", name="ZeroOut"), frame_class="user")
    helper = EventNativeFrame(function="helper", library="zero_out.so", address="0x2", frame_class="user")
    stock = EventNativeFrame(function="MatMulOp::Compute", library="libtensorflow_cc.so.2", address="0x3",
                        op=Op(type="MatMul", name="m"))
    assert frameclass.frame_class(kernel) == "user"
    assert frame_line(0, kernel, bare=True).endswith("  <-- your kernel, op ZeroOut")
    assert frame_line(1, helper, bare=True).endswith("  <-- your code")
    assert frame_line(2, stock, bare=True).endswith('  <-- op MatMul "m"')
    assert is_marked(kernel) and is_marked(helper)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_libfacts_on_real_files(tmp_path):
    src = tmp_path / "kern.c"
    src.write_text("int kernel(int x) { return x * 2; }\n")
    fake_tf = tmp_path / "libtensorflow_framework.so.2"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtensorflow_framework.so.2", "-o", str(fake_tf),
                    str(src)], check=True)
    op = tmp_path / "op.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-g0", "-o", str(op), str(src), "-Wl,--no-as-needed",
                    str(fake_tf)], check=True)
    plain = tmp_path / "plain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-Wl,-rpath,$ORIGIN/../_solib_k8/x", "-o", str(plain), str(src)],
                   check=True)
    facts = libfacts.facts(str(op))
    assert facts.links_tensorflow and libfacts.links_tensorflow(str(op))
    assert not facts.lines and facts.symtab and facts.build_id and facts.sources == ["kern.c"]
    assert facts.compiler == "g++" and not facts.bazel
    # a C source: the C driver; an op library built from C++: TensorFlow's flags
    assert libfacts.rebuild_advice(facts) == "gcc -shared -fPIC -g -O1 kern.c -o op.so"
    cxx = dataclasses.replace(facts, sources=["kern.cc"])
    assert libfacts.rebuild_advice(cxx).startswith("g++ -std=c++17 -shared -fPIC -g -O1 kern.cc $(python -c ")
    plain_cxx = dataclasses.replace(cxx, links_tensorflow=False)  # a ctypes library of C++: no TensorFlow flags
    assert libfacts.rebuild_advice(plain_cxx) == "g++ -std=c++17 -shared -fPIC -g -O1 kern.cc -o op.so"
    other = libfacts.facts(str(plain))
    assert not other.links_tensorflow and other.lines and other.bazel  # Bazel's _solib_ runpath
    assert libfacts.rebuild_advice(other) == ("tfnative bazelrc tfn_targeted --files 'kern' >> .bazelrc, then "
                                              "bazel build --config=tfn_targeted <its target>")
    missing = libfacts.facts(str(tmp_path / "gone.so"))
    assert not missing.readable and not libfacts.links_tensorflow(str(tmp_path / "gone.so"))
    (tmp_path / "empty.so").write_bytes(b"")
    assert not libfacts.facts(str(tmp_path / "empty.so")).readable


@pytest.mark.parametrize("function, file, expected", [
    # the standard library's templates, instantiated or inlined into the user's library (tests/custom_op's
    # segment_throw.so at -g and -g0)
    ("std::vector<float, std::allocator<float> >::_M_range_check", "/usr/include/c++/12/bits/stl_vector.h", True),
    ("std::vector<float, std::allocator<float> >::_M_range_check(unsigned long) const", None, True),
    ("std::__throw_out_of_range_fmt(char const*, ...)", None, True),
    ("__gnu_cxx::__normal_iterator<int*, std::vector<int> >::operator++()", None, True),
    ("ZeroOutOp::Compute(tensorflow::OpKernelContext*)", "/src/zero_out.cc", False),
    # a template function whose return type is the standard library's is not the standard library's
    ("std::vector<int, std::allocator<int> > mylib::split<int>(int)", "/src/split.cc", False),
    ("std::enable_if<true, void>::type mylib::run<float>(float)", None, False),
    ("mylib::Holder<std::string>::get() const", None, False),
    # a user function inlined from a header of the standard library's directory is told by that file
    ("inlined_helper", "/opt/gcc-13/include/c++/13/bits/stl_algo.h", True),
])
def test_standard_library_code_is_nobodys_own(function, file, expected):
    f = EventNativeFrame(function=function, file=file, library="segment_throw.so")
    assert frameclass.is_standard_library(f) is expected
    assert frameclass.native_class(f, "user") == ("system" if expected else "user")
    f.frame_class = frameclass.native_class(f, "user")
    assert (frame_line(0, f, bare=True).endswith("<-- your code")) is not expected
