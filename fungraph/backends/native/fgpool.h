/* fgpool.h: split a large region's loop across threads for fungraph's generated C code
 * (fungraph/backends/native). Reference: docs/native.md, "Threads".
 *
 * One pool per process: toolchain.py builds this header with FG_POOL_IMPLEMENTATION defined into
 * its own small shared object, loaded RTLD_GLOBAL before any region object, which then finds
 * fg_pool_parallel through a weak reference (without the pool, a region runs on one thread).
 *
 * fg_parallel(fn, args, n, chunk, threads) runs fn(args, lo, hi) over [0, n) in chunks of `chunk`.
 * The caller publishes the job to worker threads (started on first use, kept for the process)
 * and claims chunks itself from an atomic counter, as the workers do once they wake. It then
 * waits only for chunks a worker has claimed: on a loaded machine a worker that has not been
 * scheduled yet costs nothing, where an OpenMP region's closing barrier waits a whole scheduler
 * time slice for it. One caller at a time uses the pool; a concurrent caller (another Python
 * thread) runs its loop alone. A forked child starts without workers and starts its own.
 */
#ifndef FGPOOL_H
#define FGPOOL_H

#include <stdint.h>

typedef void (*fg_chunk_fn)(void *const *args, int64_t lo, int64_t hi);

#ifndef FG_POOL_IMPLEMENTATION

extern void fg_pool_parallel(fg_chunk_fn fn, void *const *args, int64_t n, int64_t chunk, int threads)
    __attribute__((weak));

__attribute__((unused)) static void fg_parallel(fg_chunk_fn fn, void *const *args, int64_t n, int64_t chunk,
                                                int threads) {
    if (fg_pool_parallel)
        fg_pool_parallel(fn, args, n, chunk, threads);
    else
        fn(args, 0, n);
}

#else

#include <pthread.h>
#include <sched.h>
#include <time.h>

/* The longest an idle worker polls for the next job before it sleeps: a region called again
 * soon (the next equation, the next step) finds it awake, as OpenMP's and XLA's workers are.
 * Each worker learns its window from the gaps between jobs: a job that arrives while it spins
 * keeps the window, one that arrives soon after it fell asleep sets the window to twice that
 * gap, and a window that expires with no job halves, so a worker whose jobs come rarely stops
 * taking a core from other work. */
#define FG_POOL_SPIN_MAX_NS 200000

typedef struct {
    fg_chunk_fn fn;
    void *const *args;
    int64_t n, chunk, chunks;
    int64_t next;     /* the next chunk to claim (atomic) */
    int64_t finished; /* chunks done (atomic) */
} fg__job;

static pthread_mutex_t fg__pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t fg__pool_busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fg__pool_wake = PTHREAD_COND_INITIALIZER;
static fg__job *fg__pool_job;        /* the published job, or NULL (under fg__pool_lock) */
static uint64_t fg__pool_generation; /* jobs published so far (written under fg__pool_lock) */
static int fg__pool_workers;         /* workers started (under fg__pool_lock) */
static int fg__pool_inside;          /* workers holding a pointer to the job (atomic) */
static int fg__pool_forkable;        /* the fork handler is registered */
static int fg__pool_backoff;         /* jobs to run alone after the last split one lost (under busy) */
static int fg__pool_alone;           /* of those, still to run alone (under fg__pool_busy) */

/* Run chunks of `job` until none is left to claim; how many this thread ran. */
static int64_t fg__run_chunks(fg__job *job) {
    for (int64_t ran = 0;; ran++) {
        int64_t c = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (c >= job->chunks)
            return ran;
        int64_t lo = c * job->chunk;
        int64_t hi = job->n - lo < job->chunk ? job->n : lo + job->chunk;
        job->fn(job->args, lo, hi);
        __atomic_fetch_add(&job->finished, 1, __ATOMIC_RELEASE);
    }
}

