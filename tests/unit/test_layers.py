"""The package's layers, which may import which, no import cycles, no private names across modules.

The rule, as ``docs/architecture.md`` draws it (lowest first): ``core`` (readers of
memory and files, the model) < ``sources`` (memory, registers and mapped files of a
process) and ``toolchain`` (ELF/DWARF facts, Bazel, the doctor) < ``gdb`` (driving gdb) <
``snapshot`` (the one snapshot path and its policy) < ``corefile`` (core files); beside them
``analysis`` (from a capture to the event users read: op attribution, verdicts, triage) and
``output`` (renderers of the model), which import the core alone; then ``attach`` (the
session) < ``watch`` < ``cli``, which join the three stages.  ``errors`` and ``files``
are shared by all; ``inject`` runs inside the target and imports nothing of ours.

Capture (``sources``, ``gdb``, ``snapshot``, ``corefile``: ``CAPTURE``) imports neither analysis nor rendering;
analysis imports no rendering, no ``cli``, no ``attach``; rendering imports only the model (``MODEL``), each
older exception named in ``OUTPUT_DEBT``.

``tfnative/core`` is also imported inside gdb's embedded Python (by
``gdb_scripts/tfnative_gdb``), where neither click nor psutil nor tfnative's
other layers may be importable: it must stand on the standard library alone.
"""

import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "tfnative")
SHARED = {"tfnative", "tfnative.errors", "tfnative.files", "tfnative.progress"}
# Beside the core, what gdb's Python may import of ours: the text renderer and the analysis that marks frames for it
# (tf-bt marks its capture as tfnative's reports are marked), which stand on the standard library alone.
GDB_SCRIPTS_MAY_USE = {"tfnative.output.render", "tfnative.analysis.frames"}
# Which layers a layer may import (itself and the shared modules always).
MAY_IMPORT = {
    "core": set(),
    "sources": {"core"},
    "toolchain": {"core"},
    "gdb": {"core", "sources", "toolchain"},
    "analysis": {"core"},
    "output": {"core"},  # and of the core only the model: test_rendering_imports_only_the_model
    "snapshot": {"core", "sources", "toolchain", "gdb"},
    "corefile": {"core", "sources", "toolchain", "gdb", "snapshot"},
    "attach": {"core", "sources", "toolchain", "gdb", "analysis", "output", "snapshot"},
    "watch": {"core", "sources", "toolchain", "gdb", "analysis", "output", "snapshot", "attach"},
    "cli": {"core", "sources", "toolchain", "gdb", "analysis", "output", "snapshot", "corefile", "attach", "watch"},
    "inject": set(),
}
LAYERS = tuple(sorted(MAY_IMPORT))
# The capture stage: what gives a Capture (and the documents' facts of a process) and nothing else.
CAPTURE = ("sources", "gdb", "snapshot", "corefile")


def _all_modules():
    """(module, path) of every module of the package and of gdb_scripts/tfnative_gdb."""
    for top, prefix in ((PKG, "tfnative"), (os.path.join(ROOT, "gdb_scripts", "tfnative_gdb"), "tfnative_gdb")):
        for d, _, files in os.walk(top):
            if "__pycache__" in d:
                continue
            rel = os.path.relpath(d, top)
            pkg = prefix if rel == "." else prefix + "." + rel.replace(os.sep, ".")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield (pkg if name == "__init__.py" else "%s.%s" % (pkg, name[:-3])), os.path.join(d, name)


MODULES = dict(_all_modules())


def _modules(layer):
    return sorted((m, p) for m, p in MODULES.items()
                  if m == "tfnative." + layer or m.startswith("tfnative.%s." % layer))


def _imports(mod, path, private=False):
    """The modules of ours that ``mod`` imports anywhere in its text (function-level imports too), resolved to
    absolute names; with ``private``, (module, name) of each private name it imports from another module."""
    pkg = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
    out, names = set(), []
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in ("tfnative", "tfnative_gdb"):
                continue
            for alias in node.names:
                full = "%s.%s" % (target, alias.name)
                if full in MODULES:
                    out.add(full)
                else:
                    out.add(target)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        names.append((target, alias.name))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] in ("tfnative", "tfnative_gdb"))
    return names if private else out


