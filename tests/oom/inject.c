/* inject.c - the allocation wrappers: see inject.h. */
#include "tests/oom/inject.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static int armed, fired;
static long count, fail_at;

void oom_arm(long n) {
    __atomic_store_n(&count, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fail_at, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

long oom_disarm(void) {
    __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&count, __ATOMIC_SEQ_CST);
}

int oom_fired(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }

/* 1 when this allocation is the one to fail. */
static int fail_now(void) {
    if (!__atomic_load_n(&armed, __ATOMIC_SEQ_CST)) return 0;
    long c = __atomic_add_fetch(&count, 1, __ATOMIC_SEQ_CST);
    if (c != __atomic_load_n(&fail_at, __ATOMIC_SEQ_CST)) return 0;
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    return 1;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return fail_now() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }
