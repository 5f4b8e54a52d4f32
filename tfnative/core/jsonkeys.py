"""The serialiser of the model (``core/model.py``): each class's JSON keys in one table of ``Key`` rows, in schema
v1's order, which names the key, the attribute, when the key is written in a document (``write``) and in a
capture's wire form, and how ``read`` reads it.  The order of a document's keys is this table's, and no other
code's.  Pure: standard library only (gdb's Python imports the model too).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

Json = Dict[str, Any]
T = TypeVar("T")
Rule = Callable[[Any, Any], bool]  # (the object, the attribute's value) -> whether its key is written


def always(obj: Any, value: Any) -> bool:
    return True


def never(obj: Any, value: Any) -> bool:
    return False


def is_set(obj: Any, value: Any) -> bool:
    return value is not None


def truthy(obj: Any, value: Any) -> bool:
    return bool(value)


def same(value: Any) -> Any:
    return value


def as_list(value: Any) -> List[Any]:
    return list(value or [])


def as_dict(value: Any) -> Dict[str, Any]:
    return dict(value or {})


class Key:
    """One JSON key of a model class: where it is, when it is written, how it is read.

    A plain class with slots: some 140 rows are made at every start, where a frozen dataclass costs
    milliseconds to define, and its attributes are read for every key of every object written or read,
    where a NamedTuple's are slower to read."""

    __slots__ = ("key", "attr", "doc", "wire", "load", "read", "required", "get")

    def __init__(self, key: str, attr: str, doc: Rule = is_set, wire: Rule = never,
                 load: Callable[[Any], Any] = same, read: bool = True, required: bool = False,
                 get: Optional[Callable[[Any], Any]] = None) -> None:
        self.key = key  # the JSON key
        self.attr = attr  # the attribute that holds it
        self.doc = doc  # when ``to_json`` writes it
        self.wire = wire  # when ``capture_json`` (the capture's wire form) writes it
        self.load = load  # the JSON value (None where absent) -> the attribute's value
        self.read = read  # False: derived (written, never read), or the same attribute at a second place
        self.required = required  # from_json: a KeyError where the key is absent
        self.get = get  # the value written, where it is not the attribute's

    def __repr__(self) -> str:
        return "Key(%r, %r)" % (self.key, self.attr)


def k(key: str, attr: Optional[str] = None, doc: Rule = is_set, wire: Rule = never, **more: Any) -> Key:
    return Key(key, attr or key, doc, wire, **more)


def dump(value: Any, wire: bool) -> Any:
    """A value as JSON: model objects by their own ``to_json`` (``capture_json`` in the wire form)."""
    if isinstance(value, list):
        return [dump(v, wire) for v in value]
    if wire and hasattr(value, "capture_json"):
        return value.capture_json()
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


def write(obj: Any, keys: Sequence[Key], wire: bool = False, order: Optional[Sequence[str]] = None) -> Json:
    """``obj`` as JSON by its key table, in the table's order (or ``order``: the keys of the wire form)."""
    if order is not None:
        by_key = {k.key: k for k in keys if k.wire is not never}
        keys = [by_key[name] for name in order]
    out: Json = {}
    for k in keys:
        value = k.get(obj) if k.get is not None else getattr(obj, k.attr)
        if (k.wire if wire else k.doc)(obj, value):
            out[k.key] = dump(value, wire)
    return out


class _ReadPlan:
    """How a key table reads: the plain keys (read as they are, None where absent: most keys of a frame, and most
    are absent) by one pass over the keys the JSON has, the others (loaded, or required) one by one."""

    __slots__ = ("absent", "plain", "loaded")

    def __init__(self, keys: Sequence[Key]) -> None:
        plain = [k for k in keys if k.read and not k.required and k.load is same]
        self.absent: Json = {k.attr: None for k in plain}
        self.plain: Dict[str, str] = {k.key: k.attr for k in plain}
        self.loaded = [(k.attr, k.key, k.load, k.required) for k in keys
                       if k.read and (k.required or k.load is not same)]


_PLANS: Dict[int, _ReadPlan] = {}  # id of a key table (a module's constant) -> its plan


def read(keys: Sequence[Key], d: Json) -> Json:
    """The attributes (keyword arguments of the class) that JSON ``d`` gives, by the key table: each key's
    ``load`` of its value (of None where absent); a required key's absence is a KeyError."""
    plan = _PLANS.get(id(keys))
    if plan is None:
        plan = _PLANS[id(keys)] = _ReadPlan(keys)
    out = plan.absent.copy()
    plain = plan.plain
    for key, value in d.items():
        attr = plain.get(key)
        if attr is not None:
            out[attr] = value
    for attr, key, load, required in plan.loaded:
        out[attr] = load(d[key] if required else d.get(key))
    return out


_BUILDERS: Dict[Tuple[int, Any], Callable[[Json], Any]] = {}  # (id of a key table, class) -> its builder


def build(cls: Callable[..., T], keys: Sequence[Key], d: Json) -> T:
    """``cls(**read(keys, d))``, by a function made once per class and table: one call of ``cls`` with each
    read key's value (its ``load``'s), without a loop over the table at each object (``merge`` reads some
    100,000 frames of 1,000 documents)."""
    builder = _BUILDERS.get((id(keys), cls))
    if builder is None:
        builder = _BUILDERS[(id(keys), cls)] = _builder(cls, keys)
    result: T = builder(d)
    return result


def _builder(cls: Callable[..., Any], keys: Sequence[Key]) -> Callable[[Json], Any]:
    """The source of ``build``'s function for ``cls`` and ``keys``, compiled: ``cls(attr=get(key), attr2=
    load2(get(key2)), attr3=load3(d[key3])...)``, the same arguments ``read`` gives."""
    scope: Dict[str, Any] = {"cls": cls}
    args = []
    for i, k in enumerate(k for k in keys if k.read):
        value = "d[%r]" % k.key if k.required else "get(%r)" % k.key
        if k.load is not same:
            scope["load%d" % i] = k.load
            value = "load%d(%s)" % (i, value)
        args.append("%s=%s" % (k.attr, value))
    exec("def build(d):\n    get = d.get\n    return cls(%s)\n" % ", ".join(args), scope)
    made: Callable[[Json], Any] = scope["build"]
    return made


def without(keys: Sequence[Key], names: Sequence[str], **loads: Callable[[Any], Any]) -> Tuple[Key, ...]:
    """The table ``keys`` without the rows of the JSON keys ``names`` (a capture's table: the event's without
    analysis's keys), in the same order; ``loads``: a row's ``load`` replaced, by its key."""
    out = []
    for k in keys:
        if k.key in names:
            continue
        if k.key in loads:
            k = Key(k.key, k.attr, k.doc, k.wire, loads[k.key], k.read, k.required, k.get)
        out.append(k)
    return tuple(out)


def optional(load: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``load`` of a key whose absence (or an empty object) is None."""
    return lambda value: load(value) if value else None

