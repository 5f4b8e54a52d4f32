import json
import os
import sys

json.dump(
    {
        "argv": sys.argv,
        "path0": sys.path[0],
        "main_file": __file__,
        "name": __name__,
        "cwd": os.getcwd(),
        "env": os.environ.get("TFNATIVE_TEST_VAR"),
        "stdin": sys.stdin.readline().strip(),
        "spec": repr(globals().get("__spec__")),
        "all_env": dict(os.environ),
    },
    sys.stdout,
)
sys.stdout.write("\n")
sys.stderr.write("to-stderr\n")
