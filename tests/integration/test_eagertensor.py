"""The tensor of an ``EagerTensor`` read from a live process's memory (``core/tensorflow/eagertensor.py``): a
Python process holds four eager tensors (float32 2-D, a zeros column, an int64 range too large for its
values, an int32 scalar) and prints their ``id``; tfnative reads each one's dtype, shape and small values
through its ``TFE_TensorHandle*`` and the handle's ``Tensor``, each link found in memory and checked; an
object that is not an EagerTensor (a Python int) is a reason, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tfnative.core.tensorflow.eagertensor import EagerTensors
from tfnative.core.tensorflow.kernelinputs import InputsReader, Unread
from tfnative.sources.procmem import Memory

from ..utils import requires_tf

pytestmark = [requires_tf, pytest.mark.tf]

HOLD = """
import sys, tensorflow as tf
a = tf.constant([[1.5, 2.0, 3.0]]); b = tf.zeros([8, 1]); c = tf.range(100, dtype=tf.int64); d = tf.constant(7)
n = 123456789
print(id(a), id(b), id(c), id(d), id(n), flush=True)
sys.stdin.read()
"""


def test_eager_tensors_read_from_a_live_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin"})
    try:
        assert proc.stdout is not None
        ids = [int(x) for x in proc.stdout.readline().split()]
        reader = EagerTensors(InputsReader(Memory(proc.pid)))
        got = [reader.tensor(obj) for obj in ids[:4]]
        with pytest.raises(Unread, match="no TensorHandle"):
            reader.tensor(ids[4])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
    assert got == [{"dtype": "float32", "shape": [1, 3], "values": [1.5, 2.0, 3.0]},
                   {"dtype": "float32", "shape": [8, 1], "values": [0.0] * 8},
                   {"dtype": "int64", "shape": [100]},
                   {"dtype": "int32", "shape": [], "values": [7]}]
