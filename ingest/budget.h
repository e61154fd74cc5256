/* budget.h - a memory budget shared by concurrent decodes.
 *
 * Decoding a profile costs far more memory than its upload: a 544 KB gzipped pprof
 * of 2M samples unpacks into hundreds of MB of protobuf-c structs. A count of
 * concurrent requests does not bound that, so every decode first reserves its
 * estimated peak (see pprof_census) from one budget and returns it when done; a
 * decode that does not fit waits for nobody: it is refused (429), and one that could
 * never fit is refused as too big (413). Lock-free: one atomic counter. */
#ifndef HEARTH_BUDGET_H
#define HEARTH_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"

typedef struct {
    size_t cap; /* bytes; 0 = unlimited */
    atomic_size_t used;
} mem_budget_t;

/* Reserves n bytes of b (b NULL: nothing to reserve). Returns 0, or -1 with
 * HR_ETOOBIG when n exceeds the whole budget, HR_ELIMIT when other decodes hold
 * too much of it now. `what` names the work in the message. */
int budget_take(mem_budget_t *b, size_t n, const char *what, hr_err_t *err);
/* Returns n bytes taken by budget_take. */
void budget_give(mem_budget_t *b, size_t n);

#endif
