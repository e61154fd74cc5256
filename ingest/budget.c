/* budget.c - see budget.h. */
#include "ingest/budget.h"

int budget_take(mem_budget_t *b, size_t n, const char *what, hr_err_t *err) {
    if (!b || !b->cap) return 0;
    if (n > b->cap)
        return hr_fail(err, HR_ETOOBIG,
                       "%s needs about %zu MiB to decode, over the whole decode budget of %zu MiB "
                       "(--max-decode-memory)",
                       what, n >> 20, b->cap >> 20);
    size_t used = atomic_load(&b->used);
    do {
        if (used + n > b->cap)
            return hr_fail(err, HR_ELIMIT,
                           "the decode memory budget (--max-decode-memory %zu MiB) is held by other "
                           "uploads; retry later",
                           b->cap >> 20);
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
    return 0;
}

void budget_give(mem_budget_t *b, size_t n) {
    if (b && b->cap) atomic_fetch_sub(&b->used, n);
}
