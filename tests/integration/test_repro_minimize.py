"""``--repro-minimize`` (issue #45) on a real crash whose inputs are far larger than it needs:
``tests/corpus/lstm_block_cell_grad_eager.py`` (tensorflow/tensorflow issue #66763: LSTMBlockCellGrad with a
rank-1 ``x`` and fifteen [28, 29] inputs, 12,197 elements).  The script written is the smallest that still died
the same way (the signal, the op, the ``Check failed`` line), each try a fresh process within the bounds; alone,
in a fresh directory, it dies so again.  Its options' misuse is one line.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys

import pytest

from tfnative.attach.repro import _fatal_line, _wrapper_op

from ..utils import ROOT, load_json, raise_core_limit, requires_gdb, requires_tf, run_tfnative

SCRIPT = os.path.join(ROOT, "tests", "corpus", "lstm_block_cell_grad_eager.py")
CHECK_FAILED = "tensor_shape.cc:362] Check failed: d < dims() (1 vs. 1)"
ORIGINAL_ELEMENTS = 17 + 15 * 28 * 29


def _alone(script, tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    return subprocess.run([sys.executable, "-X", "faulthandler", str(script)], cwd=str(alone), capture_output=True,
                          text=True, timeout=300, errors="replace",
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_attach_repro_minimize_writes_a_smaller_script_that_dies_the_same_way(tmp_path):
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["attach", "--json", str(out), "--repro", str(repro), "--repro-minimize",
                      "--repro-minimize-tries", "12", "--repro-minimize-seconds", "240", SCRIPT], timeout=900)
    assert r.returncode == 128 + signal.SIGABRT, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "tfnative: repro:" in x]
    assert len(lines) == 2, r.stderr[-3000:]
    m = re.fullmatch(r"tfnative: repro: minimized in (\d+) tr(?:y|ies), (\d+) s \((\d+) kept\): 12,197 -> ([\d,]+) "
                     r"elements", lines[0])
    assert m, lines
    tries, kept, after = int(m.group(1)), int(m.group(3)), int(m.group(4).replace(",", ""))
    assert 1 <= kept <= tries <= 12 and after < ORIGINAL_ELEMENTS // 100, lines[0]
    assert re.fullmatch(r"tfnative: repro: repro\.py \(\d+ lines\) dies of SIGABRT in op LSTMBlockCellGrad, as the "
                        r"original did: " + re.escape(CHECK_FAILED), lines[1]), lines[1]
    rep = load_json(out)["triage"]["reproducer"]
    shrunk = rep["minimized"]
    assert (shrunk["tries"], shrunk["kept"], shrunk["elements"]) == (tries, kept, [ORIGINAL_ELEMENTS, after]), shrunk
    assert "stopped" not in shrunk and shrunk["seconds"] <= 240, shrunk
    # the document's inputs are the written script's: each as small as the count says, x still of rank 1
    sizes = [_count(e["shape"]) for e in rep["inputs"]]
    assert sum(sizes) == after and rep["inputs"][0]["shape"] and len(rep["inputs"][0]["shape"]) == 1, rep["inputs"]
    assert (rep["check"]["outcome"], rep["check"]["signal"], rep["check"]["op"], rep["check"]["log"]) == (
        "same", "SIGABRT", "LSTMBlockCellGrad", CHECK_FAILED), rep["check"]
    # small enough to be all literals: no data file left beside it (the first script had one)
    assert "data" not in rep and not os.path.exists(str(repro) + ".npz"), os.listdir(tmp_path)
    text = repro.read_text()
    assert "np.load" not in text and "tf.raw_ops.LSTMBlockCellGrad(" in text and "0.837607" not in text, text
    assert "lstm_block_cell_grad_eager" not in text and "names" not in text, text
    # alone: plain python, a fresh directory, no core: the same signal, op and Check failed line
    proc = _alone(repro, tmp_path)
    assert proc.returncode == -signal.SIGABRT, proc.stderr[-2000:]
    assert _fatal_line(proc.stderr) == CHECK_FAILED, proc.stderr[-2000:]
    assert _wrapper_op(proc.stderr, "LSTMBlockCellGrad") == "LSTMBlockCellGrad", proc.stderr[-2000:]


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_a_change_the_crash_needs_undone_is_held_back(tmp_path):
    """``tests/corpus/block_lstm_grad_large_eager.py``: the Check failed line names x's time dimension (20 vs. 10),
    so all changes at once do not die the same way; delta debugging keeps x's 10 steps and shrinks the rest."""
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    want = "tensor.cc:1120] Check failed: limit <= dim0_size (20 vs. 10)"
    r = run_tfnative(["attach", "--json", str(out), "--repro", str(repro), "--repro-minimize",
                      os.path.join(ROOT, "tests", "corpus", "block_lstm_grad_large_eager.py")], timeout=900)
    assert r.returncode == 128 + signal.SIGABRT, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "tfnative: repro:" in x]
    m = re.fullmatch(r"tfnative: repro: minimized in (\d+) tries, \d+ s \((\d+) kept\): 2,617 -> (\d+) elements",
                     lines[0])
    assert m and int(m.group(2)) >= 2 and int(m.group(3)) <= 40, lines
    assert lines[1].endswith("dies of SIGABRT in op BlockLSTMGrad, as the original did: " + want), lines
    rep = load_json(out)["triage"]["reproducer"]
    shapes = {name: e["shape"] for name, e in zip(("seq_len_max", "x"), rep["inputs"])}
    assert shapes["seq_len_max"] == [] and shapes["x"][0] == 10, rep["inputs"]
    assert rep["minimized"]["tries"] <= 60 and "stopped" not in rep["minimized"], rep["minimized"]
    assert "data" not in rep and not os.path.exists(str(repro) + ".npz"), os.listdir(tmp_path)
    proc = _alone(repro, tmp_path)
    assert proc.returncode == -signal.SIGABRT and _fatal_line(proc.stderr) == want, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def lstm_core(tmp_path_factory):
    """The corpus script's core (``core_pattern`` is ``core`` here), made once."""
    tmp = tmp_path_factory.mktemp("lstm-core")
    proc = subprocess.run([sys.executable, SCRIPT], cwd=str(tmp), preexec_fn=raise_core_limit, capture_output=True,
                          timeout=600)
    assert proc.returncode == -signal.SIGABRT, proc.stderr[-2000:]
    assert os.path.exists(tmp / "core"), os.listdir(tmp)
    return str(tmp / "core")


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_core_repro_minimize_writes_a_smaller_script_that_dies_the_same_way(lstm_core, tmp_path):
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["core", lstm_core, os.path.realpath(sys.executable), "--json", str(out), "--repro", str(repro),
                      "--repro-minimize"], timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "tfnative: repro:" in x]
    assert re.fullmatch(r"tfnative: repro: minimized in \d+ tr(y|ies), \d+ s \(\d+ kept\): 12,197 -> \d+ elements",
                        lines[0]), lines
    assert lines[1].endswith("dies of SIGABRT in op LSTMBlockCellGrad, as the original did: " + CHECK_FAILED), lines
    rep = load_json(out)["triage"]["reproducer"]
    assert rep["minimized"]["elements"][1] < ORIGINAL_ELEMENTS // 100 and rep["check"]["outcome"] == "same", rep
    proc = _alone(repro, tmp_path)
    assert proc.returncode == -signal.SIGABRT and _fatal_line(proc.stderr) == CHECK_FAILED, proc.stderr[-2000:]


