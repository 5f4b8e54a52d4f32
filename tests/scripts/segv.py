import ctypes


def poke():
    ctypes.string_at(0)  # SIGSEGV in strlen


def main():
    poke()


main()
