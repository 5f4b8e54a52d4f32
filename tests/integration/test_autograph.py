"""AutoGraph-converted frames are shown at the user's function, file and line."""

import re

import pytest

from ..utils import line_of, load_json, requires_gdb, requires_tf, run_tfnative, script

pytestmark = [requires_gdb, requires_tf, pytest.mark.tf]


def test_tracing_a_tf_range_loop_reports_the_users_lines(tmp_path):
    out = tmp_path / "s.json"
    src = script("tf_autograph.py")
    # TF_FinishOperation runs once per op built while tracing; the loop body comes ~55 ops in
    r = run_tfnative(["attach", "--break", "TF_FinishOperation", "--max-hits", "80", "--full", "--json", str(out),
                      src], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "total 14" in r.stdout
    events = load_json(out)["events"]
    frames = [f for e in events for t in e["threads"] for f in t["frames"] if f["kind"] == "python"]
    generated = re.compile(r"__autograph_generated_file\w*\.py$")
    # no frame is left pointing into AutoGraph's temporary module...
    assert not [f for f in frames if generated.search(f["file"] or "")]
    mapped = [f for f in frames if f.get("converted")]
    assert mapped and all(generated.search(f["converted"]["file"]) for f in mapped)
    # ...and the loop body's ops are attributed to the loop body's line in the user's function
    body = line_of(src, "total += tf.math.square(i)")
    hits = [f for f in mapped if f["line"] == body]
    assert hits and all(f["function"] == "accumulate" and f["file"] == src and f["user"] for f in hits)
    assert any(f["converted"]["function"].endswith("loop_body") for f in hits)
    assert {f["line"] for f in mapped} >= {line_of(src, "total = tf.constant(0)"), line_of(src, "for i in"), body}
    # the converted location is in the verbose text
    assert "[AutoGraph: ran as " in r.stderr and "tf_autograph.py:%d  <-- your code" % body in r.stderr
