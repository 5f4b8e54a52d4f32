"""C++ names: a breakpoint location parsed into scopes and parameters, the Itanium runs its mangled name must
contain, a demangled name split into its qualified name and parameters; demangling through one ``c++filt``
process per batch (binutils' demangler, as gdb uses), its answers cached for the process's life."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Dict, List, Optional, Sequence, Tuple


def without_spaces(s: str) -> str:
    """``s`` with its white space removed: how a query and a demangled name are compared."""
    return re.sub(r"\s+", "", s)


def strip_templates(s: str) -> str:
    """``s`` without its template arguments (``operator<`` and its kin kept)."""
    out = []
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if s.startswith("operator", i):  # operator<, operator<<, operator-> ...
            m = re.match(r"operator(<<=|>>=|<<|>>|<=>|<=|>=|->\*|->|<|>|\(\)|\[\])?", s[i:])
            assert m is not None
            if depth == 0:
                out.append(m.group(0))
            i += len(m.group(0))
            continue
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out)


def _split_top(s: str, sep: str = "::") -> List[str]:
    """Split on ``sep`` outside <...> and (...)."""
    parts: List[str] = []
    cur: List[str] = []
    depth = i = 0
    while i < len(s):
        c = s[i]
        if c in "<(":
            depth += 1
        elif c in ">)" and depth:
            depth -= 1
        if depth == 0 and s.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def parse_cxx_name(location: str) -> Optional[Tuple[List[str], Optional[str]]]:
    """``a::b<T>::c(int)`` -> (["a", "b<T>", "c"], "int"); params None when there is no "(...)"."""
    s = location.strip()
    params: Optional[str] = None
    # the parameter list: the first "(" at template depth 0 that is not operator()
    depth = 0
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif c == "(" and depth == 0 and not s[:i].endswith("operator"):
            close = s.rfind(")")
            if close < i:
                return None
            params = s[i + 1:close]
            s = s[:i]
            break
    scopes = [p.strip() for p in _split_top(s)]
    if not scopes or any(not p for p in scopes):
        return None
    return scopes, params


def mangled_runs(scopes: List[str], split: bool = False) -> List[str]:
    """Itanium ``<len><id>`` runs that the mangled name must contain ("10tensorflow16ThreadPoolDevice")."""
    runs: List[str] = []
    cur = ""
    for sc in scopes:
        m = re.fullmatch(r"([A-Za-z_]\w*)(<.*>)?", sc)
        if m is None or sc.startswith("operator") or sc.startswith("~"):
            if cur:
                runs.append(cur)
            cur = ""
            continue
        ident = m.group(1)
        if ident == "std" and not cur:  # std:: is "St", never "3std"
            cur = "St"
            continue
        cur += f"{len(ident)}{ident}"
        if m.group(2) or split:  # template args break the run
            runs.append(cur)
            cur = ""
    if cur:
        runs.append(cur)
    return [r for r in runs if r != "St"]


def split_demangled(d: str) -> Optional[Tuple[str, str]]:
    """``ret ns::f<...>(int, char) const`` -> ("ns::f<...>" or "ret ns::f<...>", "int, char")."""
    s = d.strip()
    # drop trailing qualifiers and ABI tags
    while True:
        m = re.search(r"(\s+(const|volatile|&&|&|noexcept)|\[abi:[^\]]*\])$", s)
        if not m:
            break
        s = s[: m.start()]
    if not s.endswith(")"):
        return None
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                qual = s[:i]
                if qual.endswith("operator"):  # "operator()(...)": keep looking
                    continue
                # a template function's demangled name starts with its return type
                parts = _split_top(qual, " ")
                if len(parts) > 1:
                    qual = parts[-1]
                return qual, s[i + 1:-1]
    return None


_CXXFILT: Optional[str] = None


_DEMANGLED: Dict[str, str] = {}


def demangle(names: Sequence[str]) -> List[str]:
    """Demangle C++ names (binutils' ``c++filt``, libiberty's demangler, as gdb uses).

    Names seen before come from a cache, C names (not ``_Z...``) come back as
    they are, and the rest go to one ``c++filt`` process for the whole batch.
    A name ``c++filt`` cannot demangle, or every name when it is missing,
    comes back unchanged.
    """
    global _CXXFILT
    names = list(names)
    todo = sorted({n for n in names if n not in _DEMANGLED and n.startswith("_Z") and "\n" not in n})
    if todo:
        if _CXXFILT is None:
            _CXXFILT = shutil.which("c++filt") or ""
        out: List[str] = []
        if _CXXFILT:
            try:
                proc = subprocess.run([_CXXFILT], input="\n".join(todo) + "\n", capture_output=True, text=True,
                                      timeout=120, check=True)
                out = proc.stdout.split("\n")
            except (OSError, subprocess.SubprocessError):
                out = []
        if len(out) < len(todo):
            out = todo  # no demangler: the names as they are, not cached, so a later call may still demangle
        else:
            _DEMANGLED.update(zip(todo, out))
    return [_DEMANGLED.get(n, n) for n in names]


def display_names(names: Sequence[str]) -> List[str]:
    """Demangled names as a reader knows them: glibc's versioned aliases lose their version.

    ``pthread_cond_wait@@GLIBC_2.3.2`` -> ``pthread_cond_wait``; a C++ name
    keeps any ``@`` inside its parameter list.
    """
    return [n.split("@", 1)[0] if "@" in n and "(" not in n else n for n in demangle(names)]
