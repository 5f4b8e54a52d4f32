"""Schema v1 documents checked before they are read: each value the model reads has the type
docs/json-schema.md gives it (pure).

``check_document(d)`` walks a parsed document once, without recursion, and raises ``SchemaError`` at the first
value of the wrong type, naming where it is (``events[0].threads[3].frames[12].function: expected a string,
got a list``).  Keys the schema does not name are let through as they are (a newer tfnative's), and ``null``
stands for an absent key, as ``model.py`` reads it, except where a key is required.  On the way, a string
with a lone surrogate (``"\\ud800"`` in JSON, no character of its own) gets it escaped (the text
``\\ud800``), wherever it is, keys included: nothing downstream can fail to encode it.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

__all__ = ["SchemaError", "check_document", "check_frame", "check_scheduler", "clean_string"]

# The types of a leaf: what the message says it expected.
STR, INT, NUM, BOOL = "a string", "an integer", "a number", "true or false"
_TYPES: Dict[str, Tuple[type, ...]] = {STR: (str,), INT: (int,), NUM: (int, float), BOOL: (bool,)}


class _Any:
    """Any JSON value (its strings are still cleaned)."""


ANY = _Any()


class _Obj:
    """A JSON object with these keys (others let through); ``required``: keys that must be there;
    ``nonnull``: keys that may not be null."""

    def __init__(self, fields: Dict[str, Any], required: Iterable[str] = (), nonnull: Iterable[str] = ()) -> None:
        self.fields = fields
        self.required: FrozenSet[str] = frozenset(required)
        self.nonnull: FrozenSet[str] = frozenset(nonnull) | self.required
        # the keys whose value is a leaf, with the types it may have: most of a document's values, checked
        # where they are met (a frame's strings and numbers), not through the walk's list
        self.leaves: Dict[str, Tuple[type, ...]] = {k: _TYPES[v] for k, v in fields.items() if isinstance(v, str)}


class _List:
    """A JSON array of ``item`` (no nulls in it)."""

    def __init__(self, item: Any) -> None:
        self.item = item


class _Map:
    """A JSON object of any keys, each value ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _ByKey:
    """One object spec or another: ``with_key`` where the object has ``key``, else ``without``."""

    def __init__(self, key: str, with_key: _Obj, without: _Obj) -> None:
        self.key, self.with_key, self.without = key, with_key, without


Spec = Union[str, _Any, _Obj, _List, _Map, _ByKey]

# -- the schema (docs/json-schema.md) ------------------------------------------------------------------------
_PLACE = _Obj({"function": STR, "file": STR, "line": INT})
_TF_FUNCTION = _Obj({"name": STR, "python_function": STR, "called_by": INT, "how": STR}, required=["name"])
_VARIABLE = _Obj({"dtype": STR, "shape": _List(INT), "values": _List(ANY)})
_RESOURCE = _Obj({"device": STR, "container": STR, "name": STR, "type": STR, "variable": _VARIABLE, "unread": STR})
_INPUT = _Obj({"dtype": STR, "shape": _List(INT), "values": _List(ANY), "ref": BOOL, "unread": STR,
               "resource": _RESOURCE})
_OPDEF = _Obj({"inputs": _List(_Obj({"name": STR, "type_attr": STR, "number_attr": STR, "type_list_attr": STR},
                                     required=["name"])),
               "attrs": _Map(_Obj({"type": STR, "default": ANY, "default_unread": STR}, required=["type"]))})
_CALL = _Obj({"inputs": _List(STR), "attrs": _Map(ANY)})
_OP = _Obj({"type": STR, "name": STR, "kernel": STR, "kernel_type": STR, "inputs": _List(_INPUT), "inputs_unread": STR,
            "attrs": _Map(ANY), "attrs_unread": STR, "opdef": _OPDEF, "opdef_unread": STR, "call": _CALL})
