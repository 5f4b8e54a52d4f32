"""The corpus of real TensorFlow 2.21 crashes (``tests/corpus``, issue #23): what a user checks in each report.

Every script reproduces a crash from a public tensorflow/tensorflow issue (the script's docstring cites it;
``tests/corpus/README.md`` has the table).  Each one runs three times in this module, once per way:

- bare, with ``RLIMIT_CORE`` raised in a temporary directory: the signal it dies of without tfnative,
  TensorFlow's own fatal line on its stderr, and the core (``core_pattern`` is ``core`` here);
- ``tfnative attach SCRIPT --json FILE``;
- ``tfnative core CORE PYTHON --json FILE`` on that core (the core is removed once read).

For ``attach`` and ``core`` alike the report must give the signal (and, for attach, the exit status the
target had without tfnative, nothing left running), the crashing kernel's op type (``triage.op.type``), the
user's line (``triage.nearest_user_frame`` at the script's ``# crash line``), TensorFlow's ``Check failed``
line for every such abort (``triage.log`` and the event's ``log``), and where the op ran: an eager op is
not "in tf.function", a tf.function's kernel names its function.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
from typing import NamedTuple, Optional, Tuple

import psutil
import pytest

from tfnative.output.opinputs import input_label

from ..utils import ROOT, line_of, load_json, requires_gdb, requires_tf, run_tfnative

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]

CORPUS = os.path.join(ROOT, "tests", "corpus")
PYTHON = os.path.realpath(sys.executable)
CRASH_LINE = "# crash line"


class Case(NamedTuple):
    signal: str
    ops: Tuple[str, ...]  # the op type(s) that name the crash rightly
    where: str  # "eager" | "tf.function" | "tf.data"
    check_failed: Optional[str] = None  # the text of TensorFlow's fatal line, for a Check-failed abort
    function: Optional[str] = None  # the tf.function's Python name


CASES = {
    "lrn_grad_eager": Case("SIGABRT", ("LRNGrad",), "eager", "Check failed: d < dims() (1 vs. 1)"),
    "reshape_fpe_eager": Case("SIGFPE", ("Reshape",), "eager"),
    "audio_spectrogram_eager": Case("SIGSEGV", ("AudioSpectrogram",), "eager"),
    "block_lstm_grad_eager": Case("SIGABRT", ("BlockLSTMGrad",), "eager", "Check failed: limit <= dim0_size (5 vs. 1)"),
    "fused_pad_conv2d_eager": Case("SIGABRT", ("FusedPadConv2D",), "eager", "Check failed: d < dims() (2 vs. 2)"),
    "conv2d_function": Case("SIGABRT", ("Conv2D",), "tf.function",
                            "Check failed: index >= 0 && index < num_total_dims", function="conv"),
    "tensor_scatter_max_function": Case("SIGABRT", ("TensorScatterMax",), "tf.function",
                                        "Check failed: d < dims() (1 vs. 1)", function="scatter_max"),
    # ops buried in user code (issue #45): a Keras layer's call, run eagerly; a tf.function that computes its inputs
    "lrn_grad_keras_layer": Case("SIGABRT", ("LRNGrad",), "eager", "Check failed: d < dims() (1 vs. 1)"),
    "fused_pad_conv2d_function": Case("SIGABRT", ("FusedPadConv2D",), "tf.function",
                                      "Check failed: d < dims() (2 vs. 2)", function="padded_conv"),
    # The C++ exception is thrown while MakeIterator's kernel builds the InterleaveDataset's iterator:
    # either op names the crash.
    "interleave_data": Case("SIGSEGV", ("MakeIterator", "InterleaveDataset"), "tf.data"),
    "block_lstm_grad_data_map": Case("SIGABRT", ("BlockLSTMGrad",), "tf.data",
                                     "Check failed: limit <= dim0_size (5 vs. 1)"),
    "reshape_fpe_data_map": Case("SIGFPE", ("Reshape",), "tf.data"),
    # inputs far larger than the crash needs (--repro-minimize's, tests/integration/test_repro_minimize.py)
    "lstm_block_cell_grad_eager": Case("SIGABRT", ("LSTMBlockCellGrad",), "eager",
                                       "Check failed: d < dims() (1 vs. 1)"),
    "block_lstm_grad_large_eager": Case("SIGABRT", ("BlockLSTMGrad",), "eager",
                                        "Check failed: limit <= dim0_size (20 vs. 10)"),
    # a shape function's crash (no kernel runs): GatherV2's, while the tf.function is traced
    "gather_batch_dims_function": Case("SIGABRT", ("GatherV2",), "tracing",
                                       "Check failed: rank >= 0 (-3 vs. 0) rank must not be negative"),
}
NAMES = sorted(CASES)
RUNS = [(name, mode) for name in NAMES for mode in ("attach", "core")]
IDS = ["%s-%s" % run for run in RUNS]


def corpus_script(name: str) -> str:
    return os.path.join(CORPUS, name + ".py")


def _raise_core_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _running(path: str) -> list:
    """Live processes (not zombies) whose command line names ``path``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if path in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append("%d %s" % (p.pid, p.info["status"]))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def _fatal_line(stderr: str) -> Optional[str]:
    """TensorFlow's ``F... file.cc:N] Check failed: ...`` line, from ``file.cc:N]`` on (as tfnative gives it)."""
    m = re.search(r"^F\S* +[\d:.]+ +\d+ (\S+:\d+\] Check failed: .*?)\s*$", stderr, re.M)
    return m.group(1) if m else None


