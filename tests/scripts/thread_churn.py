"""Keeps starting short-lived threads (two starters), so a snapshot often catches one being born."""

import sys
import threading


def work():
    pass


def starter():
    while True:
        t = threading.Thread(target=work)
        t.start()
        t.join()


for _ in range(2):
    threading.Thread(target=starter, daemon=True).start()
with open(sys.argv[1], "w") as f:
    f.write("ready")
threading.Event().wait()
