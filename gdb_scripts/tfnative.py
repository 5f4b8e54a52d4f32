# Source this file in gdb to get tfnative's mixed Python + native stacks:
#
#     (gdb) source /path/to/gdb_scripts/tfnative.py
#     (gdb) tf-bt            # the selected thread
#     (gdb) tf-bt -a         # every thread
#
# It reads Python frames from memory, so it also works on an interpreter
# without debug info.  Nothing here changes gdb's settings.
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

import tfnative_gdb.commands  # noqa: E402

if not getattr(tfnative_gdb.commands, "_registered", False):
    tfnative_gdb.commands.register()
    tfnative_gdb.commands._registered = True
