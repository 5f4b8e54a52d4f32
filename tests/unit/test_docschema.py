"""core/docschema.py through its public functions: each kind of wrong value and its whole message (where it is,
what was expected, what came), null for an absent key, keys the schema does not name, the triage's two forms,
the frame's kinds, and lone surrogates escaped wherever they are (keys included) and nothing else touched."""

from __future__ import annotations

import copy
import importlib
import json
from typing import Any, Dict

import pytest

from tfnative.core.docschema import SchemaError, check_document, clean_string

LONE = "\ud800"  # what json.loads makes of "\ud800": no character of its own, cannot be encoded
ESCAPED = "\\ud800"


def frame(**kw: Any) -> Dict[str, Any]:
    f: Dict[str, Any] = {"kind": "native", "function": "f", "file": None, "line": None, "library": "libc.so.6",
                         "address": "0x1"}
    f.update(kw)
    return f


def document(**kw: Any) -> Dict[str, Any]:
    d: Dict[str, Any] = {"tfnative": 1, "pid": 7, "argv": ["python", "t.py"], "events": [
        {"kind": "snapshot", "pid": 7, "threads": [{"tid": 7, "name": "python", "frames": [frame()]}]}]}
    d.update(kw)
    return d


def error(doc: Any) -> str:
    with pytest.raises(SchemaError) as e:
        check_document(doc)
    assert isinstance(e.value, ValueError)  # what merge already turns into the user's line
    return str(e.value)


def thread_error(**kw: Any) -> str:
    return error(document(events=[{"kind": "snapshot", "threads": [dict({"tid": 1}, **kw)]}]))


def frame_error(**kw: Any) -> str:
    return thread_error(frames=[frame(**kw)])


def test_a_good_document_passes_untouched():
    d = document(host="n1", task={"type": "worker", "index": 0}, labels={"rank": "3"}, core="/c", exit={
        "code": 0, "signal": None}, children_killed=[{"pid": 9, "signal": "SIGKILL", "core_dumped": False}])
    d["events"][0]["threads"][0].update(stuck_s=1.5, kernel={"state": "S", "syscall": "futex"}, daemon=True)
    d["events"][0]["timeout"] = 3  # a number may be an integer
    before = copy.deepcopy(d)
    assert check_document(d) is None
    assert d == before and json.dumps(d) == json.dumps(before)


def test_each_leaf_type_and_what_came_instead():
    assert frame_error(function=["x"]) == (
        "events[0].threads[0].frames[0].function: expected a string, got a list")
    assert frame_error(line="3") == "events[0].threads[0].frames[0].line: expected an integer, got a string"
    assert frame_error(line=3.0) == "events[0].threads[0].frames[0].line: expected an integer, got a number"
    assert frame_error(line=True) == "events[0].threads[0].frames[0].line: expected an integer, got true"
    assert frame_error(inline=1) == "events[0].threads[0].frames[0].inline: expected true or false, got an integer"
    assert frame_error(inline={}) == "events[0].threads[0].frames[0].inline: expected true or false, got an object"
    assert frame_error(file=False) == "events[0].threads[0].frames[0].file: expected a string, got false"
    assert thread_error(stuck_s="1") == "events[0].threads[0].stuck_s: expected a number, got a string"
    assert thread_error(stuck_s=False) == "events[0].threads[0].stuck_s: expected a number, got false"
    assert error(document(pid=1.5)) == "pid: expected an integer, got a number"


def test_nested_objects_and_lists_of_the_wrong_kind():
    assert error(document(events=5)) == "events: expected a list, got an integer"
    assert error(document(events=["x"])) == "events[0]: expected an object, got a string"
    assert error(document(events=[None])) == "events[0]: expected an object, got null"
    assert thread_error(kernel=5) == "events[0].threads[0].kernel: expected an object, got an integer"
    assert thread_error(kernel=[]) == "events[0].threads[0].kernel: expected an object, got a list"
    assert thread_error(frames={}) == "events[0].threads[0].frames: expected a list, got an object"
    assert error(document(argv=["a", 1])) == "argv[1]: expected a string, got an integer"
    assert error(document(argv=[None])) == "argv[0]: expected a string, got null"
    assert error(document(labels={"rank": 3})) == "labels.rank: expected a string, got an integer"
    assert error(document(labels=["rank"])) == "labels: expected an object, got a list"
    # a key that is no identifier is written as JSON writes it
    assert error(document(labels={"a b": 3})) == 'labels["a b"]: expected a string, got an integer'
    assert error(document(labels={"3": None})) == 'labels["3"]: expected a string, got null'


