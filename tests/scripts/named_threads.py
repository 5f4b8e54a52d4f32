"""Named Python threads blocked at known lines, with locals of several types (for thread names, --locals).

argv: READY_FILE.  Starts "loader-1" and "trainer" threads, writes READY_FILE, and waits for ever.
"""
import os
import sys
import threading

stop = threading.Event()


def load(batch_index, *paths, **options):
    shard = "train-%05d" % batch_index
    sizes = [128, 256, 512, 1024, 2048]
    ratio = 0.25
    done = None
    stop.wait()  # LOADER_LINE
    return shard, sizes, ratio, done, paths, options


def train(step):
    flags = {"a": 1, "b": 2}
    pair = (step, b"xy")
    active = True
    stop.wait()  # TRAINER_LINE
    return flags, pair, active


def main():
    threading.Thread(target=load, name="loader-1", args=(41, "a.tfrecord"), kwargs={"cycle": 2}, daemon=True).start()
    threading.Thread(target=train, name="trainer", args=(7,), daemon=True).start()
    while threading.active_count() < 3:
        pass
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    stop.wait()  # MAIN_LINE


if __name__ == "__main__":
    main()
