"""Native code as files and memory hold it: ELF, DWARF, call-frame information, symbols and their caches, C++ names,
separate debug files, the vDSO and JIT code (pure; the standard library alone)."""