def _repro_line(text: str) -> str:
    return next((line for line in text.splitlines() if "tfnative: repro:" in line), "(no repro line)")


def _triage_line(text: str) -> str:
    return next((line for line in text.splitlines() if "triage:" in line), "(no triage line)")


class Bare(NamedTuple):
    returncode: int
    stderr: str
    core_doc: dict
    core_text: str
    plain_text: str  # tfnative core without --repro


class Attached(NamedTuple):
    returncode: int
    stderr: str
    doc: dict
    left: list


class Runs:
    """Each script's runs, each made once, on first use (module scope): ``bare(name)``, ``attached(name)``."""

    def __init__(self, tmp_path_factory):
        self.tmp = tmp_path_factory
        self.cache: dict = {}

    def __repr__(self) -> str:
        return "<runs: %s>" % ", ".join(" ".join(key) for key in sorted(self.cache))

    def bare(self, name: str) -> Bare:
        """The script without tfnative, in a temporary directory with RLIMIT_CORE raised, then its core read."""
        key = ("bare", name)
        if key not in self.cache:
            tmp = self.tmp.mktemp("core-" + name)
            self.cache[("dir", name)] = str(tmp)
            proc = subprocess.run([sys.executable, corpus_script(name)], cwd=str(tmp), preexec_fn=_raise_core_limit,
                                  capture_output=True, text=True, timeout=300)
            core = os.path.join(str(tmp), "core")
            doc, text = {}, "(no core in %s: core_pattern?)" % tmp
            plain = text
            if os.path.exists(core):
                res = run_tfnative(["core", core, PYTHON], timeout=300)
                plain = res.stdout + res.stderr
                out = tmp / "core.json"
                res = run_tfnative(["core", core, PYTHON, "--json", str(out), "--repro", str(tmp / "repro.py")],
                                   timeout=300)
                text = res.stdout + res.stderr
                assert res.returncode == 0, text[-3000:]
                doc = load_json(out)
                os.unlink(core)  # ~300 MB each
            self.cache[key] = Bare(proc.returncode, proc.stderr, doc, text, plain)
        return self.cache[key]

    def bare_dir(self, name: str) -> str:
        """Where ``bare(name)`` ran, and its core was."""
        self.bare(name)
        return str(self.cache[("dir", name)])

    def attached(self, name: str) -> Attached:
        """``tfnative attach --json FILE SCRIPT``; then whatever still runs the script (nothing, we hope)."""
        key = ("attach", name)
        if key not in self.cache:
            out = self.tmp.mktemp("attach-" + name) / "s.json"
            path = corpus_script(name)
            r = run_tfnative(["attach", "--json", str(out), "--repro", str(out.parent / "repro.py"), path],
                             timeout=600)
            left = _running(path)
            for entry in left:  # leave nothing behind for the next tests
                try:
                    os.kill(int(entry.split()[0]), signal.SIGKILL)
                except OSError:
                    pass
            doc = load_json(out) if os.path.exists(out) and os.path.getsize(out) else {}
            self.cache[key] = Attached(r.returncode, r.stderr, doc, left)
        return self.cache[key]

    def alone(self, name: str, mode: str) -> Tuple[str, subprocess.CompletedProcess]:
        """(the text of the reproducer ``mode`` wrote, its run alone: plain python, a fresh directory)."""
        key = ("alone", name, mode)
        if key not in self.cache:
            doc, text = self.report(name, mode)
            repro = (doc["triage"].get("reproducer") or {}).get("path")
            assert repro, "no reproducer: %s" % _repro_line(text)
            with open(repro) as f:
                script = f.read()
            tmp = self.tmp.mktemp("alone-%s-%s" % (name, mode))
            proc = subprocess.run([sys.executable, repro], cwd=str(tmp), capture_output=True, text=True, timeout=300,
                                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
            self.cache[key] = (script, proc)
        return self.cache[key]

    def report(self, name: str, mode: str) -> Tuple[dict, str]:
        """(tfnative's JSON document, its text) for ``name`` under ``mode``."""
        if mode == "attach":
            a = self.attached(name)
            doc, text = a.doc, a.stderr
        else:
            b = self.bare(name)
            doc, text = b.core_doc, b.core_text
        last = "\n".join(text.splitlines()[-6:])
        assert doc, "tfnative %s wrote no JSON document; it printed, last:\n%s" % (mode, last)
        return doc, text


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory)


