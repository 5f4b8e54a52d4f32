"""CPython's structures in a target's memory: frames, layouts, objects, line tables, the GIL, the merge of native
and Python frames, AutoGraph's converted code (pure; the standard library alone)."""