def test_the_root_itself():
    for root, got in (([], "a list"), ("x", "a string"), (None, "null"), (1, "an integer")):
        with pytest.raises(SchemaError) as e:
            check_document(root)  # type: ignore[arg-type]
        assert str(e.value) == "expected an object, got %s" % got and e.value.where == ""


def test_where_is_given_alone_too():
    with pytest.raises(SchemaError) as e:
        check_document(document(events=[{"kind": "snapshot", "threads": [{"tid": 1}, {"tid": "2"}]}]))
    assert e.value.where == "events[0].threads[1].tid"
    assert str(e.value) == "events[0].threads[1].tid: expected an integer, got a string"


def test_required_keys_and_null():
    assert error(document(events=[{"threads": []}])) == "events[0].kind: missing"
    assert thread_error(tid=None) == "events[0].threads[0].tid: expected an integer, got null"
    assert error(document(events=[{"kind": "x", "threads": [{"name": "t"}]}])) == "events[0].threads[0].tid: missing"
    assert error(document(children_killed=[{"pid": 1}])) == "children_killed[0].signal: missing"
    assert error(document(children_killed=[{"signal": "SIGKILL"}])) == "children_killed[0].pid: missing"
    assert frame_error(variables=[{"name": "x"}]) == "events[0].threads[0].frames[0].variables[0].repr: missing"
    assert frame_error(tf_function={"python_function": "f"}) == (
        "events[0].threads[0].frames[0].tf_function.name: missing")
    # null stands for an absent key wherever one may be absent, objects and lists included
    check_document(document(host=None, task=None, events=[{"kind": "x", "threads": None, "pid": None}]))
    check_document(document(exit={"code": None, "signal": None}, labels=None, argv=None))


def test_frame_kinds():
    assert frame_error(kind="bogus") == (
        "events[0].threads[0].frames[0].kind: expected one of native, python, elided, got 'bogus'")
    odd = frame_error(kind="bogus" + LONE)  # the message can be written whatever the kind was
    assert odd.startswith("events[0].threads[0].frames[0].kind: expected one of native, python, elided, got 'bogus")
    assert LONE not in odd and odd.encode("utf-8")
    assert thread_error(frames=[{"function": "f"}]) == "events[0].threads[0].frames[0].kind: missing"
    assert frame_error(kind=None) == "events[0].threads[0].frames[0].kind: expected a string, got null"
    for kind in ("native", "python", "elided"):
        check_document(document(events=[{"kind": "x", "threads": [{"tid": 1, "frames": [frame(kind=kind)]}]}]))
    # the creation stack of an op is frames too; a thread's Python frames as well
    assert thread_error(python_frames=[{"kind": "c"}]) == (
        "events[0].threads[0].python_frames[0].kind: expected one of native, python, elided, got 'c'")
    assert error(document(events=[{"kind": "x", "op": {"created_at": [{"kind": "z"}]}}])) == (
        "events[0].op.created_at[0].kind: expected one of native, python, elided, got 'z'")
    # only frames have kinds to choose from: an event's or a child's kind is any string
    check_document(document(events=[{"kind": "anything", "threads": []}]))


def test_the_triage_is_a_hang_or_a_crash_by_its_verdict():
    assert error(document(triage={"verdict": "deadlock", "stuck": ["7"]})) == (
        "triage.stuck[0]: expected an integer, got a string")
    assert error(document(triage={"verdict": 1})) == "triage.verdict: expected a string, got an integer"
    check_document(document(triage={"verdict": "hang", "signal": 5}))  # a hang has no signal: let through
    assert error(document(triage={"signal": 5})) == "triage.signal: expected a string, got an integer"
    assert error(document(triage={"breakpoints": {"abort": "2"}})) == (
        "triage.breakpoints.abort: expected an integer, got a string")
    check_document(document(triage={"stuck": ["x"]}))  # a crash has no stuck threads: let through
    assert error(document(triage=[1])) == "triage: expected an object, got a list"
    assert error(document(triage="x")) == "triage: expected an object, got a string"
    check_document(document(triage={"verdict": "hang", "pool": {"any": [1, {"thing": None}]}}))


def test_keys_the_schema_does_not_name_are_let_through():
    d = document(future={"a": [1, "b", None, {"c": 2.5}]}, extra=[[True]], note="x", n=None)
    d["events"][0]["threads"][0]["frames"][0]["new_key"] = {"deep": [1]}
    before = copy.deepcopy(d)
    check_document(d)
    assert d == before