def test_the_corpus_table_lists_every_script():
    with open(os.path.join(CORPUS, "README.md")) as f:
        table = f.read()
    on_disk = sorted(n[:-3] for n in os.listdir(CORPUS) if n.endswith(".py"))
    assert on_disk == NAMES
    for name in NAMES:
        assert "`%s.py`" % name in table
        line_of(corpus_script(name), CRASH_LINE)


@pytest.mark.parametrize("name", NAMES)
def test_it_still_crashes_tensorflow(runs, name):
    """Without tfnative: the signal of the issue, TF's fatal line for an abort, and a core to read."""
    case, b = CASES[name], runs.bare(name)
    assert b.returncode == -getattr(signal, case.signal), b.stderr[-2000:]
    if case.check_failed:
        assert case.check_failed in (_fatal_line(b.stderr) or ""), b.stderr[-2000:]
    assert b.core_doc, b.core_text


def test_attach_without_repro_says_how_to_get_it():
    """attach without --repro: the op line, and one line that says how to get the script; none written."""
    r = run_tfnative(["attach", corpus_script("lrn_grad_eager")], timeout=300)
    lines = r.stderr.splitlines()
    assert OP_LINES["lrn_grad_eager"] in lines, r.stderr[-3000:]
    assert "tfnative: rerun with --repro FILE for a standalone script that crashes the same way" in lines, \
        r.stderr[-3000:]
    assert "tfnative: repro:" not in r.stderr


@pytest.mark.parametrize("name,mode", RUNS, ids=IDS)
def test_signal(runs, name, mode):
    case = CASES[name]
    doc, text = runs.report(name, mode)
    event = doc["events"][0]
    got = (doc["triage"]["signal"], event.get("signal"), doc.get("exit"))
    assert got == (case.signal, case.signal, {"signal": case.signal}), _triage_line(text)
    if mode == "attach":
        a = runs.attached(name)
        # the target died of the same signal as without tfnative, and tfnative says so in its exit status
        assert runs.bare(name).returncode == -getattr(signal, case.signal)
        assert a.returncode == 128 + getattr(signal, case.signal), a.stderr[-3000:]
        assert (event["kind"], event.get("fatal")) == ("signal", True)
        assert a.left == [], "left running: %s" % a.left
    else:
        assert event["kind"] == "core"


@pytest.mark.parametrize("name,mode", RUNS, ids=IDS)
def test_op_type(runs, name, mode):
    doc, text = runs.report(name, mode)
    op = doc["triage"]["op"]
    assert op is not None and op["type"] in CASES[name].ops, "triage.op = %r; %s" % (op, _triage_line(text))


