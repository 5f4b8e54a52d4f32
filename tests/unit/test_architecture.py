"""docs/architecture.md is the one map of the code: every module is on it, every file it names exists,
and no other page carries a copy of the map."""

import ast
import builtins
import functools
import io
import os
import re
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "architecture.md")
PATH_RE = re.compile(r"`((?:tfnative|gdb_scripts|tests)/[\w/.-]+\.py)`")


@functools.cache
def _modules():
    return tuple(_walk_modules())


def _walk_modules():
    for top in ("tfnative", os.path.join("gdb_scripts", "tfnative_gdb")):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            if "__pycache__" in d:
                continue
            for name in files:
                if name.endswith(".py") and not (name == "__init__.py" and d != os.path.join(ROOT, "tfnative")):
                    yield os.path.relpath(os.path.join(d, name), ROOT)


def test_every_module_is_on_the_map():
    text = open(DOC).read()
    missing = sorted(m for m in _modules() if "`%s`" % m not in text and m != "tfnative/__init__.py")
    assert missing == []


def test_every_file_the_map_names_exists():
    named = set(PATH_RE.findall(open(DOC).read()))
    assert named and sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p))) == []


def test_no_other_page_copies_the_map():
    """A file map is a table row per module; only architecture.md has one (the README links to it)."""
    for page in ["README.md", "CONTRIBUTING.md"] + ["docs/" + n for n in os.listdir(os.path.join(ROOT, "docs"))
                                                    if n.endswith(".md") and n != "architecture.md"]:
        path = os.path.join(ROOT, page)
        if not os.path.exists(path):
            continue
        rows = [ln for ln in open(path) if re.match(r"\| `tfnative/[\w/]+\.py`", ln)]
        assert rows == [], page


# --- What the map says of the code is true of it (read with ast, nothing imported, no process started) ---

PACKAGE_DIRS = ("tfnative", os.path.join("gdb_scripts", "tfnative_gdb"))
# Names the map cites that are not ours: C, the kernel's, CPython's and TensorFlow's.
NOT_OURS = {"_Py_DebugOffsets", "PTRACE_SEIZE", "PTRACE_INTERRUPT", "PR_SET_PDEATHSIG", "PR_SET_PTRACER", "RLock",
            "OpKernel", "co_linetable", "process_vm_readv", "what()", "SIGINT", "SIGTERM",
            "NSpid"}
IDENT = r"[A-Za-z_]\w*"
# core/model.Capture, files.write_output
QUALIFIED_RE = re.compile(r"^((?:[a-z_]+/)*[a-z_]+)\.(%s)(?:\(.*\))?$" % IDENT)
MEMBER_RE = re.compile(r"^([A-Z]\w*)\.(%s)(?:\(.*\))?$" % IDENT)  # Session.STOPS, Document.to_json
CALL_RE = re.compile(r"^(%s)\(\)$" % IDENT)  # run_command()
NAME_RE = re.compile(r"^(?:[A-Z][a-z]\w*[A-Z]\w*|[A-Z][a-z]+|[a-z]+_\w+|_\w+|[A-Z]\w*[a-z]\w*)$")  # ours by shape
FROM_RE = re.compile(r"`(%s)` (?:from|in) `([\w/]+\.py)`" % IDENT)  # "`GdbOptions` from `gdb/options.py`"


def _path_of(cited: str) -> "str | None":
    """The file a cited module path (``snapshot/pipeline``, ``errors``, ``pipeline``) or file is."""
    name = cited if cited.endswith((".py", ".html")) else cited + ".py"
    for base in ("", "tfnative", os.path.join("gdb_scripts", "tfnative_gdb")):
        if os.path.isfile(os.path.join(ROOT, base, name)):
            return os.path.join(base, name)
    if "/" not in name:  # a module's bare name: the one module of the package by that name
        found = [m for m in _modules() if os.path.basename(m) == name]
        if len(found) == 1:
            return found[0]
    return None


@functools.cache
def _tree(path: str) -> ast.Module:
    """A file's syntax tree (``path`` relative to the repository, or absolute), parsed once per session."""
    return ast.parse(open(os.path.join(ROOT, path)).read(), path)