FRAME_KINDS = ("native", "python", "elided")
_FRAME = _Obj({
    "kind": STR, "function": STR, "file": STR, "line": INT, "library": STR, "address": STR, "inline": BOOL,
    "tailcall": BOOL, "op": _OP, "recovered": STR, "class": STR, "source": STR, "user": BOOL,
    "locals": _Map(STR), "variables": _List(_Obj({"name": STR, "repr": STR, "arg": BOOL}, required=["name", "repr"])),
    "tf_function": _TF_FUNCTION, "converted": _PLACE, "count": INT, "functions": _List(STR),
    "op_args": _Obj({"inputs": _List(_INPUT), "input_names": _List(STR), "attrs": _Map(ANY)})}, required=["kind"])
_CXX = _Obj({"type": STR, "what": STR, "state": STR, "read_after_release": BOOL})
_THREAD = _Obj({
    "tid": INT, "name": STR, "label": STR, "frames": _List(_FRAME), "merge": STR, "gil": STR, "python_name": STR,
    "daemon": BOOL, "gc": BOOL, "kernel": _Obj({"state": STR, "syscall": STR}), "progress": STR, "stuck_s": NUM,
    "ns_tid": INT, "tf_function": _TF_FUNCTION, "merge_detail": STR, "python_frames": _List(_FRAME), "error": STR,
    "tf_functions_in_flight": _List(STR), "works_for": _Obj({"tid": INT, "waits_in": STR, "how": STR}),
    "lock_wait": _Obj({"resource": STR, "owner": INT, "evidence": STR, "process": INT, "lost_owner": INT,
                       "read_after_release": BOOL, "mutex": INT, "held_at": STR}),
    "after_release": BOOL, "consistent": BOOL, "cxx_exception": _CXX}, required=["tid"])
_SCHEDULER = _Obj({"kind": STR, "rank": INT, "job": STR, "step": STR, "node": STR, "local_rank": INT, "pod": STR,
                   "world_size": INT})
_TASK = _Obj({"type": STR, "index": INT})
_WAIT = _Obj({"thread": INT, "waits_for": INT, "resource": STR, "evidence": STR, "at": STR})
# TensorFlow's inter-op pool (core/poolsummary.py): an object the model reads, as typed as the rest
_POOL = _Obj({"name": STR, "threads": INT, "busy": _List(INT), "idle": _List(INT), "exact": BOOL,
              "pools": _Map(_List(INT))})
_HANG = _Obj({
    "verdict": STR, "pattern": STR, "waits": _List(_WAIT), "cycle": _List(_WAIT), "chain": _List(_WAIT),
    "gil_holder": _Obj({"tid": INT, "name": STR, "blocked_in": STR, "function": STR, "file": STR, "line": INT}),
    "waiting_for_gil": _List(INT), "waiting_for_function": _List(_Obj({"tid": INT, "tf_function": STR, "at": STR})),
    "stuck": _List(INT), "moving": _List(INT), "pool": _POOL})
_EVENT_OP = _Obj({"type": STR, "name": STR, "kernel_type": STR, "from": STR, "from_xla": _List(STR),
                  "created_at": _List(_FRAME), "forward": _Obj({"type": STR, "name": STR, "created_at": ANY})})
# "created_at": the user's line alone, not the creation stack
_TRIAGE_OP = _Obj({"type": STR, "name": STR, "kernel_type": STR, "from": STR, "from_xla": _List(STR),
                   "created_at": _PLACE, "forward": ANY, "inputs": _List(_INPUT),
                   "inputs_unread": STR, "attrs": _Map(ANY), "attrs_unread": STR, "call": _CALL})
_REPRODUCER = _Obj({"path": STR, "op": STR, "attrs": _Map(ANY),
                    "inputs": _List(_Obj({"dtype": STR, "shape": _List(INT), "variable": BOOL})), "data": STR,
                    "library": STR,
                    "check": _Obj({"outcome": STR, "signal": STR, "op": STR, "log": STR, "differs": STR,
                                   "outputs": _List(_Obj({"dtype": STR, "shape": _List(INT)})), "error": STR},
                                  required=["outcome"])}, required=["path", "op", "check"])
