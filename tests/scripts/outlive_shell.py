"""Outlives the shell that started it in the background, then says which signals it saw."""
import os
import signal
import sys
import time

seen = []
for sig in (signal.SIGCONT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
    signal.signal(sig, lambda s, _f: seen.append(signal.Signals(s).name))
open(sys.argv[1] + ".started", "w").close()
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    f.write("pid %d pgid %d signals %s\n" % (os.getpid(), os.getpgid(0), ",".join(seen) or "none"))