def _bound(body: "list[ast.stmt]") -> "set[str]":
    """The names a module or class body binds: defs, classes, assignments, imports (and under if/try)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _bound(node.body) | _bound(node.orelse)
            for h in getattr(node, "handlers", []):
                names |= _bound(h.body)
    return names


def _defined(body: "list[ast.stmt]") -> "set[str]":
    """The names a module body defines itself (an import is not a definition)."""
    return _bound([n for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))])


@functools.cache
def _classes() -> "dict[str, list[tuple[str, ast.ClassDef]]]":
    out: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for m in _modules():
        for node in _tree(m).body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append((m, node))
    return out


def _everything_defined() -> "set[str]":
    names = set()
    for m in _modules():
        for node in ast.walk(_tree(m)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
        names |= _defined(_tree(m).body)
    return names


def _cited(text: str) -> "list[str]":
    return [c for c in re.findall(r"`([^`\n]+)`", text)]


def _wrong_citation(cited: str, classes: "dict[str, list[tuple[str, ast.ClassDef]]]", anywhere: "set[str]",
                    row_module: "str | None") -> "str | None":
    """Why a citation is not true of the code (None when it is, or when it is no name of ours)."""
    if cited in NOT_OURS or " " in cited or cited.startswith(("-", "/", ".", "*")):
        return None
    if "/" in cited and os.path.exists(os.path.join(ROOT, cited)):  # a file of the repository: build/tfnative.bazelrc
        return None
    if re.match(r"^tfnative(_gdb)?(\.\w+)+$", cited):  # a dotted module: tfnative.core
        parts = cited.split(".")
        base = os.path.join(ROOT, *(["gdb_scripts"] if parts[0] == "tfnative_gdb" else []), *parts)
        return None if os.path.isdir(base) or os.path.isfile(base + ".py") else "no module %s" % cited
    if re.match(r"^[\w/.-]+\.(py|html)$", cited) or cited.endswith("/"):
        exists = _path_of(cited) if not cited.endswith("/") else os.path.isdir(os.path.join(ROOT, cited)) or \
            os.path.isdir(os.path.join(ROOT, "tfnative", cited))
        return None if exists else "no such file or folder"
    m = MEMBER_RE.match(cited)
    if m:
        where = classes.get(m.group(1), [])
        if len(where) != 1:
            return "class %s is defined %d times" % (m.group(1), len(where))
        return None if m.group(2) in _bound(where[0][1].body) else "%s has no member %s" % (where[0][0], m.group(2))
    m = QUALIFIED_RE.match(cited)
    if m and m.group(1) not in sys.stdlib_module_names:
        path = _path_of(m.group(1))
        if path is None:
            return "no module %s" % m.group(1)
        return None if m.group(2) in _defined(_tree(path).body) else "%s defines no %s" % (path, m.group(2))
    m = CALL_RE.match(cited)
    name = m.group(1) if m else cited
    if not re.match("^%s$" % IDENT, name) or not NAME_RE.match(name):
        return None  # a command, an option, a word: not a name of our code
    if row_module is not None:
        here = _tree(row_module)
        members = {n for c in here.body if isinstance(c, ast.ClassDef) for n in _bound(c.body)}
        return None if name in _bound(here.body) | members else "%s neither defines nor imports %s" % (row_module,
                                                                                                       name)
    return None if name in anywhere else "defined nowhere in the package"


def test_every_name_the_map_cites_is_defined_where_it_says():
    """``module.name``, ``Class.member``, ``name()`` and a file map row's names are defined where the map says;
    a name "from" a module's file names the module that defines it."""
    classes, anywhere = _classes(), _everything_defined()
    wrong = []
    for line in open(DOC):
        row = re.match(r"^\| `((?:tfnative|gdb_scripts)/[\w/.-]+\.py)`(?:, `[\w/.-]+`)* \| (.*) \|$", line.strip())
        row_module = row.group(1) if row and len(re.findall(r"\.py`", line.split("|")[1])) == 1 else None
        for cited in _cited(row.group(2) if row else line):
            why = _wrong_citation(cited, classes, anywhere, row_module)
            if why:
                wrong.append("`%s`: %s" % (cited, why))
        for name, path in FROM_RE.findall(line):
            where = _path_of(path)
            if where is None or name not in _defined(_tree(where).body):
                wrong.append("`%s` is not defined in `%s`" % (name, path))
    assert wrong == []


def _exception_classes() -> "dict[str, str]":
    """{name: module} of every exception type the package defines (a class whose bases reach an exception)."""
    bases = {name: {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
             for name, defs in _classes().items() for _m, node in defs}
    known = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
             and issubclass(getattr(builtins, n), BaseException)}

    def is_exception(name: str, seen: "frozenset[str]" = frozenset()) -> bool:
        if name in known:
            return True
        return name not in seen and any(is_exception(b, seen | {name}) for b in bases.get(name, ()))
    return {name: defs[0][0] for name, defs in _classes().items() if is_exception(name)}


