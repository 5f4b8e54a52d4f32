"""Where the TensorFlow that an interpreter would import lives, found without importing it.

Used by ``--break-op`` (the op types of the installed TensorFlow), the doctor
and the bug report.  Starts the interpreter once with ``find_spec``: importing
TensorFlow would take seconds.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from typing import Dict, List, Optional, cast

from ..errors import TfnativeError


def tensorflow_package_dirs(python: str, env: Optional[Dict[str, str]] = None) -> List[str]:
    """The package directories of the TensorFlow ``python`` would import (without importing it); [] if none."""
    code = ("import importlib.util, json; s = importlib.util.find_spec('tensorflow'); "
            "print(json.dumps(list(s.submodule_search_locations or []) if s else []))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL, env=env)
    except OSError as exc:
        raise TfnativeError("cannot run --python %s: %s" % (python, exc.strerror or exc))
    except subprocess.TimeoutExpired:
        raise TfnativeError("--python %s took over 60 s to look for tensorflow" % python)
    try:
        dirs = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (ValueError, IndexError):
        dirs = None
    if dirs is None:
        raise TfnativeError("--python %s failed: %s" % (python, (out.stderr.strip().splitlines() or ["?"])[-1]))
    return cast(List[str], dirs)  # the JSON list the code above prints


def tensorflow_libraries(python: str, every: bool = False) -> List[str]:
    """The shared objects of the TensorFlow that ``python`` would import (without importing it)."""
    dirs = tensorflow_package_dirs(python)
    if not dirs:
        raise TfnativeError("tensorflow is not importable by %s: pass the libraries as PATH..." % python)
    found: List[str] = []
    seen = set()
    for d in dirs:
        pats = ["*.so*"] + (["**/*.so"] if every else ["python/lib_pywrap_tensorflow*.so",
                                                        "python/_pywrap_tensorflow_internal.so"])
        for pat in pats:
            for p in sorted(glob.glob(os.path.join(d, pat), recursive=True)):
                real = os.path.realpath(p)
                if os.path.isfile(p) and real not in seen and not p.endswith((".py", ".pyc")):
                    seen.add(real)
                    found.append(p)
    if not found:
        raise TfnativeError("no shared objects under %s" % ", ".join(dirs))
    return found
