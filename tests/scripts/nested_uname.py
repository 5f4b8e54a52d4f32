import os
import sys


def leaf():
    return os.uname()  # the breakpoint on uname() fires here


def middle():
    return leaf()


class Runner:
    def run(self):
        return middle()


if __name__ == "__main__":
    Runner().run()
    print("done", sys.argv[1:])