def test_every_exception_type_is_on_the_map_where_it_is_defined():
    """Each exception type is named in its own module's row of the file map (and nowhere else as its home)."""
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w/.-]+\.py)` \| (.*) \|$", open(DOC).read(), re.M)}
    found = _exception_classes()
    assert {"TfnativeError", "ElfError", "CfiError"} <= set(found)  # the search finds what it looks for
    misplaced = sorted("%s (%s)" % (name, module) for name, module in found.items()
                       if "`%s`" % name not in rows.get(module, ""))
    assert misplaced == []
    for module, concept in rows.items():
        for name in re.findall(r"`(\w+)`", concept):
            if name in found:
                assert found[name] == module, "%s is defined in %s, not %s" % (name, found[name], module)


# --- No docstring or comment names a module or a page's section that is gone ---

SCANNED = ("tfnative", "gdb_scripts", "tests")
# File names that docstrings and comments mention and that are not ours, each for a reason:
NOT_OUR_FILES = {
    "app.py", "train.py", "worker.py", "gen.py",  # the user's script in examples of what tfnative prints
    "basename.py",  # a placeholder: "basename.py:LINE"
    "_ops.py", "execute.py", "gen_audio_ops.py",  # TensorFlow's generated wrappers and eager/execute.py
    "popen_fork.py", "python-gdb.py",  # CPython's (multiprocessing's fork, gdb's CPython helpers)
}
# A path's first folder that says it is ours: a mention under one of these must be a file of the repository.
OUR_FOLDERS = {"tfnative", "gdb_scripts", "tests", "bench", "docs", "tfnative_gdb", "examples", "build"} | {
    d for d in os.listdir(os.path.join(ROOT, "tfnative")) if os.path.isdir(os.path.join(ROOT, "tfnative", d))}
MODULE_MENTION_RE = re.compile(r"(?<![\w/.~-])((?:[\w.-]+/)*)(\w[\w-]*\.py)\b")
SECTION_RE = re.compile(r"\(?((?:docs/)?[\w-]+\.md|README)(?:'s)?,?\s+[\"“']([^\"”']+)[\"”'](?:\s+section)?", re.S)
ANCHOR_RE = re.compile(r"((?:\.\./|docs/)?[\w-]+\.md)#([\w-]+)")


def _scanned_files():
    for top in SCANNED:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            yield from (os.path.join(d, f) for f in files if f.endswith(".py"))


@functools.cache
def _docstrings_and_comments(path: str):
    """(line, text) of every comment and docstring of a Python file."""
    src = open(path).read()
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(src).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(_tree(os.path.relpath(path, ROOT))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return tuple(out)


def _repo_files():
    out = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in ("__pycache__", "site")]
        out.extend(os.path.relpath(os.path.join(d, f), ROOT) for f in files)
    return out


def test_no_docstring_or_comment_names_a_module_that_does_not_exist():
    files = _repo_files()
    names = {os.path.basename(f) for f in files}
    assert "snapshot.py" not in names and "pipeline.py" in names  # the stale names this test was written for
    gone = []
    for path in _scanned_files():
        for line, text in _docstrings_and_comments(path):
            for m in MODULE_MENTION_RE.finditer(text):
                folders, name = m.group(1), m.group(2)
                if folders:
                    if folders.split("/")[0] not in OUR_FOLDERS:
                        continue  # tensorflow/python/..., eager/...: not ours
                    ok = any(f == folders + name or f.endswith("/" + folders + name) for f in files)
                else:
                    ok = name in names or name in NOT_OUR_FILES
                if not ok:
                    gone.append("%s:%d: %s" % (os.path.relpath(path, ROOT), line, folders + name))
    assert gone == []


@functools.cache
def _headings(page: str):
    return tuple(re.sub(r"`", "", h).strip() for h in re.findall(r"^#{1,6} (.*)$", open(page).read(), re.M))