@pytest.mark.parametrize("name,mode", RUNS, ids=IDS)
def test_users_line(runs, name, mode):
    path = corpus_script(name)
    want = (os.path.realpath(path), line_of(path, CRASH_LINE))
    doc, text = runs.report(name, mode)
    nearest = doc["triage"]["nearest_user_frame"]
    got = (os.path.realpath(nearest["file"]), nearest["line"]) if nearest else None
    assert got == want, "triage.nearest_user_frame = %r; %s" % (nearest, _triage_line(text))


CHECK_FAILED = [run for run in RUNS if CASES[run[0]].check_failed]


@pytest.mark.parametrize("name,mode", CHECK_FAILED, ids=["%s-%s" % run for run in CHECK_FAILED])
def test_tensorflows_fatal_line(runs, name, mode):
    """TF's ``file.cc:N] Check failed: ...`` line, as the script printed it without tfnative."""
    want = _fatal_line(runs.bare(name).stderr)
    assert want and CASES[name].check_failed in want
    doc, text = runs.report(name, mode)
    logs = (doc["triage"].get("log"), doc["events"][0].get("log"))
    assert all(log and log.endswith(want) for log in logs), "triage.log, event log = %r; want %r" % (logs, want)


WHERE = [run for run in RUNS if CASES[run[0]].where != "tf.data"]


@pytest.mark.parametrize("name,mode", WHERE, ids=["%s-%s" % run for run in WHERE])
def test_where_the_op_ran(runs, name, mode):
    """An eager op (the fast path or the ``*_eager_fallback`` one) is not a tf.function; a tf.function's
    kernel names the function."""
    case = CASES[name]
    doc, text = runs.report(name, mode)
    fn = doc["triage"].get("tf_function")
    line = _triage_line(text)
    if case.where in ("eager", "tracing"):  # a tf.function being traced runs no function yet, and nothing eagerly
        assert fn is None and "tf.function" not in line, "triage.tf_function = %r; %s" % (fn, line)
        assert case.where == "eager" or not doc["triage"].get("eager"), line
    else:
        assert fn is not None and fn.get("python_function") == case.function, "triage.tf_function = %r; %s" % (
            fn, line)


# The inputs the script gives the crashing op (issue #45), as the report's line names them
# (``core/kernelinputs.input_label``: dtype[shape], a small integer input with its values), in the op's order.
_LSTM = ("int64[]=5", "float32[1,1,1]", "float32[1,1]", "float32[1,1]", "float32[2,4]", "float32[1]",
         "float32[1]", "float32[1]", "float32[4]") + ("float32[1,1,1]",) * 9
_RESHAPE = ("float32[5]", "int32[5]=[0,1879048192,100000000,1610612736,-1]")
INPUTS = {
    "lrn_grad_eager": ("float32[0,0,0,0]", "float32[0,0,0,0]", "float32[0]"),
    "reshape_fpe_eager": _RESHAPE,
    "block_lstm_grad_eager": _LSTM,
    "fused_pad_conv2d_eager": ("float32[3,2]", "int32[4,2]=[0,0,1,1,1,1,0,0]", "float32[3,3,1,1]"),
    "conv2d_function": ("float32[3]", "float32[13,8,5,14]"),
    "tensor_scatter_max_function": ("float64[1,10,4]", "int64[1,1,1]=[0]", "float64[1]"),
    "lrn_grad_keras_layer": ("float32[0,0,0,0]", "float32[0,0,0,0]", "float32[0]"),
    "fused_pad_conv2d_function": ("float32[3,2]", "int32[4,2]=[0,0,1,1,1,1,0,0]", "float32[3,3,1,1]"),
    "block_lstm_grad_data_map": _LSTM,
    "reshape_fpe_data_map": _RESHAPE,
    "lstm_block_cell_grad_eager": ("float32[17]",) + ("float32[28,29]",) * 15,
    "block_lstm_grad_large_eager": ("int64[]=20", "float32[10,2,16]", "float32[2,8]", "float32[2,8]", "float32[24,32]",
                                    "float32[8]", "float32[8]", "float32[8]", "float32[32]") + ("float32[10,2,8]",) * 9,
    # no kernel frame (a C++ exception unwound it): the EagerTensor its generated Python wrapper was given
    "audio_spectrogram_eager": ("float32[8,1]",),
    # a shape function's: the shapes it saw (no dtype: an InferenceContext has none)
    "gather_batch_dims_function": ("[2,3]", "[2]", "[]"),
}
# Where no kernel frame is left on the stack, there is no context to read the inputs from.
# audio_spectrogram_eager loses its kernel frame too, but its wrapper's arguments give the inputs and attributes
# (core/tensorflow/wrapperargs.py); interleave_data's input is a variant (a dataset): no script gives it.
NO_KERNEL_FRAME = {
    "interleave_data": "the std::bad_alloc unwound MakeIterator's kernel frame before the SIGSEGV: the op is "
                       "named from its Python wrapper (make_iterator), whose input is a variant (a dataset): "
                       "no script can be given one",
}
INPUT_RUNS = [pytest.param(name, mode, id="%s-%s" % (name, mode), marks=(
    [pytest.mark.xfail(reason=NO_KERNEL_FRAME[name], strict=True)] if name in NO_KERNEL_FRAME else []))
    for name, mode in RUNS]


