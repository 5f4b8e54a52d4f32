"""Which (Python, TensorFlow) pair the checks of ``test_pair.py`` run on, and how tfnative is run there.

``tests/matrix/run`` sets ``TFNATIVE_PAIR`` (the pair's name) and ``TFNATIVE_PAIR_PYTHON`` (its venv's python).
Without them (the README's test command, CI) the checks run on CI's pairs, ``pairs.CI_PAIRS`` (the oldest and the
newest), each from its venv in the cache; a venv that is not ready fails its checks under ``CI`` (``.ci/setup``
provisions both) and skips them elsewhere, naming the command that provisions it.

tfnative runs from the pair's venv (``<venv>/bin/tfnative``) where it is installed there from this checkout, as a
user who installs it beside TensorFlow would run it; else from the checkout's ``.venv`` with ``--python``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import List, Optional

import pytest

from . import pairs


@dataclass
class Pair:
    name: str
    python: str  # the venv's interpreter: it runs every target program
    tensorflow: Optional[str]  # the version the pair names (None: a plain-Python pair)
    tfnative: List[str]  # the command that runs tfnative
    own_tfnative: bool  # tfnative runs from the pair's venv (else: --python is passed where it matters)

    def run(self, args: List[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
        """``tfnative ARGS`` (tfnative's own cwd is the checkout), output captured."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.tfnative + args, capture_output=True, text=True, timeout=timeout,
                              cwd=kw.pop("cwd", pairs.ROOT), **kw)

    def python_option(self) -> List[str]:
        """``--python PYTHON`` where tfnative does not run from the pair's venv (attach, doctor)."""
        return [] if self.own_tfnative else ["--python", self.python]


def _pair_names() -> List[str]:
    name = os.environ.get("TFNATIVE_PAIR")
    return [name] if name else list(pairs.CI_PAIRS)


@pytest.fixture(scope="session", params=_pair_names())
def pair(request: pytest.FixtureRequest) -> Pair:
    name = request.param
    try:
        _py, tf = pairs.parse(name)
    except pairs.PairError as e:
        pytest.fail("TFNATIVE_PAIR: %s" % e, pytrace=False)
    python = os.environ.get("TFNATIVE_PAIR_PYTHON")
    if not python:
        missing = pairs.ci_pair_missing(name)
        if missing:
            if os.environ.get("CI"):
                pytest.fail("CI must provision the pairs it runs (.ci/setup): " + missing, pytrace=False)
            pytest.skip(missing)
        venv = pairs.find_venv(name)
        assert venv is not None
        python = os.path.join(venv, "bin", "python")
    venv = os.path.dirname(os.path.dirname(python))
    if venv.startswith(pairs.cache_dir() + os.sep) and pairs.tfnative_differs(venv) is not None:
        # the checkout changed since the pair was provisioned: its wheel again, as tests/installed.py does for .venv
        try:
            pairs.install_wheel(venv)
        except pairs.PairError as e:
            pytest.fail(str(e), pytrace=False)
    own = pairs.tfnative_from(venv)
    if own:
        cmd = [own]
    else:
        main = os.path.join(pairs.ROOT, ".venv", "bin", "tfnative")
        if not os.path.exists(main):
            pytest.fail("no tfnative to run: neither %s nor %s is installed from %s" % (
                os.path.join(venv, "bin", "tfnative"), main, pairs.ROOT), pytrace=False)
        cmd = [main]
    return Pair(name=name, python=python, tensorflow=tf, tfnative=cmd, own_tfnative=bool(own))


@pytest.fixture(scope="session")
def tf_pair(pair: Pair) -> Pair:
    """The pair, for the TensorFlow checks: they skip on a plain-Python pair."""
    if pair.tensorflow is None:
        pytest.skip("%s is a plain-Python pair: no TensorFlow in it%s" % (
            pair.name, " (%s)" % pairs.WHY_NO_TF[pair.name] if pair.name in pairs.WHY_NO_TF else ""))
    return pair