def _slug(heading: str) -> str:
    """As Markdown's table of contents makes an anchor (mkdocs' ``toc`` and GitHub agree on these headings)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def _page(cited: str, where: str) -> "str | None":
    """The file a cited page is: README, README.md, docs/x.md, ../CONTRIBUTING.md, or x.md beside ``where``."""
    if cited == "README":
        cited = "README.md"
    for base in (os.path.dirname(where), ROOT, os.path.join(ROOT, "docs")):
        path = os.path.normpath(os.path.join(base, cited))
        if os.path.isfile(path):
            return path
    return None


def test_every_section_of_a_page_that_code_and_docs_cite_exists():
    """A page and a quoted section after it (the README or a page of docs/, then the section's title in quotes)
    and a page's anchor name a section that is there."""
    cited = []
    for path in _scanned_files():
        cited.extend((path, line, text) for line, text in _docstrings_and_comments(path))
    for page in ["README.md", "CONTRIBUTING.md"] + ["docs/" + n for n in os.listdir(os.path.join(ROOT, "docs"))
                                                    if n.endswith(".md")]:
        cited.append((os.path.join(ROOT, page), 0, open(os.path.join(ROOT, page)).read()))
    missing = []
    for path, line, text in cited:
        where = "%s:%d" % (os.path.relpath(path, ROOT), line)
        for page, section in SECTION_RE.findall(text):
            target = _page(page, path)
            section = " ".join(section.split())
            if target is None or not any(h.startswith(section) for h in _headings(target)):
                missing.append('%s: %s has no section "%s"' % (where, page, section))
        for page, anchor in ANCHOR_RE.findall(text):
            target = _page(page, path)
            if target is None or anchor not in {_slug(h) for h in _headings(target)}:
                missing.append("%s: %s#%s" % (where, page, anchor))
    assert missing == []


# --- The user's pages speak the user's language ---

# CPython's internals a user never types: they belong on the design page.
INTERNALS_RE = re.compile(r"_PyRuntime\b|_Py_DebugOffsets|\bPyInterpreterState\b|\bPyThreadState\b")
HOST_PATH_RE = re.compile(r"(?<![\w~.])/(?:root|home/\w+|work)/")


def _user_pages() -> "list[str]":
    """The pages under the site's "Commands" and "Guides" (mkdocs.yml's nav)."""
    nav = open(os.path.join(ROOT, "mkdocs.yml")).read().split("\nnav:", 1)[1]
    pages, inside = [], False
    for line in nav.splitlines():
        head = re.match(r"^  - ([^:]+):\s*$", line)
        if head:
            inside = head.group(1) in ("Commands", "Guides")
        elif inside:
            m = re.match(r"^      - .*: ([\w-]+\.md)$", line)
            if m:
                pages.append(m.group(1))
    return pages


def test_user_pages_name_no_module_of_ours_no_interpreter_struct_and_no_host_path():
    """How tfnative works (its modules, CPython's structs) is on architecture.md and design.md; the user's pages
    say what the user sees and what it means, with no path of the machine they were written on."""
    pages = _user_pages()
    assert "hangs.md" in pages and "attach.md" in pages and "design.md" not in pages
    modules = {m for m in _modules()} | {m.split("/", 1)[1] for m in _modules() if m.startswith("tfnative/")}
    bare = {os.path.basename(m) for m in _modules() if m.startswith("tfnative/")} - {"__init__.py", "__main__.py"}
    found = []
    for page in pages:
        text = open(os.path.join(ROOT, "docs", page)).read()
        text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)  # output: as printed
        for m in re.finditer(r"`([^`]+)`", text):  # a code span may cross a line
            if m.group(1) in modules or m.group(1) in bare:
                found.append("%s:%d: `%s`" % (page, text.count("\n", 0, m.start()) + 1, m.group(1)))
        for m in list(INTERNALS_RE.finditer(text)) + list(HOST_PATH_RE.finditer(text)):
            found.append("%s:%d: %s" % (page, text.count("\n", 0, m.start()) + 1, m.group(0)))
    assert found == [], "\n".join(found)


# Dotted names that are not a module path: a file name.
NOT_MODULE_PATHS = {"tfnative.bazelrc"}  # build/tfnative.bazelrc, the generated Bazel configuration


def _resolve_dotted(dotted: str) -> "str | None":
    """Why a dotted name of ours (a module path, then maybe a name and a member) names nothing (None: it names a
    module, a package or a definition)."""
    parts = dotted.split(".")
    base = os.path.join(ROOT, "gdb_scripts") if parts[0] == "tfnative_gdb" else ROOT
    i = len(parts)
    while i and not (os.path.isdir(os.path.join(base, *parts[:i])) or os.path.isfile(os.path.join(base, *parts[:i])
                                                                                       + ".py")):
        i -= 1
    if i == 0:
        return "no module"
    rest = parts[i:]
    if not rest:
        return None
    module = os.path.join(base, *parts[:i])
    module = module + ".py" if os.path.isfile(module + ".py") else os.path.join(module, "__init__.py")
    tree = _tree(os.path.relpath(module, ROOT))
    if rest[0] not in _bound(tree.body):
        return "%s binds no %s" % (".".join(parts[:i]), rest[0])
    cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == rest[0]]
    if len(rest) > 1 and cls and rest[1] not in _bound(cls[0].body):
        return "%s has no member %s" % (rest[0], rest[1])
    return None


