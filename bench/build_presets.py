"""Build the custom op of tests/bazel_op with each tfnative preset; record build time and sizes.

    .venv/bin/python bench/build_presets.py            # prints the Markdown table
    .venv/bin/python bench/build_presets.py --write    # also writes bench/results/build_presets.md

Needs Debian's bazel-bootstrap (4.2) on PATH, gcc, and TensorFlow in this Python.
The same builder serves tests/test_bazel_custom_op.py.  Everything Bazel writes
goes under one --output_user_root that ``close()`` shuts down and deletes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OP_SRC = os.path.join(ROOT, "tests", "bazel_op")
STUBS = os.path.join(ROOT, "build", "stubs")
TARGET = "//ops:zero_out.so"
KERNEL_REGEX = "zero_out_kernel"

# (label, configs); split last: a later build in the same output dir would leave its .dwo stale
BUILDS: List[Tuple[str, Tuple[str, ...]]] = [
    ("plain -c opt", ()),
    ("tfn_symbols", ("tfn_symbols",)),
    ("tfn_lines", ("tfn_lines",)),
    ("tfn_targeted", ("tfn_targeted",)),
    ("tfn_dbg", ("tfn_dbg",)),
    ("tfn_index", ("tfn_symbols", "tfn_index")),
    ("tfn_compressed", ("tfn_symbols", "tfn_compressed")),
    ("tfn_dwarf64", ("tfn_symbols", "tfn_dwarf64")),
    ("tfn_split", ("tfn_split",)),
]


def _tf_paths(python: str) -> Tuple[str, str]:
    code = ("import os, tensorflow as tf; print(tf.sysconfig.get_include()); "
            "print(os.path.join(tf.sysconfig.get_lib(), 'libtensorflow_framework.so.2'))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, env=env)
    inc, lib = out.stdout.strip().splitlines()[-2:]
    return inc, lib


def _rmtree(path: str) -> None:
    def onerror(func, p, exc):  # Bazel leaves read-only directories behind
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


@dataclass
class Built:
    label: str
    configs: Tuple[str, ...]
    so: str
    seconds: float
    size: int
    dwp: Optional[str] = None
    extra: Dict[str, int] = field(default_factory=dict)


class OpBuilder:
    """One Bazel server and output base for all the preset builds of the op."""

    def __init__(self, base: str, python: str = sys.executable, bazel: str = "bazel") -> None:
        self.base = base
        self.python = python
        self.bazel = bazel
        self.workspace = os.path.join(base, "ws")
        self.user_root = os.path.join(base, "bazel_root")
        self.out = os.path.join(base, "out")
        shutil.copytree(OP_SRC, self.workspace, ignore=shutil.ignore_patterns("bazel-*", "__pycache__"))
        os.makedirs(self.out)
        rc = subprocess.run([python, "-m", "tfnative", "bazelrc"], capture_output=True, text=True, check=True)
        with open(os.path.join(self.workspace, "tfnative.bazelrc"), "w") as f:
            f.write(rc.stdout)
        targeted = subprocess.run([python, "-m", "tfnative", "bazelrc", "tfn_targeted", "--files", KERNEL_REGEX],
                                  capture_output=True, text=True, check=True, cwd=self.workspace)
        self.targeted_snippet = targeted.stdout
        with open(os.path.join(self.workspace, ".bazelrc.user"), "w") as f:
            f.write(targeted.stdout)
        inc, lib = _tf_paths(python)
        with open(os.path.join(self.workspace, ".bazelrc"), "w") as f:
            f.write("\n".join([
                "try-import %workspace%/tfnative.bazelrc",
                "try-import %workspace%/.bazelrc.user",
                "build --override_repository=rules_cc=%s" % os.path.join(STUBS, "rules_cc"),
                "build --override_repository=rules_java=%s" % os.path.join(STUBS, "rules_java"),
                "build --repo_env=TFN_TF_INCLUDE=%s" % inc,
                "build --repo_env=TFN_TF_LIB=%s" % lib,
                "build --spawn_strategy=local",
                "build --show_result=0",
                "",
            ]))
        self.built: Dict[str, Built] = {}

    def bazel_cmd(self, *args: str) -> List[str]:
        return [self.bazel, "--output_user_root=%s" % self.user_root, "--max_idle_secs=300", *args]

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        r = subprocess.run(self.bazel_cmd(*args), cwd=self.workspace, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError("bazel %s failed (%d):\n%s" % (" ".join(args), r.returncode, r.stderr[-4000:]))
        return r

    def output_path(self, flags: List[str]) -> str:
        r = self.run("info", *flags, "bazel-bin")
        return os.path.join(r.stdout.strip().splitlines()[-1], "ops", "zero_out.so")

    def build(self, label: str, configs: Tuple[str, ...]) -> Built:
        flags = ["--config=%s" % c for c in configs] or ["-c", "opt"]
        targets = [TARGET] + ([TARGET + ".dwp"] if "tfn_split" in configs else [])
        t0 = time.monotonic()
        self.run("build", *flags, *targets)
        seconds = time.monotonic() - t0
        src = self.output_path(flags)
        dest_dir = os.path.join(self.out, label.replace(" ", "_"))
        os.makedirs(dest_dir)
        dest = os.path.join(dest_dir, "zero_out.so")
        shutil.copyfile(src, dest)
        b = Built(label, configs, dest, seconds, os.path.getsize(dest))
        if os.path.exists(src + ".dwp"):
            b.dwp = os.path.join(dest_dir, "with_dwp", "zero_out.so")
            os.makedirs(os.path.dirname(b.dwp))
            shutil.copyfile(src, b.dwp)
            shutil.copyfile(src + ".dwp", b.dwp + ".dwp")
            b.extra["dwp_size"] = os.path.getsize(src + ".dwp")
        self.built[label] = b
        return b

    def build_all(self) -> Dict[str, Built]:
        for label, configs in BUILDS:
            self.build(label, configs)
        return self.built

    def close(self) -> None:
        if os.path.isdir(self.user_root):
            subprocess.run(self.bazel_cmd("shutdown"), cwd=self.workspace, capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        _rmtree(self.base)


def _doctor(python: str, path: str, source_dirs: List[str]) -> dict:
    args = [python, "-m", "tfnative", "doctor", "--json", path]
    for d in source_dirs:
        args += ["--source-dir", d]
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)[0]


def table(builder: OpBuilder) -> str:
    rows = ["| preset (configs) | build s | .so bytes | debug sections | CUs with DWARF | lines | locals | index |",
            "|---|---:|---:|---:|---|---|---|---|"]
    for label, configs in BUILDS:
        b = builder.built[label]
        d = _doctor(builder.python, b.so, [builder.workspace])
        cfg = " ".join("--config=%s" % c for c in configs) or "-c opt"
        extra = ""
        if b.extra.get("dwp_size"):
            extra = " (+ .dwp %d)" % b.extra["dwp_size"]
        files = ", ".join(os.path.basename(f) for f in d["dwarf_files"]) or "none"
        rows.append("| %s (`%s`) | %.1f | %d%s | %d | %s | %s | %s | %s |" % (
            label, cfg, b.seconds, b.size, extra, d["dwarf_size"], files,
            "yes" if d["can_see_lines"] else "no", "yes" if d["can_see_locals"] else "no", d["index"] or "-"))
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write bench/results/build_presets.md")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    if shutil.which("bazel") is None:
        print("bazel is not on PATH (apt-get install bazel-bootstrap)", file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix="tfnative-bench-")
    builder = OpBuilder(base, args.python)
    try:
        t0 = time.monotonic()
        builder.run("info", "output_base")
        startup = time.monotonic() - t0
        builder.build_all()
        text = "\n".join([
            "# Build presets on a small TensorFlow custom op",
            "",
            "`bench/build_presets.py`: the op of `tests/bazel_op` (one kernel file with TensorFlow headers, "
            "one plain C++ file), built in sequence in one Bazel server (`bazel-bootstrap` %s, gcc, "
            "`--spawn_strategy=local`), %d cores; Bazel server start %.1f s, not counted. The first row "
            "includes fetching the local repositories. Every row recompiles (the previous row used other "
            "compile flags). \"debug sections\": bytes of .debug_* once uncompressed."
            % (_bazel_version(builder), os.cpu_count() or 0, startup),
            "",
            table(builder),
            "",
        ])
        print(text)
        if args.write:
            os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
            with open(os.path.join(ROOT, "bench", "results", "build_presets.md"), "w") as f:
                f.write(text)
    finally:
        builder.close()
    return 0


def _bazel_version(builder: OpBuilder) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "bazel-bootstrap"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        out = ""
    return out or "?"


if __name__ == "__main__":
    sys.exit(main())
