"""The text on a terminal (issue 23, defect 5): lines within its width, marks in the margin, an abort's frames
folded; piped or under ``--full``, the full lines.  No gdb: the frames are those of a real TF 2.21 abort
(``tests/scripts/tf_check_failed.py``, ``tfnative attach --json``), written out here."""

import fcntl
import io
import os
import struct
import termios

import pytest

from tfnative.analysis.event import finish
from tfnative.analysis.frames import mark_frames, mark_thread
from tfnative.core.model import Document, Event, EventNativeFrame, EventPythonFrame, EventThread, Op, TfFunction
from tfnative.output import fit, render, report

OP = Op(type="FusedPadConv2D", name="FusedPadConv2D")
TF = "libtensorflow_framework.so.2"
KERNEL = ("tensorflow::FusedResizeConv2DUsingGemmOp<float, tensorflow::(anonymous namespace)::FusedResizeAndPadConv"
          "Functor<float, float, float, FastGemmFunctor<float, float, float>, (tensorflow::(anonymous namespace)::"
          "SamplingMode)1>, false>::Compute(tensorflow::OpKernelContext*)")
ABORTING = [
    ("__pthread_kill_implementation", "libc.so.6"), ("raise", "libc.so.6"), ("abort", "libc.so.6"),
    ("absl::lts_20250814::log_internal::LogMessage::FailWithoutStackTrace()", TF),
    ("absl::lts_20250814::log_internal::LogMessage::SendToLog()", TF),
    ("absl::lts_20250814::log_internal::LogMessage::Flush()", TF),
    ("tensorflow::TensorShapeBase<tensorflow::TensorShape>::dim_size(int) const", TF),
    (KERNEL, "libtensorflow_cc.so.2"),
    ("tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, tensorflow::OpKernelContext*)", TF),
    ("tensorflow::(anonymous namespace)::ExecutorState<tensorflow::SimplePropagatorState>::Process(tensorflow::"
     "SimplePropagatorState::TaggedNode const&, long)", TF),
    ("Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)", TF),
    ("void std::__invoke_impl<void, tsl::thread::EigenEnvironment::CreateThread(std::function<void ()>)::{lambda()"
     "#1}&>(std::__invoke_other, tsl::thread::EigenEnvironment::CreateThread(std::function<void ()>)::{lambda()#1}&)",
     TF),
    ("tsl::(anonymous namespace)::PThread::ThreadFn(void*)", TF), ("start_thread", "libc.so.6"),
    ("clone3", "libc.so.6"),
]
SITE = "/work/main/.venv/lib/python3.11/site-packages/tensorflow/python"
SCRIPT = "/work/wt-text/tests/scripts/tf_check_failed.py"


def native(name, lib, address="0x7efd58748bb5", op=None):
    f = EventNativeFrame(function=name, library=lib, address=address)
    f.op = op
    return f


def aborting_thread():
    frames = [native(n, lib, op=OP if "Compute(" in n and "Device" in n or n == KERNEL else None)
              for n, lib in ABORTING]
    thread = EventThread(tid=4866, name="tf_Compute", frames=frames)
    thread.tf_function = TfFunction(name="__inference_bad_pad_conv_8", python_function="bad_pad_conv",
                                    how="only tf.function in flight", called_by=4840)
    mark_thread(thread)  # as analysis marks an event's threads for the text
    return thread


def main_thread():
    frames = [native("syscall", "libc.so.6"),
              EventPythonFrame(function="Function.__call__", line=833,
                          file=SITE + "/eager/polymorphic_function/polymorphic_function.py"),
              EventPythonFrame(function="filter_traceback.<locals>.error_handler", line=164,
                          file=SITE + "/util/traceback_utils.py"),
              EventPythonFrame(function="<module>", file=SCRIPT, line=12),
              native("_start", "python3.11")]
    frames[3].user = True
    thread = EventThread(tid=4840, name="MainThread", frames=frames)
    mark_thread(thread)
    return thread


def abort_document():
    event = Event(kind="signal", signal="SIGABRT", thread=4866, pid=4840, python="3.11",
                  threads=[aborting_thread(), main_thread()],
                  log="tensorflow/core/framework/tensor_shape.cc:362] Check failed: d < dims() (1 vs. 0)")
    doc = Document(argv=["python3", SCRIPT], has_exit=True, events=[event])
    doc.set_exit(-6)
    return finish(doc)  # its triage, as the session computes it


def printed(width, full=False):
    out = io.StringIO()
    printer = report.Printer(out, full=full, width=width)
    doc = abort_document()
    printer.event(doc.events[0])
    printer.summary([], doc)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [100, 80, 60])