def test_no_docstring_or_comment_names_a_dotted_name_of_ours_that_does_not_exist():
    """``tfnative.core.memory.Memory``, ``tfnative_gdb.capture.GdbMemory``: each module and name is there."""
    assert _resolve_dotted("tfnative.gdbmi.Gdb") is not None  # the name this test was written for
    assert _resolve_dotted("tfnative.gdb.mi.Gdb") is None
    wrong = []
    for path in _scanned_files():
        for line, text in _docstrings_and_comments(path):
            for m in re.finditer(r"(?<![\w.])(tfnative(?:_gdb)?(?:\.\w+)+)", text):
                why = None if m.group(1) in NOT_MODULE_PATHS else _resolve_dotted(m.group(1))
                if why:
                    wrong.append("%s:%d: %s: %s" % (os.path.relpath(path, ROOT), line, m.group(1), why))
    assert wrong == [], "\n".join(wrong)


# The stage of each layer on a route (drivers: ``cli/``, and ``watch/``'s session loop and reports, which call
# the stages as ``cli/`` does); a route's files come in this order.
_ROUTE_STAGE = {"cli": 0, "watch": 0, "snapshot": 1, "sources": 1, "gdb": 1, "corefile": 1, "analysis": 2,
                "output": 3}


def _routes():
    text = open(DOC).read()
    section = text.split("## Three routes", 1)[1].split("\n## ", 1)[0]
    routes = {}
    for item in re.split(r"\n- ", section)[1:]:
        name = re.match(r"`(tfnative [^`]+)`", item)
        assert name is not None, item
        routes[name.group(1)] = re.findall(r"`([\w/]+\.py)`", item)
    return routes


def test_each_route_is_drawn_in_at_most_ten_files_in_the_stages_order():
    """The map's "Three routes": ``stack --pid``, ``core`` and ``watch --pid``, each in at most ten files that
    exist, from its driver through capture and analysis to rendering, never back (a watch's driver files
    aside: its loop reads and judges, then its report captures, analyses and renders)."""
    routes = _routes()
    assert sorted(routes) == ["tfnative core", "tfnative stack --pid", "tfnative watch --pid"]
    for name, files in routes.items():
        assert 3 <= len(files) <= 10, (name, files)
        for f in files:
            assert os.path.exists(os.path.join(ROOT, "tfnative", f)), (name, f)
        stages = [_ROUTE_STAGE[f.split("/")[0]] for f in files if f.split("/")[0] in _ROUTE_STAGE]
        assert stages[0] == 0 and stages[-1] == 3, (name, files)
        report = stages[max(i for i, s in enumerate(stages) if s == 0):]  # from the last driver file on
        assert report == sorted(report) and {1, 2, 3} <= set(stages), (name, files)


MAX_PARAMETERS = 8


def test_no_function_takes_more_than_8_parameters():
    """Options go down as objects (``WatchOptions``, ``WatchTarget``, ``Plugins``, ``AttachOptions``,
    ``StackOptions``...); only a click command itself takes each option as a parameter."""
    files = [m for m in _modules() if m.endswith(".py")]
    over = []
    for path in files:
        tree = ast.parse(open(os.path.join(ROOT, path)).read())
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "command" for d in node.decorator_list):
                continue  # the click command: one parameter per option
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            count = len(names) - (1 if names and names[0] in ("self", "cls") else 0)
            if count > MAX_PARAMETERS:
                over.append("%s: %s (%d)" % (path, node.name, count))
    assert over == []


def _debt_items():
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    debt = text.split("## Known debt", 1)[1].split("\n## ", 1)[0]
    return {p.split("**", 2)[1] for p in debt.split("\n- ")[1:]}


def test_known_debt_lists_what_still_lives_twice_and_nothing_else():
    """Each item of the map's "Known debt" is there while what it says is so (checked on the code itself), and
    an item whose debt is paid leaves the list."""
    import typing

    from tfnative.core import model

    event, capture = typing.get_type_hints(model.Event), typing.get_type_hints(model.Capture)
    with open(os.path.join(ROOT, "tfnative", "core", "threads.py")) as f:
        threads_reads_proc = "NSpid" in f.read()
    real = {
        "`/proc`": threads_reads_proc,  # a second reader of /proc's text beside core/procfs.py
        "An op": event["op"] != typing.Optional[model.Op],  # the event's op not the model's Op
        "The event's threads": event["threads"] == capture["threads"],  # no thread type of the event's own
    }
    assert _debt_items() == {item for item, still in real.items() if still}
