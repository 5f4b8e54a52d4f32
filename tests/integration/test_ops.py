"""Ops on real TensorFlow: op context on kernel frames, --break-op, --check-numerics."""

import os

import pytest

from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]

MATMUL = script("ops_matmul.py")
NAN = script("nan_log.py")
KERNEL_COMPUTE = "::Compute(tensorflow::OpKernelContext*)"
# OpKernelContext::allocate_output(int, TensorShape const&, Tensor**): called from inside kernels.
ALLOCATE_OUTPUT = "_ZN10tensorflow15OpKernelContext15allocate_outputEiRKNS_11TensorShapeEPPNS_6TensorE"


MATMUL_KERNELS = ("tensorflow::BaseBatchMatMulOp<", "tensorflow::MklMatMulOp<")


def _user_lines(frames):
    return [(os.path.basename(f["file"]), f["line"]) for f in frames if f["kind"] == "python" and f.get("user")]


def test_break_op_stops_in_the_kernel_of_that_op_only(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break-op", "MatMul", "--max-hits", "10", "--json", str(out), MATMUL], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "result" in r.stdout
    doc = load_json(out)
    events = doc["events"]
    # Two MatMuls run (one eager, one in the tf.function); Log and Relu do not stop.
    assert [e["location"] for e in events] == ["op MatMul", "op MatMul"], r.stderr
    for e in events:
        assert e["op"]["type"] == "MatMul"
        top = e["threads"][0]["frames"][0]
        # MatMul is served by BaseBatchMatMulOp in TF 2.16+, or by oneDNN's MklMatMulOp where oneDNN
        # rewrites it (its kernel then carries the type _MklMatMul): the stop is in that kernel's Compute.
        assert top["function"].startswith(MATMUL_KERNELS) and KERNEL_COMPUTE in top["function"]
        assert top["op"]["type"] == "MatMul" and top["op"]["name"] == e["op"]["name"]
        assert top["class"] == "tensorflow-native"
    # The eager one stops on the main thread, under the user's line.
    assert _user_lines(events[0]["threads"][0]["frames"])[0] == ("ops_matmul.py", line_of(MATMUL, "EAGER MATMUL"))
    # The one in the tf.function names it, on whichever thread ran the kernel (an executor
    # thread says it works for the only tf.function in flight, and which thread called it).
    fn = events[1]["threads"][0]["tf_function"]
    assert fn["python_function"] == "layer" and fn["name"].startswith("__inference_layer_")
    if events[1]["threads"][0]["frames"][-1]["kind"] == "native" and "python" not in [
            f["kind"] for f in events[1]["threads"][0]["frames"]]:
        assert fn["how"] == "only tf.function in flight" and fn["called_by"] == events[0]["thread"]
        assert "working for tf.function layer (__inference_layer_" in r.stderr
    assert any("armed " + k in r.stderr for k in MATMUL_KERNELS), r.stderr
    assert "Op: MatMul" in r.stderr
    assert doc["triage"]["breakpoints"] == {"op MatMul": 2}


def test_break_op_log_does_not_fire_for_matmul(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break-op", "Log", "--max-hits", "10", "--json", str(out), MATMUL], timeout=600)
    assert r.returncode == 0, r.stderr
    events = load_json(out)["events"]
    assert len(events) == 1 and events[0]["op"]["type"] == "Log"
    assert "log<float>" in events[0]["threads"][0]["frames"][0]["function"]
    assert _user_lines(events[0]["threads"][0]["frames"])[0] == ("ops_matmul.py", line_of(MATMUL, "LOG LINE"))


def test_break_op_with_a_name_that_is_no_op_lists_close_names():
    """No stock op type of that name: pending (a library may register it), and at the end of a run where
    none did, one line with the close names (nothing merely similar).  A stock type in another case is a typo,
    refused at once."""
    r = run_tfnative(["attach", "--break-op", "MatMull", MATMUL], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "tfnative: --break-op MatMull: pending until a library registers it " \
           "(TensorFlow's own close names: MatMul)\n" in r.stderr
    assert "tfnative: --break-op MatMull: no library the process loaded registers an op type of that name; " \
           "close names: MatMul\n" in r.stderr
    assert "error" not in r.stderr.replace("round-off errors", "")
    r = run_tfnative(["attach", "--break-op", "matmul", MATMUL], timeout=600)
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == (
        "tfnative: error: --break-op matmul: TensorFlow has no op type of that name; candidates: MatMul (op types "
        "are case-sensitive)"), r.stderr


def test_break_op_with_a_name_that_cannot_be_an_op_type():
    r = run_tfnative(["attach", "--break-op", "Mat Mul", MATMUL])
    assert r.returncode == 2
    assert r.stderr == ("tfnative: error: --break-op 'Mat Mul': not an op type name "
                        "(letters, digits and _, e.g. MatMul)\n")


def test_kernel_frame_below_a_breakpoint_names_its_op(tmp_path):
    """A stop deep inside a kernel (not at its entry): the OpKernel is found on the stack."""
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--break", ALLOCATE_OUTPUT, "--max-hits", "3", "--json", str(out), MATMUL],
                     timeout=600)
    assert r.returncode == 0, r.stderr
    events = load_json(out)["events"]
    assert len(events) == 3
    for e in events:
        frames = e["threads"][0]["frames"]
        assert "allocate_output" in frames[0]["function"]
        kernel = next(f for f in frames if KERNEL_COMPUTE in (f["function"] or ""))
        assert kernel["op"]["type"] in ("Log", "MatMul", "Relu", "Sum", "Const", "_EagerConst"), kernel
        device = next(f for f in frames if "ThreadPoolDevice::Compute" in (f["function"] or ""))
        assert device["op"] == kernel["op"]
    # The first kernel to allocate an output is the eager Log's.
    first = next(f for f in events[0]["threads"][0]["frames"] if KERNEL_COMPUTE in (f["function"] or ""))
    assert first["op"]["type"] == "Log" and "log<float>" in first["function"]
    assert "<-- op Log" in r.stderr


def test_check_numerics_in_a_tf_function_points_at_the_users_line(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--check-numerics", "--json", str(out), NAN], timeout=600)
    # The script fails as it would under enable_check_numerics alone.
    assert r.returncode == 1 and "InvalidArgumentError" in r.stderr
    doc = load_json(out)
    [event] = [e for e in doc["events"] if e["kind"] == "numerics"]
    op = event["op"]
    assert op["type"] == "Log" and op["name"] == "Log"
    created = [(os.path.basename(f["file"]), f["line"]) for f in op["created_at"] if f["user"]]
    # Created by the user's line inside the function body, called from the user's call line.
    assert created == [("nan_log.py", line_of(NAN, "CALL LINE")), ("nan_log.py", line_of(NAN, "NAN LINE"))]
    assert op["created_at"][-1]["function"] != "model"  # TensorFlow frames below the user's, in order
    # The live stack: the user's call of the function, nothing of tfnative's hook.
    frames = event["threads"][0]["frames"]
    assert _user_lines(frames) == [("nan_log.py", line_of(NAN, "CALL LINE"))]
    assert not any("/tfnative/inject/" in (f.get("file") or "") for f in frames)
    assert event["threads"][0]["tf_function"]["python_function"] == "model"
    assert doc["triage"]["numerics"] == 1
    assert doc["triage"]["op"]["created_at"]["line"] == line_of(NAN, "NAN LINE")
    assert "NaN/Inf made by op Log" in r.stderr
    assert "| z = tf.math.log(y - 10.0)" in r.stderr


def test_check_numerics_eager(tmp_path):
    out = tmp_path / "s.json"
    r = run_tfnative(["attach", "--check-numerics", "--json", str(out), NAN, "eager"], timeout=600)
    assert r.returncode == 1 and "InvalidArgumentError" in r.stderr
    [event] = [e for e in load_json(out)["events"] if e["kind"] == "numerics"]
    assert event["op"]["type"] == "Log"
    assert _user_lines(event["threads"][0]["frames"]) == [("nan_log.py", line_of(NAN, "EAGER NAN LINE"))]
    assert [(os.path.basename(f["file"]), f["line"]) for f in event["op"]["created_at"] if f["user"]] == \
        [("nan_log.py", line_of(NAN, "EAGER NAN LINE"))]


def test_check_numerics_leaves_the_scripts_environment_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "XLA_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(tmp_path)
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    r = run_tfnative(["attach", "--check-numerics", script("env_probe.py")], input="\n", stdin=None, env=env)
    assert r.returncode == 0, r.stderr
    import json
    seen = json.loads(r.stdout)["all_env"]
    # The user's sitecustomize still ran, and the script sees the user's PYTHONPATH, nothing of ours.
    assert seen.pop("USER_SITECUSTOMIZE") == "ran"
    assert seen == env


def test_report_of_the_readme_triage_example(tmp_path):
    example = os.path.join(os.path.dirname(MATMUL), "..", "..", "examples", "nan_triage.py")
    md = tmp_path / "r.md"
    r = run_tfnative(["report", "--check-numerics", "-o", str(md), os.path.normpath(example)], timeout=600)
    assert r.returncode == 1, r.stderr
    text = md.read_text()
    assert "## Event 1: NaN/Inf made by op `Log`" in text
    assert "nan_triage.py:%d in train_step  <-- your code" % line_of(example, "tf.math.log(s)") in text
    assert "op `Log` created at `%s:%d`" % (os.path.realpath(example), line_of(example, "tf.math.log(s)")) in text


@pytest.mark.slow
def test_tf_bt_in_a_plain_gdb_names_the_op(tmp_path):
    """gdb_scripts/tf-bt.py sourced into the user's own gdb (full symbols): kernel frames name their op."""
    import subprocess
    import sys

    from ..utils import ROOT, wait_for_file

    ready, release = tmp_path / "ready", tmp_path / "release"
    target = subprocess.Popen([sys.executable, script("tf_hang.py"), str(ready), str(release)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = int(wait_for_file(str(ready), 300, target))
        r = subprocess.run(["gdb", "-q", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-p", str(pid),
                            "-ex", "source %s" % os.path.join(ROOT, "gdb_scripts", "tf-bt.py"),
                            "-ex", "tf-bt -a", "-ex", "detach"],
                           capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        lines = r.stdout.splitlines()
        kernel = [ln for ln in lines if "tensorflow::PyFuncOp::Compute(tensorflow::OpKernelContext*)" in ln]
        device = [ln for ln in lines if "tensorflow::ThreadPoolDevice::Compute(" in ln]
        assert kernel and kernel[0].endswith("<-- op EagerPyFunc"), r.stdout[-3000:]
        assert device and device[0].endswith("<-- op EagerPyFunc")
        release.write_text("go")
        assert target.wait(timeout=120) == 0
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
