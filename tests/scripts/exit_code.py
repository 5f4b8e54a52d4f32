import sys

print("argv", sys.argv)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
