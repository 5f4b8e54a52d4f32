// The C++ program the breakpoint transcript is recorded on (record.py): one name, two overloads.
__attribute__((noinline)) int overloaded(int x) { return x + 1; }
__attribute__((noinline)) double overloaded(double x) { return x * 2; }

int main() { return overloaded(1) + static_cast<int>(overloaded(2.0)) - 6; }
