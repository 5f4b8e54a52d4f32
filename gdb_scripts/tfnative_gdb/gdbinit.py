# Sourced by gdb (by tfnative, or by gdb_scripts/tf-bt.py): loads this
# package without touching gdb's sys.path and registers its commands.
import importlib.util
import os
import sys

_dir = os.path.dirname(os.path.abspath(__file__))


def _load(name: str, init: str) -> None:
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[os.path.dirname(init)])
    if spec is None or spec.loader is None:  # a .py file always has both
        raise ImportError("cannot load %s from %s" % (name, init))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)


if "tfnative" not in sys.modules:
    # The pure core (tfnative.core, analysis.frames, output.render) beside this package: in the
    # source tree it is ../../tfnative, in an installed tree ../tfnative.
    for _root in (os.path.dirname(_dir), os.path.dirname(os.path.dirname(_dir))):
        _init = os.path.join(_root, "tfnative", "__init__.py")
        if os.path.exists(_init):
            _load("tfnative", _init)
            break

if "tfnative_gdb" not in sys.modules:
    _load("tfnative_gdb", os.path.join(_dir, "__init__.py"))

import tfnative_gdb.commands  # noqa: E402

if not getattr(tfnative_gdb.commands, "_registered", False):
    tfnative_gdb.commands.register()
    tfnative_gdb.commands._registered = True