@requires_gdb
@requires_tf
@pytest.mark.tf
def test_the_bound_of_time_keeps_the_checked_script(lstm_core, tmp_path):
    """No time left for a try (--repro-minimize-seconds 1, a try takes longer): the script checked first stays,
    its large inputs in its data file, and a line says which bound stopped it."""
    out, repro = tmp_path / "s.json", tmp_path / "repro.py"
    r = run_tfnative(["core", lstm_core, os.path.realpath(sys.executable), "--json", str(out), "--repro", str(repro),
                      "--repro-minimize", "--repro-minimize-seconds", "1"], timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [x for x in r.stderr.splitlines() if "tfnative: repro:" in x]
    assert lines[0] == ("tfnative: repro: not minimized: no smaller input died the same way (0 tries, 0 s); it "
                        "stopped at the bound of time (--repro-minimize-seconds)"), lines
    assert lines[1].endswith("as the original did: " + CHECK_FAILED), lines
    rep = load_json(out)["triage"]["reproducer"]
    assert rep["minimized"] == {"tries": 0, "kept": 0, "seconds": 0.0, "elements": [ORIGINAL_ELEMENTS] * 2,
                                "stopped": "time"}, rep["minimized"]
    assert rep["data"] == str(repro) + ".npz" and os.path.exists(rep["data"]), rep
    assert [e["shape"] for e in rep["inputs"]] == [[17]] + [[28, 29]] * 15, rep["inputs"]


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.parametrize("args, said", [
    (["--repro-minimize"], "--repro-minimize needs --repro FILE (a file, not -)"),
    (["--repro", "-", "--repro-minimize"], "--repro-minimize needs --repro FILE (a file, not -)"),
    (["--repro", "{tmp}/r.py", "--no-repro-check", "--repro-minimize"],
     "--repro-minimize runs each try to check it: it cannot go with --no-repro-check"),
])
@pytest.mark.parametrize("command", ["core", "attach"])
def test_repro_minimize_without_a_checked_file_is_one_line(tmp_path, command, args, said):
    """Before anything runs: no core is read, no script started."""
    target = [str(tmp_path / "no-core")] if command == "core" else [str(tmp_path / "never_run.py")]
    r = run_tfnative([command, *[a.format(tmp=tmp_path) for a in args], *target])
    assert r.returncode != 0 and r.stderr.strip().splitlines() == ["tfnative: error: %s" % said], r.stderr
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
