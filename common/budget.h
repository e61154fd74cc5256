/* budget.h - a memory budget shared by concurrent requests.
 *
 * Decoding a profile, or merging a selection, costs far more memory than its request:
 * a 544 KB gzipped pprof of 2M samples unpacks into hundreds of MB of protobuf-c
 * structs, and a merge of 200k distinct stacks builds a symbol table of GBs. A count
 * of concurrent requests does not bound that, so the work reserves what it needs from
 * one budget and returns it when done; work that does not fit waits for nobody: it is
 * refused (429), and work that could never fit is refused as too big (413). Two
 * budgets exist: decodes (--max-decode-memory) reserve their estimated peak up front
 * (pprof_census); queries (--max-query-memory) reserve as their merge grows, through a
 * budget_hold_t held until the answer is written. Lock-free: one atomic counter. */
#ifndef HEARTH_BUDGET_H
#define HEARTH_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>

#include "common/err.h"

typedef struct {
    size_t cap;       /* bytes; 0 = unlimited */
    const char *flag; /* the option that sets cap, for messages ("--max-decode-memory") */
    const char *work; /* what holds it, for messages ("decode", "query") */
    atomic_size_t used;
} mem_budget_t;

/* Reserves n bytes of b (b NULL: nothing to reserve). Returns 0, or -1 with
 * HR_ETOOBIG when n exceeds the whole budget, HR_ELIMIT when others hold too much of
 * it now. `what` names the work in the message. */
int budget_take(mem_budget_t *b, size_t n, const char *what, hr_err_t *err);
/* Returns n bytes taken by budget_take. */
void budget_give(mem_budget_t *b, size_t n);

/* One request's share of a budget, grown as its work grows and returned in one go. */
typedef struct {
    mem_budget_t *b; /* NULL: nothing is reserved */
    size_t held;
} budget_hold_t;

/* Takes n more bytes for h (budget_take's errors). */
int budget_hold_more(budget_hold_t *h, size_t n, const char *what, hr_err_t *err);
/* Returns everything h holds. */
void budget_hold_release(budget_hold_t *h);

#endif
