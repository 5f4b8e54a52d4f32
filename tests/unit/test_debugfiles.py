"""Separate debug files by build-id: the system's root, then the one under the file's own prefix."""

from __future__ import annotations

import os

from tfnative.core.binary.debugfiles import DEBUG_ROOT, debug_roots, separate_debug_file

BUILD_ID = "cccda113240f3ba4c016991793a62dc0cfe01613"


def _root(tmp_path):
    """A private root as ``.ci/pythons`` unpacks one: the interpreter, a library, and the -dbg file."""
    usr = tmp_path / "cpython" / "usr"
    for d in ("bin", "lib/x86_64-linux-gnu", "lib/debug/.build-id/cc"):
        (usr / d).mkdir(parents=True)
    (usr / "bin" / "python3.14").write_bytes(b"\x7fELF")
    (usr / "lib" / "x86_64-linux-gnu" / "libpython3.14.so.1.0").write_bytes(b"\x7fELF")
    debug = usr / "lib" / "debug" / ".build-id" / "cc" / (BUILD_ID[2:] + ".debug")
    debug.write_bytes(b"\x7fELF")
    return usr, str(debug)


def test_the_interpreters_own_prefix_is_searched_after_the_system(tmp_path):
    usr, debug = _root(tmp_path)
    for path in (usr / "bin" / "python3.14", usr / "lib" / "x86_64-linux-gnu" / "libpython3.14.so.1.0"):
        assert debug_roots(str(path)) == [DEBUG_ROOT, str(usr / "lib" / "debug" / ".build-id")]
        assert separate_debug_file(str(path), BUILD_ID) == debug


def test_a_symlink_is_followed_to_the_file_and_nothing_is_made_up(tmp_path):
    usr, debug = _root(tmp_path)
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(usr / "bin" / "python3.14", venv / "python")
    assert separate_debug_file(str(venv / "python"), BUILD_ID) == debug  # a venv's python is the root's
    assert separate_debug_file(str(usr / "bin" / "python3.14"), "ab" + BUILD_ID[2:]) is None
    assert separate_debug_file(str(tmp_path / "elsewhere" / "python3.14"), BUILD_ID) is None
    assert separate_debug_file(str(usr / "bin" / "python3.14"), "") is None
