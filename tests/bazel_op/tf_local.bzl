"""Expose an installed TensorFlow wheel (headers + libtensorflow_framework.so.2) to Bazel.

Set with --repo_env: TFN_TF_INCLUDE (tf.sysconfig.get_include()) and TFN_TF_LIB
(the path of libtensorflow_framework.so.2).
"""

_BUILD = """
cc_library(
    name = "tf",
    hdrs = glob(["include/**"], exclude = ["include/**/*.cc", "include/**/*.c", "include/**/*.py"]),
    srcs = ["libtensorflow_framework.so.2"],
    includes = ["include"],
    defines = ["_GLIBCXX_USE_CXX11_ABI=1", "EIGEN_MAX_ALIGN_BYTES=64"],
    visibility = ["//visibility:public"],
)
"""

def _tf_local_impl(ctx):
    inc = ctx.os.environ.get("TFN_TF_INCLUDE", "")
    lib = ctx.os.environ.get("TFN_TF_LIB", "")
    if not inc or not lib:
        fail("set --repo_env=TFN_TF_INCLUDE=... and --repo_env=TFN_TF_LIB=... (see tf.sysconfig)")
    ctx.symlink(inc, "include")
    ctx.symlink(lib, "libtensorflow_framework.so.2")
    ctx.file("WORKSPACE", "workspace(name = \"tf\")\n")
    ctx.file("BUILD", _BUILD)

tf_local = repository_rule(
    implementation = _tf_local_impl,
    environ = ["TFN_TF_INCLUDE", "TFN_TF_LIB"],
    local = True,
)
