"""pytest's fixtures for every test (helpers are in ``tests/utils.py``)."""

import os
import signal

import pytest

from . import installed

_TFNATIVE = ("?", "?")  # (mode, where it is imported from): pytest_configure's


def pytest_configure(config):
    """Before any test module imports tfnative: the installed wheel of this checkout, made current where it is not
    (``tests/installed.py``); a session whose tfnative cannot be made so ends here, with one line."""
    global _TFNATIVE
    try:
        _TFNATIVE = installed.prepare()
    except RuntimeError as exc:
        pytest.exit("tests: %s" % exc, returncode=4)


def pytest_report_header(config):
    mode, where = _TFNATIVE
    return "tfnative: %s (%s)" % (where, "the installed wheel" if mode == "installed" else
                                  "the checkout's files: TFNATIVE_TESTS_FROM_SOURCE")

# The tests send SIGINT (a terminal's Ctrl-C) to the programs they start.  Run as a background job, a non-interactive
# shell starts pytest with SIGINT ignored, and an ignored signal stays ignored across exec in every child: Python's
# own handler here makes each child start with SIGINT at its default, as it would from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    """``--fuzz-minutes N``: run the fuzz suite (tests/fuzz) for about N minutes with a random seed (default: CI's
    fixed seed and short budget; ``TFNATIVE_FUZZ_MINUTES`` does the same)."""
    parser.addoption("--fuzz-minutes", default=None, metavar="N",
                     help="tests/fuzz: generated input for about N minutes, random seed (default: CI's short run)")


@pytest.fixture(scope="session", autouse=True)
def _autograph_leftovers():
    """Every TensorFlow process a test kills (SIGKILL, a crash, a core) skips TensorFlow's atexit, which
    deletes AutoGraph's generated files in the temporary directory: those of this session go at its end."""
    import glob
    import tempfile

    pattern = os.path.join(tempfile.gettempdir(), "__autograph_generated_file*.py")
    before = set(glob.glob(pattern))
    yield
    for path in set(glob.glob(pattern)) - before:
        try:
            os.unlink(path)
        except OSError:
            pass


@pytest.fixture
def autograph_files():
    """A segfault skips TensorFlow's atexit, which deletes AutoGraph's generated files: clean them up."""
    import glob
    import tempfile

    pattern = os.path.join(tempfile.gettempdir(), "__autograph_generated_file*.py")
    before = set(glob.glob(pattern))
    yield
    for path in set(glob.glob(pattern)) - before:
        os.unlink(path)
