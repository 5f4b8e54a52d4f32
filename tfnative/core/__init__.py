"""The pure core: readers of ELF files, call-frame information, ``/proc``, CPython and TensorFlow structures.

Nothing here starts gdb, and importing a module starts no process: every
reader takes its target's memory as a ``memory.Memory`` (any source), so the
same code runs in tfnative's own process and inside gdb's embedded Python.
"""
