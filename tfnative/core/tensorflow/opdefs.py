"""The definition of the op a kernel frame runs, read from its ``OpDef`` in memory (issue #45): its input
arguments' names (and the attributes that count or type them) and each attribute's type and default, what the
crash report's op line needs to name the inputs and leave out the attributes at their defaults.

Found from the NodeDef that ``nodeattrs.AttrsReader.node_def`` found and checked, in the layout of the TF 2.21
wheel's headers (``tensorflow/include/``, protobuf 6.31.1):

* **the OpDef** (``node_properties.h``): ``NodeProperties`` begins with ``const OpDef* op_def``, then the
  ``NodeDef``.  ``op_def.pb.h``: an ``OpDef`` is a ``Message`` (vptr, ``InternalMetadata``) then ``Impl_
  {HasBits<1>; CachedSize; RepeatedPtrField<ArgDef> input_arg_ (24), output_arg_ (48); RepeatedPtrField
  <AttrDef> attr_ (72); RepeatedPtrField<string> control_output_ (96); ArenaStringPtr name_ (120) ...}``.  The
  check: the OpDef's ``name_`` is the NodeDef's ``op`` (the kernel's type string).
* **an ArgDef**: ``Impl_ {HasBits; CachedSize; RepeatedPtrField handle_data_ (24); ArenaStringPtr name_ (48),
  description_ (56), type_attr_ (64), number_attr_ (72), type_list_attr_ (80); ...}``.
* **an AttrDef**: ``Impl_ {HasBits; CachedSize; ArenaStringPtr name_ (24), type_ (32), description_ (40);
  AttrValue* default_value_ (48); ...}``: the default is read as the NodeDef's attributes are
  (``AttrsReader.value``, the same AttrValue vtable), none where the pointer is null.

Protobuf 3.21's messages (the TF 2.16 wheel's, ``AttrsReader.pb3``) have no ``HasBits``: every offset above is 8
less there.  Every name must be an identifier and every ArgDef and AttrDef share their class's vtable; an OpDef that
fails a check is ``opdef_unread`` with the reason.  Bounded (``nodeattrs.MAX_LIST`` arguments and attributes); only
memory is read.  Standard library only: this also runs inside gdb's Python.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..memory import aligned_pointer
from .kernelinputs import InputsReader, Unread, read_inputs
from .nodeattrs import AttrsReader, read_attrs
from .opkernel import FrameContext, OpKernelReader, op_of_frame

OPDEF_NAME, OPDEF_INPUTS, OPDEF_ATTRS = 120, 24, 72
ARG_NAME, ARG_TYPE_ATTR, ARG_NUMBER_ATTR, ARG_TYPE_LIST_ATTR = 48, 64, 72, 80
ATTR_NAME, ATTR_TYPE, ATTR_DEFAULT = 24, 32, 48
MAX_ARGS = 256
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE_RE = re.compile(r"[a-z()]+\Z")  # an attribute's type: "int", "list(type)", "shape", "func"...


class OpDefReader:
    """Reads OpDefs through an ``AttrsReader`` that has found a kernel's NodeDef (its ``at``)."""

    def __init__(self, attrs: AttrsReader) -> None:
        self.a = attrs
        self.vptrs: Dict[str, int] = {}  # each message class's vtable, as first seen

    def _message(self, addr: int, kind: str) -> None:
        """``addr`` is a message of the class ``kind`` (the same vtable as every other one read)."""
        if not aligned_pointer(addr):
            raise Unread("an %s at 0x%x" % (kind, addr))
        vptr = self.a.r.u64(addr)
        if not aligned_pointer(vptr) or self.vptrs.setdefault(kind, vptr) != vptr:
            raise Unread("an %s at 0x%x without its class's vtable" % (kind, addr))

    def _name(self, field: int, empty: bool = False) -> str:
        raw = self.a.arena_string(field)[1]
        text = raw.decode("ascii", "replace")
        if not (empty and not raw) and not _NAME_RE.match(text):
            raise Unread("a name %r that is no identifier" % text[:40])
        return text

    def _repeated(self, field: int, kind: str) -> List[int]:
        items = self.a.pointers(field)
        if len(items) > MAX_ARGS:
            raise Unread("%d %ss" % (len(items), kind))
        for item in items:
            self._message(item, kind)
        return items

    def opdef(self, props: int, op: str) -> Dict[str, Any]:
        """``{"inputs": [{"name", "type_attr"?, "number_attr"?, "type_list_attr"?}...], "attrs": {name: {"type",
        "default"?}}}`` of the OpDef the NodeProperties at ``props`` points to; raises Unread."""
        at = self.a.r.u64(props)
        d = -8 if self.a.pb3 else 0  # protobuf 3.21: no HasBits, every field 8 before
        self._message(at, "OpDef")
        if self._name(at + d + OPDEF_NAME) != op:
            raise Unread("the NodeProperties' OpDef is not op %s's" % op)
        inputs: List[Dict[str, Any]] = []
        for arg in self._repeated(at + d + OPDEF_INPUTS, "ArgDef"):
            entry: Dict[str, Any] = {"name": self._name(arg + d + ARG_NAME)}
            for key, off in (("type_attr", ARG_TYPE_ATTR), ("number_attr", ARG_NUMBER_ATTR),
                             ("type_list_attr", ARG_TYPE_LIST_ATTR)):
                value = self._name(arg + d + off, empty=True)
                if value:
                    entry[key] = value
            inputs.append(entry)
        attrs: Dict[str, Any] = {}
        for attr in self._repeated(at + d + OPDEF_ATTRS, "AttrDef"):
            name = self._name(attr + d + ATTR_NAME)
            kind = self.a.arena_string(attr + d + ATTR_TYPE)[1].decode("ascii", "replace")
            if not _TYPE_RE.match(kind):
                raise Unread("attribute %s of type %r" % (name, kind[:40]))
            spec: Dict[str, Any] = {"type": kind}
            default = self.a.r.u64(attr + d + ATTR_DEFAULT)
            if default:
                try:
                    spec["default"] = self.a.value(default)
                except Unread as exc:  # a default tfnative does not read (a tensor's, a func's): none known
                    spec["default_unread"] = str(exc)
            attrs[name] = spec
        return {"inputs": inputs, "attrs": attrs}


