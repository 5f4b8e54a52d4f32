# Source this file in gdb to get tfnative's mixed Python + native stacks:
#
#     (gdb) source /path/to/gdb_scripts/tf-bt.py
#     (gdb) tf-bt            # the selected thread
#     (gdb) tf-bt -a         # every thread, Python ones first
#     (gdb) help tf-bt
#
# Python frames are read from memory, so it also works on an interpreter
# without debug info.  Nothing here changes gdb's settings or sys.path.
import os

_p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfnative_gdb", "gdbinit.py")
with open(_p) as _f:
    exec(compile(_f.read(), _p, "exec"), {"__file__": _p, "__name__": "__tfnative_gdbinit__"})