def _layer(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tfnative" and parts[1] in MAY_IMPORT else None


def test_every_module_lives_in_a_layer():
    """The package's top level holds only what every layer shares."""
    top = sorted(n[:-3] for n in os.listdir(PKG) if n.endswith(".py"))
    assert top == ["__init__", "__main__", "errors", "files", "progress"]
    assert sorted(n for n in os.listdir(PKG) if os.path.isdir(os.path.join(PKG, n)) and n != "__pycache__") == sorted(
        LAYERS)


def test_each_layer_imports_only_the_layers_below_it():
    bad = []
    for mod in sorted(MODULES):
        layer = _layer(mod)
        if layer is None:
            continue
        for used in _imports(mod, MODULES[mod]):
            other = _layer(used)
            if used in SHARED or used == "tfnative.__main__" or other == layer or other in MAY_IMPORT[layer]:
                continue
            if layer == "gdb" and used == "tfnative_gdb":  # gdb's side of tfnative, sourced into gdb (gdbinit.py)
                continue
            bad.append("%s (%s) imports %s" % (mod, layer, used))
    assert bad == []


# The model, as the renderers may read it: its classes, and pure functions of them that decide nothing.  Not
# ``core.frameclass`` (which frame is glue, the user's, TensorFlow's: analysis decides it and marks the frames,
# ``analysis/frames.py``), nor any reader.  Beside the model's classes (``model``; the merged tree's, ``treemodel``
# and ``rankset``: its members as rank sets and their ranges as text), the text of a model's value: ``elide``'s
# ``elided_text`` (an elided frame's line) and ``kstate``'s ``text`` (a thread's kernel state).
MODEL = {"tfnative.core.model", "tfnative.core.treemodel", "tfnative.core.rankset", "tfnative.core.elide",
         "tfnative.core.kstate"}
# What of those the renderers use (a name of the model no renderer reads any more leaves the list).
MODEL_USES = {"tfnative.core.elide": {"elided_text"}, "tfnative.core.kstate": {"text"}}
# Renderers that still read more than the model (known debt, issue #35): (module, what it imports).  None now:
# a debt taken on again is listed here, with its reason.
OUTPUT_DEBT: set = set()


def test_rendering_imports_only_the_model():
    """``output`` renders the model: of the layers below, it imports the model alone (and no capture, no
    analysis, no ``core.frameclass``: which frame is glue, the user's or TensorFlow's is analysis's to say); what
    still reads more is listed in ``OUTPUT_DEBT``, and a listed debt paid off leaves it."""
    assert "tfnative.core.frameclass" not in MODEL
    found = {(m, u) for m, p in _modules("output") for u in _imports(m, p)
             if u not in SHARED and _layer(u) not in (None, "output") and u not in MODEL}
    assert found - OUTPUT_DEBT == set()
    assert OUTPUT_DEBT - found == set()


def _names_used(module, path):
    """(module, name) of every name ``path`` imports from a module of ours, or reads as ``alias.name`` of one."""
    tree = ast.parse(open(path).read())
    pkg = module.rsplit(".", 1)[0]
    out, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            base = node.module if not node.level else ".".join(pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                                                               + [node.module])
            for a in node.names:
                if "%s.%s" % (base, a.name) in MODULES:
                    aliases[a.asname or a.name] = "%s.%s" % (base, a.name)
                else:
                    out.add((base, a.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            out.add((aliases[node.value.id], node.attr))
    return out


def test_rendering_reads_of_the_core_only_its_text_of_values():
    """Of the modules in ``MODEL`` beyond the model's classes, the renderers use only the text of a value
    (``MODEL_USES``), nothing that decides."""
    used = {}
    for m, p in _modules("output"):
        for module, name in _names_used(m, p):
            if module in MODEL_USES:
                used.setdefault(module, set()).add(name)
    assert used == MODEL_USES


_RE_CALLS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}
# Function names of each kind analysis tells apart: the interpreter's glue, an abort's frames, TensorFlow's own,
# its landmarks, the standard library's, the user's.  A pattern a renderer holds must match none of them.
FUNCTION_NAMES = (
    "_PyEval_Vector", "cfunction_call.lto_priv.0", "PyObject_Call", "raise", "__GI_raise", "abort", "pthread_kill",
    "__pthread_kill_implementation", "__assert_fail", "__GI___assert_fail", "malloc_printerr",
    "absl::lts_20250814::log_internal::LogMessage::Flush()", "tsl::internal::LogMessageFatal::~LogMessageFatal()",
    "google::LogMessage::Fail()", "std::terminate()", "__gnu_cxx::__verbose_terminate_handler()", "__cxa_throw",
    "TF_NewSession", "TFE_Execute", "tensorflow::MatMulOp<Eigen::ThreadPoolDevice, float>::Compute("
    "tensorflow::OpKernelContext*)", "tensorflow::ThreadPoolDevice::Compute(tensorflow::OpKernel*, "
    "tensorflow::OpKernelContext*)", "Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::WorkerLoop(int)",
    "std::vector<float, std::allocator<float> >::_M_range_check(unsigned long) const", "start_thread", "clone3",
    "futex_wait", "main", "my_kernel_helper")
# The patterns and names of ``output`` that read like function names but decide nothing about a frame, each with
# why: (module, pattern or name) -> reason.
NOT_ABOUT_FRAMES = {
    ("tfnative.output.fit", r"\b(?:lts_\d+|__cxx11|__1)::"):
        "compact_cpp shortens any C++ name for the terminal (an ABI namespace left out): text, it marks nothing",
    ("tfnative.output.report", r"^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$"):
        "whether an exception's type can be written after --break-throw in the hint: the hint's words",
    ("tfnative.output.report", "__cxa_throw"):
        "no throw hint where the user's own --break locations already stop at the throw: their words, not a frame",
}


def _patterns(path):
    """(pattern, line) of every regular expression ``path`` passes to ``re`` as a literal, and of every ``from re
    import`` (a pattern out of sight: None)."""
    out = []
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom) and node.module == "re":
            out.append((None, node.lineno))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RE_CALLS
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
            arg = node.args[0] if node.args else None
            out.append((arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None,
                        node.lineno))
    return out


def _over_function_names(pattern):
    """Whether a pattern reads function names: it names a C++ scope (``::``), or finds a function's name."""
    import re

    if pattern is None or "::" in pattern:
        return True
    compiled = re.compile(pattern)
    return any(compiled.search(name) for name in FUNCTION_NAMES)


def _names_table(text, names):
    """Whether a string is a function's name, or a table of them (``\"\"\"raise abort ...\"\"\".split()``): most of
    its words are names."""
    words = text.split()
    known = sum(w in names for w in words)
    return text in names or (known >= 2 and 2 * known >= len(words))


def test_rendering_holds_no_pattern_over_function_names():
    """Which frame is glue, TensorFlow's, a landmark, part of an abort is analysis's (``analysis/frames.py``): no
    renderer holds a regular expression that reads function names, nor a name or a table of them (but
    ``NOT_ABOUT_FRAMES``, which decide nothing about a frame).  The check is real: it finds analysis's own
    patterns and tables."""
    from tfnative.core import frameclass

    names = set(FUNCTION_NAMES) | frameclass.GLUE_EXACT

    def found(layer):
        out = set()
        for m, p in _modules(layer):
            out |= {(m, pat) for pat, _ in _patterns(p) if _over_function_names(pat)}
            out |= {(m, node.value) for node in ast.walk(ast.parse(open(p).read()))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _names_table(node.value, names)}
        return out

    assert found("output") == set(NOT_ABOUT_FRAMES)
    held = {m for m, _ in found("analysis")}
    assert "tfnative.analysis.frames" in held  # the abort's patterns and tables, found by the same check


def test_capture_imports_neither_analysis_nor_rendering():
    """Capture imports no analysis and no rendering: ``sources``, ``gdb``, ``snapshot`` and ``corefile`` (and the
    core and toolchain below them) give a Capture; the event users read is ``analysis``'s, its text ``output``'s,
    and the command's driver in ``cli`` (or ``attach``, ``watch``) joins them.  Imports inside functions count."""
    assert set(CAPTURE) | {"core", "toolchain"} <= set(MAY_IMPORT)
    bad = ["%s imports %s" % (m, u) for layer in CAPTURE + ("core", "toolchain")
           for m, p in _modules(layer) for u in _imports(m, p) if _layer(u) in ("analysis", "output")]
    assert bad == []


def test_capture_layers_may_import_only_capture_layers():
    """The rule in ``MAY_IMPORT`` itself: no capture layer is allowed analysis or rendering."""
    allowed = {layer: MAY_IMPORT[layer] & {"analysis", "output", "attach", "watch", "cli"} for layer in CAPTURE}
    assert allowed == {layer: set() for layer in CAPTURE}


def test_analysis_imports_no_rendering_cli_or_attach():
    bad = ["%s imports %s" % (m, u) for m, p in _modules("analysis") for u in _imports(m, p)
           if _layer(u) in ("output", "cli", "attach", "snapshot", "corefile", "gdb", "sources")]
    assert bad == []


def test_shared_modules_import_no_layer():
    bad = ["%s imports %s" % (m, u) for m in ("tfnative.errors", "tfnative.files", "tfnative.progress")
           for u in _imports(m, MODULES[m]) if u not in SHARED]
    assert bad == []


def test_gdbs_python_imports_only_the_core():
    """gdb_scripts/tfnative_gdb runs inside gdb: of tfnative, only the core (and the shared modules)."""
    bad = []
    for mod, path in MODULES.items():
        if mod.startswith("tfnative_gdb"):
            bad += ["%s imports %s" % (mod, u) for u in _imports(mod, path)
                    if u.startswith("tfnative.") and u not in SHARED | GDB_SCRIPTS_MAY_USE and _layer(u) != "core"]
    assert bad == []


def test_no_import_cycles():
    """Between modules, counting imports inside functions: a cycle hidden by a lazy import is still a cycle.
    A package's ``__init__`` counts as the package's own docstring only, so it is left out."""
    graph = {m: {u for u in _imports(m, p) if u in MODULES and u != m and not MODULES[u].endswith("__init__.py")}
             for m, p in MODULES.items() if not p.endswith("__init__.py")}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_no_private_name_crosses_a_module():
    bad = ["%s imports %s.%s" % (m, t, n) for m, p in sorted(MODULES.items()) for t, n in _imports(m, p, True)]
    assert bad == []


def test_no_private_attribute_of_another_module():
    """``module._name`` reaches into another module's privates just as an import of it does."""
    bad = []
    for mod, path in sorted(MODULES.items()):
        tree = ast.parse(open(path).read())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                aliases.update(a.asname or a.name for a in node.names if "%s.%s" % (node.module, a.name) in MODULES
                               or node.level)
            elif isinstance(node, ast.Import):
                aliases.update((a.asname or a.name).split(".")[0] for a in node.names)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append("%s uses %s.%s" % (mod, node.value.id, node.attr))
    assert bad == []


def test_core_imports_with_the_standard_library_alone():
    """As in gdb's Python: no site-packages (no click, psutil, pygdbmi), only tfnative's directory."""
    mods = [m for m, _ in _modules("core")] + sorted(GDB_SCRIPTS_MAY_USE)
    code = ("import sys; sys.path.insert(0, %r)\n"
            "for m in %r: __import__(m)\n"
            "bad = sorted(m for m in ('click', 'psutil', 'pygdbmi', 'gdb') if m in sys.modules)\n"
            "print(len(%r), bad)" % (ROOT, mods, mods))
    r = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(len(mods)), "[]"]