@pytest.mark.parametrize("name,mode", INPUT_RUNS)
def test_the_ops_inputs(runs, name, mode):
    """The crashing kernel's inputs read from memory (dtype, shape, small integer values), in the triage's op
    and the line under the crash, as the script passes them."""
    want = INPUTS.get(name)
    doc, text = runs.report(name, mode)
    op = doc["triage"].get("op") or {}
    got = tuple(input_label(e) for e in op.get("inputs") or [])
    assert want is not None and got == want, "triage.op = %r" % op


# The line under each crash (issue #45 item 3): the op, each input under its argument's name (the OpDef read
# from memory), the attributes that differ from their defaults (the type attributes the inputs carry left out).
_LSTM_LINE = ("op BlockLSTMGrad(seq_len_max: int64[]=5, x: float32[1,1,1], cs_prev: float32[1,1], h_prev: "
              "float32[1,1], w: float32[2,4], wci: float32[1], wcf: float32[1], wco: float32[1], b: float32[4], %s; "
              "use_peephole=false)" % ", ".join("%s: float32[1,1,1]" % n for n in (
                  "i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad")))
_LRN_LINE = ("op LRNGrad(input_grads: float32[0,0,0,0], input_image: float32[0,0,0,0], output_image: float32[0]; "
             "depth_radius=1, bias=1.5901822, alpha=0.11772865, beta=0.40442705)")
_FUSED_PAD_LINE = ('op FusedPadConv2D(input: float32[3,2], paddings: int32[4,2]=[0,0,1,1,1,1,0,0], filter: '
                   'float32[3,3,1,1]; mode="REFLECT", strides=[1,1,1,1], padding="VALID")')
_RESHAPE_LINE = "op Reshape(tensor: float32[5], shape: int32[5]=[0,1879048192,100000000,1610612736,-1])"
OP_LINES = {
    "lrn_grad_eager": _LRN_LINE,
    "lrn_grad_keras_layer": _LRN_LINE,
    "reshape_fpe_eager": _RESHAPE_LINE,
    "block_lstm_grad_eager": _LSTM_LINE,
    "fused_pad_conv2d_eager": _FUSED_PAD_LINE,
    "fused_pad_conv2d_function": _FUSED_PAD_LINE,
    # oneDNN's kernel: its own OpDef (_MklNativeConv2D's), whose is_filter_const defaults to false
    "conv2d_function": 'op Conv2D(input: float32[3], filter: float32[13,8,5,14]; strides=[1,1,1,1], '
                       'is_filter_const=true, padding="VALID")',
    "tensor_scatter_max_function": "op TensorScatterMax(tensor: float64[1,10,4], indices: int64[1,1,1]=[0], "
                                   "updates: float64[1])",
    "block_lstm_grad_data_map": _LSTM_LINE,
    "reshape_fpe_data_map": _RESHAPE_LINE,
    "lstm_block_cell_grad_eager": "op LSTMBlockCellGrad(x: float32[17], %s; use_peephole=false)" % ", ".join(
        "%s: float32[28,29]" % n for n in ("cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b", "i", "cs", "f", "o",
                                           "ci", "co", "cs_grad", "h_grad")),
    "block_lstm_grad_large_eager": (
        "op BlockLSTMGrad(seq_len_max: int64[]=20, x: float32[10,2,16], cs_prev: float32[2,8], h_prev: float32[2,8], "
        "w: float32[24,32], wci: float32[8], wcf: float32[8], wco: float32[8], b: float32[32], %s; use_peephole=false)"
        % ", ".join("%s: float32[10,2,8]" % n for n in ("i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"))),
    # from gen_audio_ops.audio_spectrogram's arguments: no OpDef read, every attribute passed shown
    "audio_spectrogram_eager": "op AudioSpectrogram(input: float32[8,1]; window_size=-5, stride=-1, "
                               "magnitude_squared=false)",
    # from GatherV2's InferenceContext: the shapes its shape function saw, every attribute of its NodeDef
    "gather_batch_dims_function": "op GatherV2([2,3], [2], []; Taxis=int32, Tindices=int32, Tparams=float32, "
                                  "batch_dims=5) in its shape function",
}


