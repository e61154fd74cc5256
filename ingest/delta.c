/* delta.c - see delta.h. */
#include "ingest/delta.h"

#include <stdlib.h>
#include <string.h>

#include "storage/segment.h"

/* The profile of b with like's type and labels. Not its time: a pprof without `from` takes
 * each upload's own time_nanos, so the previous profile is older by design. */
static const batch_profile_t *find(const batch_t *b, const batch_profile_t *like) {
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->p[i].profile_type, like->profile_type) && labels_equal(&b->p[i].labels, &like->labels))
            return &b->p[i];
    return NULL;
}

/* cur -= prev for one profile; prev's stack ids are already cur's. */
static void subtract(batch_profile_t *cur, stack_value_t *c, size_t nc, const stack_value_t *p, size_t np) {
    size_t j = 0, k = 0;
    for (size_t i = 0; i < nc; i++) {
        while (j < np && p[j].stack < c[i].stack) j++;
        int64_t v = c[i].value;
        if (j < np && p[j].stack == c[i].stack && p[j].value <= v) v -= p[j].value;
        if (v == 0) continue;
        cur->stacks[k] = c[i].stack, cur->values[k] = v;
        k++;
    }
    cur->n = k;
    cur->nspans = 0; /* a difference of two cumulative profiles has no per-span values */
}

static int delta_one(batch_profile_t *cur, const batch_profile_t *prev, symtab_t *sym, symtab_remap_t *m) {
    stack_value_t *c = malloc((cur->n + 1) * sizeof *c), *p = malloc((prev->n + 1) * sizeof *p);
    int rc = c && p ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < cur->n; i++) c[i] = (stack_value_t){cur->stacks[i], cur->values[i]};
    for (size_t i = 0; rc == 0 && i < prev->n; i++) {
        p[i] = (stack_value_t){symtab_import_stack(sym, m, prev->stacks[i]), prev->values[i]};
        if (p[i].stack == SYM_NONE) rc = -1;
    }
    if (rc == 0) subtract(cur, c, stack_values_fold(c, cur->n), p, stack_values_fold(p, prev->n));
    free(c);
    free(p);
    return rc;
}

int delta_subtract(batch_t *cur, const uint8_t *cumulative, const batch_t *prev, hr_err_t *err) {
    symtab_remap_t m;
    if (symtab_remap_init(&m, prev->sym)) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < cur->n && rc == 0; i++) {
        if (!cumulative[i]) continue;
        const batch_profile_t *p = find(prev, &cur->p[i]);
        if (p && delta_one(&cur->p[i], p, cur->sym, &m))
            rc = hr_fail(err, HR_ENOMEM, "out of memory computing a delta");
    }
    symtab_remap_destroy(&m);
    return rc;
}