static int64_t fg__now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Poll for a job after `seen` for `window` ns; whether one came. */
static int fg__spin(uint64_t seen, int64_t window) {
    if (window <= 0)
        return 0;
    int64_t until = fg__now_ns() + window;
    while (__atomic_load_n(&fg__pool_generation, __ATOMIC_RELAXED) == seen) {
        for (int i = 0; i < 64; i++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (fg__now_ns() > until)
            return 0;
    }
    return 1;
}

static void *fg__worker(void *unused) {
    (void)unused;
    uint64_t seen = 0;
    int64_t window = FG_POOL_SPIN_MAX_NS;
    for (;;) {
        int caught = fg__spin(seen, window);
        int64_t asleep = caught ? 0 : fg__now_ns();
        pthread_mutex_lock(&fg__pool_lock);
        while (fg__pool_job == NULL || fg__pool_generation == seen)
            pthread_cond_wait(&fg__pool_wake, &fg__pool_lock);
        fg__job *job = fg__pool_job;
        seen = fg__pool_generation;
        __atomic_fetch_add(&fg__pool_inside, 1, __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&fg__pool_lock);
        if (!caught) {
            int64_t gap = fg__now_ns() - asleep;
            window = gap < FG_POOL_SPIN_MAX_NS / 2 ? 2 * gap : window / 2;
        }
        fg__run_chunks(job);
        __atomic_fetch_sub(&fg__pool_inside, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* In a forked child the workers are gone and the locks may be held by them: start afresh. */
static void fg__pool_after_fork(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    fg__pool_lock = fresh;
    fg__pool_busy = fresh;
    fg__pool_wake = fresh_cond;
    fg__pool_job = NULL;
    fg__pool_workers = 0;
    fg__pool_inside = 0;
    fg__pool_backoff = 0;
    fg__pool_alone = 0;
}

/* Under fg__pool_lock: start workers up to threads - 1 (fewer if the system refuses). */
static void fg__pool_grow(int threads) {
    if (!fg__pool_forkable)
        fg__pool_forkable = pthread_atfork(NULL, NULL, fg__pool_after_fork) == 0;
    while (fg__pool_workers < threads - 1) {
        pthread_t t;
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0)
            return;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&t, &attr, fg__worker, NULL);
        pthread_attr_destroy(&attr);
        if (failed)
            return;
        fg__pool_workers++;
    }
}

/* Workers started in this process (for tests: one pool per process). */
int fg_pool_workers(void) {
    pthread_mutex_lock(&fg__pool_lock);
    int n = fg__pool_workers;
    pthread_mutex_unlock(&fg__pool_lock);
    return n;
}

/* A split job that did not take under 90% of what the caller alone would have, at its own pace
 * (it waited for a worker the scheduler took off its core mid-chunk: with no core to spare,
 * about a time slice; or the worker woke too late to help), makes the next 1, 3, 7, ... up to
 * FG_POOL_BACKOFF_MAX jobs run alone; one that gained resets that. So a loaded machine pays a
 * lost time slice once in that many jobs, and a quiet one always splits. */
#define FG_POOL_BACKOFF_MAX 63

void fg_pool_parallel(fg_chunk_fn fn, void *const *args, int64_t n, int64_t chunk, int threads) {
    int64_t chunks = (n + chunk - 1) / chunk;
    if (threads < 2 || chunks < 2 || pthread_mutex_trylock(&fg__pool_busy) != 0) {
        fn(args, 0, n);
        return;
    }
    if (fg__pool_alone > 0) {
        fg__pool_alone--;
        pthread_mutex_unlock(&fg__pool_busy);
        fn(args, 0, n);
        return;
    }
    fg__job job = {fn, args, n, chunk, chunks, 0, 0};
    int64_t start = fg__now_ns();
    pthread_mutex_lock(&fg__pool_lock);
    fg__pool_grow(threads);
    fg__pool_job = &job;
    __atomic_store_n(&fg__pool_generation, fg__pool_generation + 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&fg__pool_wake);
    pthread_mutex_unlock(&fg__pool_lock);
    int64_t own = fg__run_chunks(&job);
    int64_t own_done = fg__now_ns();
    pthread_mutex_lock(&fg__pool_lock);
    fg__pool_job = NULL; /* no worker takes it from here on */
    pthread_mutex_unlock(&fg__pool_lock);
    while (__atomic_load_n(&job.finished, __ATOMIC_ACQUIRE) < chunks
           || __atomic_load_n(&fg__pool_inside, __ATOMIC_ACQUIRE) > 0)
        sched_yield();
    int64_t took = fg__now_ns() - start;
    int64_t alone = own > 0 ? (own_done - start) / own * chunks : took;
    if (10 * took > 9 * alone) {
        fg__pool_backoff = 2 * fg__pool_backoff + 1 > FG_POOL_BACKOFF_MAX ? FG_POOL_BACKOFF_MAX
                                                                          : 2 * fg__pool_backoff + 1;
        fg__pool_alone = fg__pool_backoff;
    } else {
        fg__pool_backoff = 0;
    }
    pthread_mutex_unlock(&fg__pool_busy);
}

/* Jobs the pool will run alone before it splits one again (for tests). */
int fg_pool_alone(void) {
    return __atomic_load_n(&fg__pool_alone, __ATOMIC_RELAXED);
}

#endif
#endif
