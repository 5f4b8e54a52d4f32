/* A C library for gil_mutex.py: a static pthread mutex, a function that holds it while it calls back into
   Python (which needs the GIL), and one that takes it (called through ctypes.PyDLL: with the GIL held). */
#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
volatile int mutex_held = 0;

extern "C" void update_table(void (*callback)(void)) {
    pthread_mutex_lock(&table_mutex);
    mutex_held = 1;
    usleep(500 * 1000);   /* the GIL holder reaches lock_table() meanwhile */
    callback();           /* a ctypes callback: waits for the GIL */
    mutex_held = 0;
    pthread_mutex_unlock(&table_mutex);
}

extern "C" void lock_table(void) {
    pthread_mutex_lock(&table_mutex);
    pthread_mutex_unlock(&table_mutex);
}
