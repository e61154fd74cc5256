/* budget.c - see budget.h. */
#include "common/budget.h"

/* Takes n bytes of b for work whose whole share would then be `whole` bytes. */
static int reserve(mem_budget_t *b, size_t n, size_t whole, const char *what, hr_err_t *err) {
    if (!b || !b->cap || !n) return 0;
    const char *flag = b->flag ? b->flag : "the memory budget", *work = b->work ? b->work : "work";
    if (whole > b->cap)
        return hr_fail(err, HR_ETOOBIG, "%s needs over %zu MiB, more than the whole %s budget of %zu MiB (%s)", what,
                       whole >> 20, work, b->cap >> 20, flag);
    size_t used = atomic_load(&b->used);
    do {
        if (used + n > b->cap)
            return hr_fail(err, HR_ELIMIT, "the %s memory budget (%s %zu MiB) is held by other requests; retry later",
                           work, flag, b->cap >> 20);
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
    return 0;
}

int budget_take(mem_budget_t *b, size_t n, const char *what, hr_err_t *err) { return reserve(b, n, n, what, err); }

void budget_give(mem_budget_t *b, size_t n) {
    if (b && b->cap) atomic_fetch_sub(&b->used, n);
}

int budget_hold_more(budget_hold_t *h, size_t n, const char *what, hr_err_t *err) {
    if (!h || reserve(h->b, n, h->held + n, what, err)) return h ? -1 : 0;
    h->held += n;
    return 0;
}

void budget_hold_release(budget_hold_t *h) {
    if (!h) return;
    budget_give(h->b, h->held);
    h->held = 0;
}
