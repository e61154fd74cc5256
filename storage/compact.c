/* compact.c - see compact.h. */
#include "storage/compact.h"

#include <stdlib.h>

#include "common/vec.h"

/* Copies one segment's profiles into out, remapping stack ids into out's symtab. */
static int copy_segment(segment_t *out, const segment_t *in, uint32_t **stacks, size_t *cap, hr_err_t *err) {
    symtab_remap_t m;
    if (symtab_remap_init(&m, in->sym)) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < in->nprofiles && rc == 0; i++) {
        const seg_profile_t *p = &in->profiles[i];
        if (VEC_RESERVE(*stacks, *cap, p->nsamples + 1)) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        for (uint32_t k = 0; k < p->nsamples && rc == 0; k++) {
            uint32_t id = symtab_import_stack(out->sym, &m, in->stacks[p->first + k]);
            if (id == SYM_NONE) rc = hr_fail(err, HR_ENOMEM, "out of memory interning symbols");
            (*stacks)[k] = id;
        }
        if (rc == 0 && (segment_add(out, p->series, p->time_ns, p->duration_ns, *stacks, in->values + p->first, p->nsamples) ||
                        segment_import_spans(out, &m, in->spans + p->span_first, p->nspans)))
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
    }
    symtab_remap_destroy(&m);
    return rc;
}

segment_t *compact_segments(const segment_t *const *in, size_t n, hr_err_t *err) {
    segment_t *out = segment_new();
    if (!out) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    uint32_t *stacks = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = copy_segment(out, in[i], &stacks, &cap, err);
    free(stacks);
    if (rc) {
        segment_free(out);
        return NULL;
    }
    return out;
}