def test_no_line_wider_than_the_terminal_and_the_triage_last(width):
    lines = printed(width)
    assert max(map(len, lines)) <= width, "\n".join(ln for ln in lines if len(ln) > width)
    tail = lines[max(i for i, ln in enumerate(lines) if ln.startswith("tfnative: triage: ")):]
    assert all(ln.startswith(" ") for ln in tail[1:])  # the triage's own lines, wrapped
    triage = " ".join(ln.strip() for ln in tail)
    assert "op FusedPadConv2D" in triage and "nearest user frame <module> at %s:12" % SCRIPT in triage


def test_the_marks_stay_and_are_in_the_margin():
    lines = printed(100)
    kernel = next(ln for ln in lines if "FusedResizeConv2DUsingGemmOp" in ln)
    assert kernel == "> #7        tensorflow::FusedResizeConv2DUsingGemmOp<...>::Compute(...)  <-- op FusedPadConv2D"
    user = next(ln for ln in lines if "<module>" in ln and "[py]" in ln)
    assert user == "> #3   [py] <module> at %s:12  <-- your code" % SCRIPT
    assert [ln[:2] for ln in lines if ln.startswith(("> #", "  #"))].count("> ") == 3  # kernel, device, user
    # a path of TensorFlow's loses its leading directories, never its file or line
    assert "  #1   [py] Function.__call__ at .../python/eager/polymorphic_function/polymorphic_function.py:833" in lines
    # the address is left out where the name says where the frame is
    assert "  #0        syscall in libc.so.6" in lines


def test_piped_or_full_every_line_whole():
    for lines in (printed(None), printed(100, full=True)):
        kernel = next(ln for ln in lines if "FusedResizeConv2DUsingGemmOp" in ln)
        assert kernel.endswith("::Compute(tensorflow::OpKernelContext*) in libtensorflow_cc.so.2 [0x7efd58748bb5]"
                               "  <-- op FusedPadConv2D")
        assert kernel.startswith("> #7        tensorflow::FusedResizeConv2DUsingGemmOp<float, tenso...oat>, (")
        triage = lines[-1]  # one line, whole
        assert triage.startswith("tfnative: triage: ") and triage.endswith("in tf.function __inference_bad_pad_conv_8")
        assert max(map(len, lines)) > 200
    full = printed(100, full=True)
    assert not any("frames of abort()" in ln for ln in full)  # --full folds nothing
    assert any(ln.strip().startswith("#0        __pthread_kill_implementation in libc.so.6") for ln in full)


def test_an_abort_is_one_line_above_the_frame_that_failed():
    thread = aborting_thread()
    plan = render.fold_plan(thread.frames)
    assert plan[0] == ("fold", 6, "... 6 frames of abort() and TensorFlow's fatal log ...")
    assert plan[1] == 6  # dim_size: where the check failed, then the kernel
    lines = render.thread_block(thread)
    assert lines[1] == "       ... 6 frames of abort() and TensorFlow's fatal log ..."
    assert lines[2].startswith("  #6        tensorflow::TensorShapeBase")  # numbered by depth still
    # the JSON keeps every frame
    assert len(thread.to_json()["frames"]) == len(ABORTING)


def marked(*names, lib="libc.so.6"):
    """Frames of those names, marked by analysis (their part in an abort) as an event's are."""
    frames = [native(n, lib) for n in names]
    mark_frames(frames)
    return frames


def test_what_an_abort_run_is():
    def run(*names):
        return render.abort_run(marked(*names))

    # TensorFlow's own fatal log (tsl), and glibc's names with debug info
    assert run("__GI___pthread_kill", "__GI_raise", "__GI_abort",
               "tsl::internal::LogMessageFatal::~LogMessageFatal()", "tensorflow::Foo::Compute()") == 4
    terminate = ("raise", "abort", "__gnu_cxx::__verbose_terminate_handler()", "__cxxabiv1::__terminate(void (*)())",
                 "std::terminate()", "__cxa_throw", "f")
    assert run(*terminate) == 5  # where the exception was thrown stays in view
    assert render.abort_text(marked(*terminate[:5])) == (
        "... 5 frames of abort() and std::terminate ...")
    assert run("absl::lts_20250814::log_internal::LogMessage::Flush()", "f") == 0  # logging, no abort: not a crash
    assert run("syscall", "raise", "abort") == 0  # not at the top
    assert render.abort_text(marked("raise", "abort", "__assert_fail_base", "__assert_fail")) == (
        "... 4 frames of abort() and a failed assert ...")
    two = marked("raise", "abort") + marked("f", lib="libx.so")
    assert render.fold_plan(two) == [0, 1, 2]  # two frames: shown as they are