_CRASH = _Obj({
    "breakpoints": _Map(INT), "signal": STR, "handled_signals": _List(STR), "numerics": INT,
    "nearest_user_frame": _PLACE, "tf_function": _TF_FUNCTION, "dumps": INT, "children_killed": _List(STR),
    "op": _TRIAGE_OP, "cxx_exception": _CXX, "log": STR, "eager": BOOL, "reproducer": _REPRODUCER})
_EVENT = _Obj({
    "kind": STR, "location": STR, "signal": STR, "signal_code": INT, "fault_address": STR, "sent_by": INT,
    "timeout": NUM, "thread": INT, "pid": INT, "ns_pid": INT, "threads": _List(_THREAD), "python": STR, "via": STR,
    "warnings": _List(STR), "pool": _POOL, "samples": _Obj({"count": INT, "interval_s": NUM, "span_s": NUM}),
    "held_ms": NUM, "finalizing": BOOL, "log": STR, "handler": BOOL, "op": _EVENT_OP, "fatal": BOOL,
    "reraised_by_handler": BOOL, "cluster": _Obj({"task": STR, "tasks": _List(STR), "source": STR}),
    "triage": _HANG, "process": _Obj({"pid": INT, "cmdline": STR, "task": _TASK, "scheduler": _SCHEDULER}),
    "no_debug_info": _List(_Obj({"library": STR, "path": STR, "built_by": STR, "rebuild": STR})),
    "culprit": _Obj({"pid": INT, "label": STR, "why": STR, "cause": STR, "at": STR, "state": STR, "signal": STR,
                     "cpu_percent": NUM, "how": STR, "node": STR}, required=["pid", "why", "cause"]),
    "reproducer": _REPRODUCER}, required=["kind"])
DOCUMENT = _Obj({
    "version": STR, "pid": INT, "argv": _List(STR), "events": _List(_EVENT), "unresolved": _List(STR), "host": STR,
    "task": _TASK,
    "labels": _Map(STR), "scheduler": _SCHEDULER, "exit": _Obj({"code": INT, "signal": STR}), "dumps": _List(STR),
    "core": STR, "triage": _ByKey("verdict", _HANG, _CRASH),
    "children_killed": _List(_Obj({"pid": INT, "name": STR, "signal": STR, "core_dumped": BOOL},
                                  required=["pid", "signal"]))})


# -- the walk ------------------------------------------------------------------------------------------------
class SchemaError(ValueError):
    """A value of the wrong type: ``where`` (``events[0].pid``) and what was wrong."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__("%s: %s" % (where, message) if where else message)
        self.where = where


Path = Optional[Tuple[Any, Union[str, int]]]  # (parent path, key or index): built into text only for a message


def _where(path: Path) -> str:
    parts: List[str] = []
    while path is not None:
        path, part = path
        if isinstance(part, int):
            parts.append("[%d]" % part)
        elif part.isidentifier():
            parts.append("." + part)
        else:
            import json

            parts.append("[%s]" % json.dumps(part))
    return "".join(reversed(parts)).lstrip(".")


def kind_of(value: Any) -> str:
    """What a JSON value is, in a message's words (``an object``, ``a list``, ``null``, ``true``...)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return "an object"


def clean_string(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``); ``text`` itself when it has none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _fail(path: Path, expected: str, value: Any) -> SchemaError:
    return SchemaError(_where(path), "expected %s, got %s" % (expected, kind_of(value)))


def check_document(doc: Dict[str, Any]) -> None:
    """Check ``doc`` (a parsed schema-v1 document) against the schema; clean its strings in place.  Raises
    ``SchemaError``.  Iterative: any depth, any length, one pass."""
    _check(doc, DOCUMENT, None)