def read_opdef(attrs: AttrsReader, kernel: int, op: Optional[str]) -> Dict[str, Any]:
    """``{"opdef": ...}`` (``OpDefReader.opdef``) of the kernel whose NodeDef ``attrs`` found, or
    ``{"opdef_unread": why}``."""
    if attrs.at is None or not op:
        return {"opdef_unread": "the kernel's NodeDef was not found"}
    try:
        props = attrs.r.words(kernel, attrs.at[0] + 1)[attrs.at[0]]
        return {"opdef": OpDefReader(attrs).opdef(props, op)}
    except Unread as exc:
        return {"opdef_unread": str(exc)}


def op_with_inputs(kernels: OpKernelReader, frame: FrameContext, device: bool, inputs: bool
                   ) -> Optional[Dict[str, Any]]:
    """``opkernel.op_of_frame``; with ``inputs``, a kernel's (not a device's) inputs
    (``kernelinputs.read_inputs``), its NodeDef's attributes (``nodeattrs.read_attrs``) and its OpDef
    (``read_opdef``) too: the one call that a capture and gdb's commands make."""
    op: Optional[Dict[str, Any]] = op_of_frame(kernels, frame, device=device)
    if op and inputs and not device:
        reader, kernel = InputsReader(kernels.mem), int(op["kernel"], 16)
        attrs = AttrsReader(reader)
        op = dict(op, **read_inputs(reader, frame, kernel), **read_attrs(reader, kernel, kernels.layout, attrs))
        op.update(read_opdef(attrs, kernel, op.get("kernel_type") or op.get("type")))  # oneDNN: its own OpDef
    return op
