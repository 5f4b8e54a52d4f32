"""The documentation site's generated parts (docs/hooks.py): every option of every command is on that command's
page, the benchmark page carries bench/results/ unchanged, every page is in the navigation, and the README's
test command is the one CI runs.  The strict build of the whole site is in .ci/run (and below, where MkDocs
is installed)."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import click
import pytest

from tfnative.cli import main

from ..installed import import_paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")


def _hooks():
    spec = importlib.util.spec_from_file_location("tfnative_docs_hooks", os.path.join(DOCS, "hooks.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hooks = _hooks()


def _page_of(name):
    """The page whose option marker names the command."""
    pages = [n for n in os.listdir(DOCS) if n.endswith(".md")
             and "<!-- options: %s -->" % name in open(os.path.join(DOCS, n)).read()]
    assert len(pages) == 1, (name, pages)
    return pages[0]


@pytest.mark.parametrize("name", sorted(main.list_commands(click.Context(main))))
def test_every_option_is_on_its_page(name):
    cmd = main.get_command(click.Context(main), name)
    rendered = hooks.render(open(os.path.join(DOCS, _page_of(name))).read())
    assert "<!-- options:" not in rendered
    for p in cmd.params:
        if isinstance(p, click.Option) and not p.hidden:
            for flag in p.opts + p.secondary_opts:
                assert "`%s`" % flag in rendered, (name, flag)
            if p.help:
                assert hooks._cell(p.help) in rendered, (name, p.opts)


def test_an_option_added_in_code_appears():
    """The reference is read from the command at build time: a new option needs no writing."""
    @click.command("demo")
    @click.option("--brand-new", metavar="N", type=int, default=3, help="A | pipe and <angle> *stars*.")
    def demo(brand_new):
        pass

    main.add_command(demo)
    try:
        table = hooks.options_table("demo")
    finally:
        del main.commands["demo"]
    row = [ln for ln in table.splitlines() if "`--brand-new`" in ln]
    assert row == ["| `--brand-new` | `N` (integer) | `3` | A \\| pipe and &lt;angle> \\*stars\\*. |"]


def test_no_machine_path_in_a_default():
    """--python's default is the running interpreter: the page names it, never this machine's path."""
    assert sys.executable not in hooks.options_table("attach")
    assert "the Python that runs tfnative" in hooks.options_table("doctor")


def test_benchmarks_carry_the_results_unchanged():
    """Each bench/results/*.md table is on the benchmark page exactly as the bench script wrote it (the mutation
    scores, bench/mutation.py's, on the testing page)."""
    page = hooks.render(open(os.path.join(DOCS, "benchmarks.md")).read())
    assert "<!-- include:" not in page
    page += hooks.render(open(os.path.join(DOCS, "testing.md")).read())
    for name in sorted(os.listdir(os.path.join(ROOT, "bench", "results"))):
        if not name.endswith(".md"):
            continue
        rows = [ln for ln in open(os.path.join(ROOT, "bench", "results", name)) if ln.startswith("| ")]
        assert rows, name
        for row in rows:
            assert row.rstrip("\n") in page, (name, row)


def test_every_page_is_in_the_navigation():
    nav = open(os.path.join(ROOT, "mkdocs.yml")).read()
    pages = sorted(n for n in os.listdir(DOCS) if n.endswith(".md"))
    assert [n for n in pages if not re.search(r":\s+%s\s*$" % re.escape(n), nav, re.M)] == []


def test_the_readme_stays_short_and_its_test_command_is_ci_s():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert len(readme.splitlines()) <= 300
    assert "/work/" not in readme
    last = [ln for ln in open(os.path.join(ROOT, ".ci", "run")).read().splitlines() if ln.strip()][-1]
    assert last.startswith("exec ")
    assert last[len("exec "):] in readme.splitlines()


def test_includes_point_links_at_site_pages():
    text = hooks.render("see [the map](../CONTRIBUTING.md) <!-- include: CONTRIBUTING.md -->")
    assert "](../CONTRIBUTING.md)" not in text and "](contributing.md)" in text
    assert "](docs/" not in text and "](architecture.md)" in text


@pytest.mark.skipif(shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None,
                    reason="MkDocs is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strict():
    """The build CI runs (.ci/run): broken links, anchors and pages missing from the navigation fail it."""
    out = tempfile.mkdtemp(prefix="tfnative-site-")
    try:
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
                   PYTHONPATH=os.pathsep.join(import_paths() + [ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(
                       os.pathsep))
        r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mkdocs"), "build", "--strict",
                            "-d", out], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        stack = open(os.path.join(out, "stack", "index.html")).read()
        assert "--no-pause" in stack and "option-reference" in stack
    finally:
        shutil.rmtree(out, ignore_errors=True)


# One build machine's paths, which a reader's machine would never show: root's home, this workplace's checkouts and
# worktrees, an absolute path into a checkout's venv or site-packages (shown as ~/... or .venv/...), pytest's and
# mkdtemp's temporary directories.
_MACHINE_PATH = re.compile(r"(?<![\w.~])(/root/|/work/|/tmp/pytest-of-|/tmp/tmp[a-z0-9_]{8}\b"
                           r"|/[^\s`'\"()\[\]]*/(\.venv|site-packages)/)")


def _pages():
    """Every page users read: the README, CONTRIBUTING, the CHANGELOG, docs/*.md and the results files the docs
    include."""
    paths = [os.path.join(ROOT, n) for n in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    for d in (DOCS, os.path.join(ROOT, "bench", "results")):
        paths += sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".md"))
    return paths


def test_pages_show_no_build_machines_paths():
    """What the docs show is what a user's machine would: ``~/...`` or the project's relative paths, never one
    machine's absolute path to its home, its checkout or its venv (issue #42: ``docs/doctor.md`` showed root's
    cache, ``docs/benchmarks.md`` a worktree, ``docs/kernels.md`` a checkout's venv)."""
    found = []
    for path in _pages():
        with open(path) as f:
            for n, line in enumerate(f, 1):
                for m in _MACHINE_PATH.finditer(line):
                    where = "%s:%d" % (os.path.relpath(path, ROOT), n)
                    found.append("%s: %s" % (where, line[max(0, m.start() - 30):m.end() + 30]))
    assert found == []


@pytest.mark.parametrize("line, bad", [
    ("/root/.cache/tfnative/ops/1/user_kern.so, op library", True),
    ("--baseline /work/wt-before --out", True),
    ("#20 [py] quick_execute at /work/main/.venv/lib/python3.11/site-packages/tensorflow/x.py:53", True),
    ("at /opt/app/venv/lib/python3.11/site-packages/tensorflow/x.py:53", True),
    ("at .venv/lib/python3.11/site-packages/tensorflow/x.py:53", False),
    ("at ~/project/.venv/lib/python3.11/site-packages/tfnative_gdb/gdbinit.py", False),
    ("reads the process through `/proc/PID/root`: its files", False),
    ("/proc/PID/root/usr/lib/x.so", False),
    ("tests/scripts/mwms_worker.py /tmp/mw2 2", False),
])
def test_the_machine_path_rule(line, bad):
    assert bool(_MACHINE_PATH.search(line)) is bad