def check_frame(frame: Dict[str, Any]) -> None:
    """``check_document`` for one FRAME alone (a node of ``merge --tree``'s tree)."""
    _check(frame, _FRAME, None)


def check_scheduler(scheduler: Dict[str, Any]) -> None:
    """``check_document`` for one SCHEDULER alone (a process of ``merge --tree``'s tree)."""
    _check(scheduler, _SCHEDULER, None)


def _check(root: Any, top: Spec, at: Path) -> None:
    todo: List[Tuple[Any, Spec, Path]] = [(root, top, at)]
    while todo:
        value, spec, path = todo.pop()
        if isinstance(spec, _ByKey):
            spec = spec.with_key if isinstance(value, dict) and spec.key in value else spec.without
        if isinstance(spec, (_Obj, _Map)) or spec is ANY and isinstance(value, dict):
            if not isinstance(value, dict):
                raise _fail(path, "an object", value)
            fields = spec.fields if isinstance(spec, _Obj) else None
            nonnull = spec.nonnull if isinstance(spec, _Obj) else frozenset()
            if isinstance(spec, _Obj):
                for key in spec.required:
                    if key not in value:
                        raise SchemaError(_where((path, key)), "missing")
            renamed = None
            leaves = spec.leaves if isinstance(spec, _Obj) else None
            for key, item in value.items():
                if not key.isascii() and clean_string(key) != key:
                    renamed = renamed or []
                    renamed.append(key)
                types = leaves.get(key) if leaves is not None else None
                if types is not None:  # a leaf: as below, in fewer steps
                    if type(item) not in types:
                        if item is not None or key in nonnull:
                            raise _fail((path, key), (fields or {})[key], item)
                    elif type(item) is str and not item.isascii():
                        value[key] = clean_string(item)
                    continue
                if fields is not None:
                    sub = fields.get(key, ANY)
                    if item is None:
                        if key in nonnull:
                            raise _fail((path, key), sub if isinstance(sub, str) else "a value", item)
                        continue
                else:
                    sub = spec.value if isinstance(spec, _Map) else ANY
                if isinstance(sub, str):
                    if type(item) not in _TYPES[sub]:
                        raise _fail((path, key), sub, item)
                    if type(item) is str and not item.isascii():
                        value[key] = clean_string(item)
                elif isinstance(item, (dict, list)) or sub is not ANY:
                    todo.append((item, sub, (path, key)))
                elif type(item) is str and not item.isascii():
                    value[key] = clean_string(item)
            for key in renamed or ():
                value[clean_string(key)] = value.pop(key)
            if isinstance(spec, _Obj) and spec is _FRAME and value.get("kind") not in FRAME_KINDS:
                raise SchemaError(_where((path, "kind")), "expected one of %s, got %s" % (
                    ", ".join(FRAME_KINDS), kind_of(value.get("kind")) if not isinstance(value.get("kind"), str)
                    else clean_string(repr(value["kind"]))))
        elif isinstance(spec, _List) or spec is ANY and isinstance(value, list):
            if not isinstance(value, list):
                raise _fail(path, "a list", value)
            sub = spec.item if isinstance(spec, _List) else ANY
            for i, item in enumerate(value):
                if isinstance(sub, str):
                    if type(item) not in _TYPES[sub]:
                        raise _fail((path, i), sub, item)
                    if type(item) is str and not item.isascii():
                        value[i] = clean_string(item)
                elif isinstance(item, (dict, list)):
                    todo.append((item, sub, (path, i)))
                elif sub is not ANY:
                    raise _fail((path, i), "an object" if isinstance(sub, (_Obj, _Map, _ByKey)) else "a list", item)
                elif type(item) is str and not item.isascii():
                    value[i] = clean_string(item)
        elif isinstance(spec, str):  # a leaf on the stack: only the root could be one
            if type(value) not in _TYPES[spec]:
                raise _fail(path, spec, value)