@pytest.mark.parametrize("name,compact,params", [
    (KERNEL, "tensorflow::FusedResizeConv2DUsingGemmOp<...>::Compute(tensorflow::OpKernelContext*)",
     "tensorflow::FusedResizeConv2DUsingGemmOp<...>::Compute(...)"),
    ("absl::lts_20250814::synchronization_internal::FutexWaiter::Wait(absl::lts_20250814::synchronization_internal"
     "::KernelTimeout)", "absl::synchronization_internal::FutexWaiter::Wait(absl::synchronization_internal::"
     "KernelTimeout)", "absl::synchronization_internal::FutexWaiter::Wait(...)"),
    ("tensorflow::(anonymous namespace)::ExecutorState<tensorflow::SimplePropagatorState>::Process(tensorflow::"
     "SimplePropagatorState::TaggedNode const&, long)",
     "tensorflow::(anonymous namespace)::ExecutorState<...>::Process(tensorflow::SimplePropagatorState::TaggedNode "
     "const&, long)", "tensorflow::(anonymous namespace)::ExecutorState<...>::Process(...)"),
    ("std::vector<int, std::allocator<int> >::operator[](unsigned long) const",
     "std::vector<...>::operator[](unsigned long) const", "std::vector<...>::operator[](...) const"),
    ("bool std::operator< <char>(std::__cxx11::basic_string<char> const&, char const*)",
     "bool std::operator< <...>(std::basic_string<...> const&, char const*)",
     "bool std::operator< <...>(...)"),
    ("Eigen::internal::TensorExecutor<...>::run()::{lambda(long, long)#1}::operator()(long, long) const",
     "Eigen::internal::TensorExecutor<...>::run()::{lambda(long, long)#1}::operator()(long, long) const",
     "Eigen::internal::TensorExecutor<...>::run()::{lambda(long, long)#1}::operator()(...) const"),
    ("f(x) > g<", "f(x) > g<", "f(x) > g<"),  # unbalanced: left as it is
])
def test_cpp_names_lose_template_arguments_then_parameters(name, compact, params):
    assert fit.compact_cpp(name) == compact
    assert fit.compact_cpp(name, params=True) == params


def test_names_and_paths_cut_where_they_say_least():
    name = "tensorflow::(anonymous namespace)::ExecutorState<...>::Process(...)"
    assert fit.cut_name(name, 40) == "...ExecutorState<...>::Process(...)"
    assert len(fit.cut_name(name, 20)) == 20  # not even class::method fits: cut in the middle
    assert fit.cut_path("/a/b/site-packages/tensorflow/python/ops/math_ops.py", 26) == ".../python/ops/math_ops.py"
    assert fit.cut_line("x" * 50 + "  <-- op A", 30, keep_end="  <-- op A").endswith("x  <-- op A")
    assert len(fit.cut_line("x" * 50 + "  <-- op A", 30, keep_end="  <-- op A")) == 30
    assert fit.cut_line("x" * 50, None) == "x" * 50


def test_prose_wraps_after_its_phrases():
    text = "triage: no breakpoint hit; fatal SIGABRT; op FusedPadConv2D; nearest user frame <module> at " + SCRIPT
    lines = report.note_lines(text, 60)
    assert lines[0] == "tfnative: triage: no breakpoint hit; fatal SIGABRT;"
    assert all(len(ln) <= 60 and ln.startswith(report.NOTE_INDENT) for ln in lines[1:])
    assert " ".join(ln.strip() for ln in lines) == "tfnative: " + text
    assert report.note_lines(text, None) == ["tfnative: " + text]
    long_word = fit.wrap("a " + "b" * 100, 50)
    assert max(map(len, long_word)) <= 50 and "".join(ln.strip() for ln in long_word[1:]).startswith("b" * 40)
    assert fit.wrap("  !! " + "word " * 20, 40, sep=" ")[0].startswith("  !! word")


def test_the_width_is_the_terminals_only(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert fit.terminal_width(io.StringIO()) is None  # a pipe or a file: never cut
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
        with os.fdopen(os.dup(slave), "w") as tty:
            assert fit.terminal_width(tty) == 100  # COLUMNS first, as shutil and click do
            monkeypatch.delenv("COLUMNS")
            assert fit.terminal_width(tty) == 132
            assert report.Printer(tty).width == 132 and report.Printer(tty, full=True).width is None
            monkeypatch.setenv("COLUMNS", "10")
            assert fit.terminal_width(tty) == fit.MIN_WIDTH
    finally:
        os.close(master)
        os.close(slave)
