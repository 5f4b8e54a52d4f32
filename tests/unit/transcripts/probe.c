/* The C program the MI transcripts are recorded on (record.py): one mode per run. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int probe_hit(int n) {
    __asm__ volatile("" ::: "memory");
    return n + 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit";
    probe_hit(1);
    if (!strcmp(mode, "segv")) {
        volatile int *p = 0;
        *p = 1;
    }
    if (!strcmp(mode, "child")) {
        pid_t c = fork();
        if (c == 0)
            _exit(0);
        waitpid(c, 0, 0);
        return 3;
    }
    if (!strcmp(mode, "signal") && argc > 2)
        raise(atoi(argv[2]));
    return 0;
}
