"""The package's layers, as a newcomer reads them in the tree, and what gdb's Python needs of the core.

``tfnative/core`` is imported inside gdb's embedded Python (by
``gdb_scripts/tfnative_gdb``), where neither click nor psutil nor tfnative's
other layers may be importable: it must stand on the standard library alone.
"""

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "tfnative")
LAYERS = ("attach", "cli", "core", "output", "sources", "toolchain")
# What a core module may import of tfnative besides the core itself.
CORE_MAY_USE = {"tfnative.errors", "tfnative.files"}


def _modules(layer):
    d = os.path.join(PKG, layer)
    for name in sorted(os.listdir(d)):
        if name.endswith(".py"):
            mod = "tfnative.%s" % layer if name == "__init__.py" else "tfnative.%s.%s" % (layer, name[:-3])
            yield mod, os.path.join(d, name)


def _tfnative_imports(mod, path):
    """The tfnative modules (or packages) a module imports, resolved to absolute names."""
    pkg = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tfnative":
                continue
            for alias in node.names:
                full = "%s.%s" % (target, alias.name)
                is_mod = os.path.exists(os.path.join(ROOT, *full.split(".")) + ".py") or os.path.isdir(
                    os.path.join(ROOT, *full.split(".")))
                out.add(full if is_mod else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "tfnative")
    return out


def test_every_module_lives_in_a_layer():
    """The package's top level holds only the snapshot path, its stack modes (many processes, a Slurm job)
    and what every layer shares."""
    top = sorted(n[:-3] for n in os.listdir(PKG) if n.endswith(".py"))
    assert top == ["__init__", "__main__", "errors", "files", "multistack", "samples", "slurm", "snapshot"]
    assert sorted(n for n in os.listdir(PKG) if os.path.isdir(os.path.join(PKG, n)) and n != "__pycache__") == sorted(
        LAYERS + ("inject",))


def test_core_imports_only_the_core():
    bad = []
    for mod, path in _modules("core"):
        for used in _tfnative_imports(mod, path):
            if not (used == "tfnative.core" or used.startswith("tfnative.core.") or used in CORE_MAY_USE):
                bad.append("%s imports %s" % (mod, used))
    assert bad == []


def test_only_the_entry_point_imports_the_cli():
    bad = []
    for layer in LAYERS:
        if layer == "cli":
            continue
        for mod, path in _modules(layer):
            bad += ["%s imports %s" % (mod, u) for u in _tfnative_imports(mod, path) if u.startswith("tfnative.cli")]
    assert bad == []


def test_core_imports_with_the_standard_library_alone():
    """As in gdb's Python: no site-packages (no click, psutil, pygdbmi), only tfnative's directory."""
    mods = [m for m, _ in _modules("core")] + ["tfnative.output.render", "tfnative.output.elide"]
    code = ("import sys; sys.path.insert(0, %r)\n"
            "for m in %r: __import__(m)\n"
            "bad = sorted(m for m in ('click', 'psutil', 'pygdbmi', 'gdb') if m in sys.modules)\n"
            "print(len(%r), bad)" % (ROOT, mods, mods))
    r = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(len(mods)), "[]"]


def test_sources_do_not_import_the_snapshot_path():
    """A source gives memory, registers and mapped files (``sources/base.py``); the snapshot path reads them."""
    bad = []
    for mod, path in _modules("sources"):
        bad += ["%s imports %s" % (mod, u) for u in _tfnative_imports(mod, path) if u == "tfnative.snapshot.pipeline"]
    assert bad == []