# --- No module over 600 lines: one concept a module (issue #43) ---

MAX_LINES = 600
# The modules still over ``MAX_LINES``, each left to the branch that splits it, with why it is long.  The list can
# only shrink: a module split below the bound leaves it (the test fails while it is still listed).
OVER_MAX_LINES = {
}


def test_no_module_is_over_600_lines():
    """No module of ``tfnative/`` or ``gdb_scripts/`` is over ``MAX_LINES`` lines, but those in ``OVER_MAX_LINES``;
    each of those still is (a module split below the bound leaves the list)."""
    lines = {}
    for path in MODULES.values():
        with open(path) as f:
            lines[os.path.relpath(path, ROOT)] = sum(1 for _ in f)
    scripts = os.path.join(ROOT, "gdb_scripts")
    for d, dirs, files in os.walk(scripts):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(d, name)) as f:
                    lines[os.path.relpath(os.path.join(d, name), ROOT)] = sum(1 for _ in f)
    assert "tfnative/core/binary/cfi.py" in lines and "gdb_scripts/tfnative_gdb/capture.py" in lines
    over = {path for path, n in lines.items() if n > MAX_LINES}
    assert over - set(OVER_MAX_LINES) == set(), {p: lines[p] for p in over - set(OVER_MAX_LINES)}
    assert set(OVER_MAX_LINES) - over == set(), "split below %d lines: leave OVER_MAX_LINES" % MAX_LINES