@pytest.mark.parametrize("name,mode", INPUT_RUNS)
def test_the_ops_line(runs, name, mode):
    """The op line, in the text (with or without --repro) and in JSON (``triage.op.call``); without --repro, the
    line that says how to get the script."""
    want = OP_LINES.get(name)
    doc, text = runs.report(name, mode)
    op = doc["triage"].get("op") or {}
    assert want is not None and want in text.splitlines(), text[-3000:]
    if op.get("shape_fn"):  # no OpDef read from memory for a shape function's op: no call named
        assert "call" not in op, op
        return
    call = op.get("call") or {}
    assert want.startswith("op %s(%s" % (op["type"], ", ".join(
        "%s: %s" % (n, input_label(e)) for n, e in zip(call.get("inputs") or [], op["inputs"])))), op
    assert len(call["inputs"]) == len(op["inputs"]), call
    if mode == "core":
        plain = runs.bare(name).plain_text
        assert want in plain.splitlines(), plain[-3000:]
        hint = ("tfnative: for a standalone script that crashes the same way: tfnative core %s %s --repro FILE"
                % (os.path.join(runs.bare_dir(name), "core"), PYTHON))
        assert hint in plain.splitlines(), plain[-3000:]
        assert "tfnative: repro:" not in plain


# The crashing op's attributes (issue #45), read from its NodeDef in memory: those each script sets (or the
# op's wrapper fills in), as the triage's op has them.
_LSTM_ATTRS = {"T": "float32", "use_peephole": False}
_RESHAPE_ATTRS = {"T": "float32", "Tshape": "int32"}
_LRN_ATTRS = {"T": "float32", "depth_radius": 1, "bias": 1.5901821851730347, "alpha": 0.11772865056991577,
              "beta": 0.40442705154418945}
_FUSED_PAD_ATTRS = {"T": "float32", "mode": "REFLECT", "padding": "VALID", "strides": {"list": [1, 1, 1, 1]}}
ATTRS = {
    "lrn_grad_eager": _LRN_ATTRS,
    "lrn_grad_keras_layer": _LRN_ATTRS,
    "reshape_fpe_eager": _RESHAPE_ATTRS,
    "block_lstm_grad_eager": _LSTM_ATTRS,
    "fused_pad_conv2d_eager": _FUSED_PAD_ATTRS,
    "fused_pad_conv2d_function": _FUSED_PAD_ATTRS,
    "conv2d_function": {"T": "float32", "padding": "VALID", "data_format": "NHWC", "strides": {"list": [1, 1, 1, 1]},
                        "dilations": {"list": [1, 1, 1, 1]}, "explicit_paddings": {"list": []}},
    "tensor_scatter_max_function": {"T": "float64", "Tindices": "int64"},
    "block_lstm_grad_data_map": _LSTM_ATTRS,
    "reshape_fpe_data_map": _RESHAPE_ATTRS,
    "lstm_block_cell_grad_eager": _LSTM_ATTRS,
    "block_lstm_grad_large_eager": _LSTM_ATTRS,
    "audio_spectrogram_eager": {"window_size": -5, "stride": -1, "magnitude_squared": False},
    "gather_batch_dims_function": {"Tparams": "float32", "Tindices": "int32", "Taxis": "int32", "batch_dims": 5},
}


