"""The older-TensorFlow venvs (2.16-2.20) that ``test_old_tf.py`` and ``test_old_tf_verdict.py`` run on.

Under ``CI``: CI's pairs among them (``pairs.OLDEST``, TF 2.16.2 on CPython 3.11), which ``.ci/setup`` provisions;
a missing one fails its tests.  Elsewhere: every ready venv of the version matrix whose TensorFlow is older than
2.21; none ready skips them, naming the command that provisions the oldest pair.
"""

from __future__ import annotations

import os
from typing import List

import pytest

from ..matrix import pairs


def names() -> List[str]:
    """The pairs to parametrize over (a missing one is reported by :func:`python_of`, at run time)."""
    older = pairs.older_tf_pairs()
    if os.environ.get("CI"):
        return [n for n in pairs.CI_PAIRS if n in older]
    return [n for n in older if pairs.is_ready(pairs.venv_dir(n))] or [pairs.OLDEST]


def python_of(name: str) -> str:
    """The venv python of a pair; fails under CI, skips elsewhere, when its venv is not ready."""
    missing = pairs.ci_pair_missing(name)
    if missing:
        if os.environ.get("CI"):
            pytest.fail("CI must provision the pairs it runs (.ci/setup): " + missing, pytrace=False)
        pytest.skip("no TensorFlow 2.16-2.20 venv here: " + missing)
    venv = pairs.find_venv(name)
    assert venv is not None
    return os.path.join(venv, "bin", "python")