# ptrace(2) requests that act on a tracee (not the constants alone): what "makes ptrace requests" means here.
_PTRACE_REQUESTS = re.compile(r"\bPTRACE_(SEIZE|INTERRUPT|CONT|DETACH|GETREGS|SETREGS|LISTEN|GETSIGINFO|GETEVENTMSG|"
                              r"ATTACH|PEEKDATA|POKEDATA)\b")


def _makes_ptrace_requests(path):
    """Whether a module calls ptrace with a request: a call whose first argument names a PTRACE_ request, or a
    call of ``ptrace_call`` (libc's ptrace(2))."""
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Call) and node.args:
            first = node.args[0]
            name = first.id if isinstance(first, ast.Name) else first.attr if isinstance(first, ast.Attribute) else ""
            if _PTRACE_REQUESTS.fullmatch(name):
                return True
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "ptrace_call":
            return True  # libc's ptrace(2) taken to be called with a request of the module's own
    return False


def test_one_ptrace_engine():
    """Only ``sources/ptrace.py`` makes ptrace requests (``stack``'s hold and the crash catcher's continuous seize
    alike: #43), and ``docs/architecture.md``'s "Known debt" names no second engine."""
    engines = sorted(os.path.relpath(p, PKG) for m, p in MODULES.items() if m.startswith("tfnative.")
                     and _makes_ptrace_requests(p))
    assert engines == ["sources/ptrace.py"], engines
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    debt = text.split("## Known debt", 1)[1].split("\n## ", 1)[0]
    assert not [p for p in debt.split("\n- ") if p.startswith("**ptrace**")], "the ptrace item is paid: drop it"