@pytest.mark.parametrize("name,mode", INPUT_RUNS)
def test_the_ops_attributes(runs, name, mode):
    """The crashing kernel's NodeDef attributes, read from memory and checked, none left out."""
    doc, _ = runs.report(name, mode)
    op = doc["triage"].get("op") or {}
    attrs = op.get("attrs") or {}
    want = ATTRS.get(name)
    assert want is not None and {k: attrs.get(k) for k in want} == want, "triage.op = %r" % op
    assert "attrs_unread" not in op, op["attrs_unread"]


# The reproducer (--repro, issue #45) each run wrote: it dies as the original did, under tfnative's own check
# and alone (plain python, a fresh directory), in at most 25 lines of code naming nothing of the original.
NO_REPRO = {name: "no reproducer: " + why for name, why in NO_KERNEL_FRAME.items()}
REPRO_RUNS = [pytest.param(name, mode, id="%s-%s" % (name, mode), marks=(
    [pytest.mark.xfail(reason=NO_REPRO[name], strict=True)] if name in NO_REPRO else []))
    for name, mode in RUNS]


SHAPE_FN_DTYPES = {"gather_batch_dims_function": ("float32", "int32", "int32")}


@pytest.mark.parametrize("name,mode", REPRO_RUNS)
def test_the_reproducers_check(runs, name, mode):
    case = CASES[name]
    doc, text = runs.report(name, mode)
    line = _repro_line(text)
    rep = doc["triage"].get("reproducer")
    assert rep and rep["check"]["outcome"] == "same", line
    assert (rep["op"], rep["check"]["signal"], rep["check"]["op"]) == (case.ops[0], case.signal, case.ops[0]), rep
    assert re.match(r"tfnative: repro: repro\.py \(\d+ lines\) dies of %s in op %s, as the original did" % (
        case.signal, case.ops[0]), line), line
    op = doc["triage"]["op"]
    if op.get("shape_fn"):  # the shapes its shape function saw; the dtypes its NodeDef's type attributes say
        assert [e["shape"] for e in rep["inputs"]] == [e["shape"] for e in op["inputs"]], rep
        assert [e["dtype"] for e in rep["inputs"]] == list(SHAPE_FN_DTYPES[name]), rep
        return
    assert [(e["dtype"], e["shape"]) for e in rep["inputs"]] == [(e["dtype"], e["shape"]) for e in op["inputs"]]


@pytest.mark.parametrize("name,mode", REPRO_RUNS)
def test_the_reproducer_alone(runs, name, mode):
    case = CASES[name]
    script, proc = runs.alone(name, mode)
    assert proc.returncode == -getattr(signal, case.signal), proc.stderr[-2000:]
    want = _fatal_line(runs.bare(name).stderr)
    assert _fatal_line(proc.stderr) == want, proc.stderr[-2000:]
    code = [line for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert len(code) <= 25, script
    with open(corpus_script(name)) as f:
        original = {line.strip() for line in f if line.strip() and "import" not in line}
    assert not original & {line.strip() for line in script.splitlines()}, script
    assert name not in script and CORPUS not in script, script


# A crash in an op's shape function (issue #45): the triage says so, and the script traces the op with the shapes
# the shape function saw (a tf.function's input_signature), so that it dies there, not in a kernel.
SHAPE_FN_RUNS = [(name, mode) for name, mode in RUNS if name in SHAPE_FN_DTYPES]


@pytest.mark.parametrize("name,mode", SHAPE_FN_RUNS, ids=["%s-%s" % run for run in SHAPE_FN_RUNS])
def test_a_shape_functions_crash_is_traced_again(runs, name, mode):
    doc, text = runs.report(name, mode)
    assert doc["triage"]["op"].get("shape_fn") is True, doc["triage"]["op"]
    assert "; op GatherV2 (in its shape function, not a kernel);" in _triage_line(text), _triage_line(text)
    script, proc = runs.alone(name, mode)
    assert ("@tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32), tf.TensorSpec([2], tf.int32), "
            "tf.TensorSpec([], tf.int32)])") in script, script
    assert "tf.raw_ops.GatherV2(params=params, indices=indices, axis=axis, batch_dims=5)" in script, script
    assert "traced.get_concrete_function()" in script, script
    # alone, it dies in GatherV2's shape function while tracing: TF's own fatal stack names them
    assert "InferenceContext::UnknownShapeOfRank" in proc.stderr and "ShapeRefiner::RunShapeFn" in proc.stderr, \
        proc.stderr[-3000:]
