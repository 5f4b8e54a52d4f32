# Sourced by gdb (by tfnative, or by gdb_scripts/tf-bt.py): loads this
# package without touching gdb's sys.path and registers its commands.
import importlib.util
import os
import sys

if "tfnative_gdb" not in sys.modules:
    _dir = os.path.dirname(os.path.abspath(__file__))
    _spec = importlib.util.spec_from_file_location(
        "tfnative_gdb", os.path.join(_dir, "__init__.py"), submodule_search_locations=[_dir]
    )
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["tfnative_gdb"] = _mod
    _spec.loader.exec_module(_mod)

import tfnative_gdb.commands  # noqa: E402

if not getattr(tfnative_gdb.commands, "_registered", False):
    tfnative_gdb.commands.register()
    tfnative_gdb.commands._registered = True
