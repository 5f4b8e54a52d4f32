"""The tensor an eager Python tensor holds, read from memory (issue #45): where a C++ exception unwound the
kernel's frame, the op's inputs are the ``EagerTensor`` objects its generated Python wrapper was given.

Nothing comes from a table of versions; each link is found in memory and checked (TensorFlow's sources, TF
2.16 to 2.22):

* **the Python object** (``tensorflow/python/eager/pywrap_tensor.cc``; the header ``pywrap_tensor.h`` only
  declares ``EagerTensor_Handle``): after its ``PyObject`` header, one of the first words of an ``EagerTensor``
  is its ``TFE_TensorHandle*``.
* **the handle** (``tensorflow/c/eager/tfe_tensorhandle_internal.h``): a ``TFE_TensorHandle*`` is an
  ``ImmediateExecutionTensorHandle*``, here a ``TensorHandle`` (``common_runtime/eager/tensor_handle.h``): a
  ``core::RefCounted`` (vptr, then a refcount), whose ``data_`` is a variant whose first alternative,
  ``LocalTensorHandleData`` (``tensor_handle_data.h``), starts with its ``tensorflow::Tensor tensor_``.
* **the tensor**: ``kernelinputs.InputsReader.tensor``'s checks (dims product ``num_elements_``, a known
  dtype, a buffer with a vtable and a sane refcount).

The word of the object and the offset in the handle found once are tried first on the next tensor, and every
tensor is checked again.  Bounded: EAGER_WORDS words of the object, HANDLE_WORDS of the handle.  Standard
library only.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..memory import aligned_pointer
from .kernelinputs import InputsReader, Unread

EAGER_WORDS = 12  # words of an EagerTensor where its TFE_TensorHandle* may be (after ob_refcnt, ob_type)
HANDLE_WORDS = 64  # words of a TensorHandle where its Tensor may be
MAX_REFS = 1 << 31


class EagerTensors:
    """Reads the tensors of ``EagerTensor`` objects of one process."""

    def __init__(self, reader: InputsReader) -> None:
        self.r = reader
        self.at: Optional[Tuple[int, int]] = None  # (the handle's word in the object, the Tensor's in the handle)

    def tensor(self, obj: int) -> Dict[str, Any]:
        """``{"dtype", "shape"[, "values"]}`` of the EagerTensor at ``obj``; raises Unread."""
        words = self.r.words(obj, EAGER_WORDS)
        tries = [self.at] if self.at is not None else []
        tries += [(k, j) for k in range(2, EAGER_WORDS) for j in range(2, HANDLE_WORDS)]
        handles: Dict[int, bool] = {}
        for k, j in tries:
            handle = words[k]
            if handle not in handles:
                handles[handle] = self._is_handle(handle)
            if not handles[handle]:
                continue
            try:
                out = self.r.tensor(handle + 8 * j, values=True)
            except Unread:
                continue
            self.at = (k, j)
            return out
        raise Unread("no TensorHandle holding a valid Tensor in the EagerTensor at 0x%x" % obj)

    def _is_handle(self, addr: int) -> bool:
        """A RefCounted object: a vtable, then a refcount above 0 (the EagerTensor holds one)."""
        if not aligned_pointer(addr):
            return False
        try:
            vptr, refs = self.r.words(addr, 2)
        except Unread:
            return False
        return aligned_pointer(vptr) and 0 < refs < MAX_REFS