def test_a_pool_is_checked_as_the_model_reads_it():
    """A capture's pool summary is an object of typed fields (``core/poolsummary.py``), checked like the rest."""
    d = document()
    d["events"][0]["pool"] = {"name": None, "threads": 2, "busy": [5], "idle": [6], "exact": False,
                              "pools": {"inter-op": [5, 6]}}
    check_document(d)
    for wrong, where in (([1], "pool"), ({"threads": "2"}, "pool.threads"),
                         ({"pools": {"x": ["5"]}}, "pool.pools.x[0]")):
        d["events"][0]["pool"] = wrong
        with pytest.raises(SchemaError) as e:
            check_document(d)
        assert str(e.value).startswith("events[0].%s: expected" % where), e.value


def test_lone_surrogates_are_escaped_wherever_they_are():
    d = document(host="h" + LONE, labels={"k": LONE}, argv=["a" + LONE, "b"], future={"x": [LONE, [LONE]]},
                 extra=[LONE, 1], note=LONE)
    d["events"][0]["threads"][0]["frames"][0]["function"] = "f" + LONE
    d["events"][0]["pool"] = {"name": LONE, "threads": 0, "busy": [], "idle": []}
    check_document(d)
    assert d["host"] == "h" + ESCAPED and d["labels"] == {"k": ESCAPED}
    assert d["argv"] == ["a" + ESCAPED, "b"]
    assert d["future"] == {"x": [ESCAPED, [ESCAPED]]} and d["extra"] == [ESCAPED, 1] and d["note"] == ESCAPED
    assert d["events"][0]["threads"][0]["frames"][0]["function"] == "f" + ESCAPED
    assert d["events"][0]["pool"]["name"] == ESCAPED
    json.dumps(d).encode("utf-8")  # nothing left that cannot be written


def test_keys_with_lone_surrogates_are_renamed_and_the_others_keep_their_order():
    d = document(labels={"a": "1", "k" + LONE: "2", "é": "3", "z": "4"}, future={LONE: {LONE: LONE}})
    check_document(d)
    assert list(d["labels"].items()) == [("a", "1"), ("é", "3"), ("z", "4"), ("k" + ESCAPED, "2")]
    assert d["future"] == {ESCAPED: {ESCAPED: ESCAPED}}
    keys = list(d)
    check_document(d)
    assert list(d) == keys  # a document with none: its keys stay where they are


def test_text_that_can_be_encoded_is_left_as_it_is():
    d = document(host="nœud-é", argv=["日本"], labels={"ключ": "значение"}, future=["ü"])
    before = copy.deepcopy(d)
    check_document(d)
    assert d == before


def test_clean_string():
    assert clean_string("plain") == "plain" and clean_string("") == ""
    assert clean_string("é日") == "é日"
    assert clean_string("a" + LONE + "b\udfff") == "a\\ud800b\\udfff"
    assert clean_string(LONE).encode("utf-8") == b"\\ud800"


def test_lists_of_integers():
    d = document(triage={"verdict": "hang", "stuck": [1, 2], "moving": [], "waiting_for_gil": [3]})
    check_document(d)
    assert d["triage"]["stuck"] == [1, 2] and d["triage"]["waiting_for_gil"] == [3]
    assert error(document(triage={"verdict": "hang", "moving": [1, True]})) == (
        "triage.moving[1]: expected an integer, got true")


def test_the_schema_as_an_import_builds_it():
    # The schema's objects are built when the module is imported, once per process as each tfnative command
    # does: here again, in this process, and put back as they were afterwards.
    import tfnative.core.docschema as module

    saved = dict(module.__dict__)
    importlib.reload(module)
    try:
        docs = [document(), document(events=[{"threads": []}]), document(triage={"verdict": "x", "stuck": ["1"]}),
                document(triage={"signal": 1}), document(labels={"a": 1}),
                document(children_killed=[{"pid": None, "signal": "SIGKILL"}]),
                document(events=[{"kind": "x", "threads": [{"tid": 1, "frames": [{"kind": "python", "line": "x"}]}]}])]
        said = []
        for d in docs:
            try:
                module.check_document(d)
                said.append("ok")
            except module.SchemaError as e:
                said.append(str(e))
        assert said == [
            "ok", "events[0].kind: missing", "triage.stuck[0]: expected an integer, got a string",
            "triage.signal: expected a string, got an integer", "labels.a: expected a string, got an integer",
            "children_killed[0].pid: expected an integer, got null",
            "events[0].threads[0].frames[0].line: expected an integer, got a string"]
    finally:
        module.__dict__.clear()
        module.__dict__.update(saved)
    assert module.SchemaError is SchemaError
