/* batch.c - see batch.h. */
#include "storage/batch.h"

#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

int batch_init(batch_t *b) {
    memset(b, 0, sizeof *b);
    b->sym = symtab_new();
    return b->sym ? 0 : -1;
}

void batch_destroy(batch_t *b) {
    for (size_t i = 0; i < b->n; i++) {
        free(b->p[i].profile_type);
        labels_destroy(&b->p[i].labels);
        free(b->p[i].stacks);
        free(b->p[i].values);
        free(b->p[i].spans);
    }
    free(b->p);
    symtab_free(b->sym);
    memset(b, 0, sizeof *b);
}

static int same(const batch_profile_t *p, const char *ptype, const labels_t *l, int64_t t) {
    return p->time_ns == t && !strcmp(p->profile_type, ptype) && labels_equal(&p->labels, l);
}

batch_profile_t *batch_profile(batch_t *b, const char *ptype, const labels_t *labels, int64_t time_ns,
                               int64_t duration_ns) {
    if (b->last < b->n && same(&b->p[b->last], ptype, labels, time_ns)) return &b->p[b->last];
    for (size_t i = 0; i < b->n; i++)
        if (same(&b->p[i], ptype, labels, time_ns)) {
            b->last = i;
            return &b->p[i];
        }
    if (VEC_RESERVE(b->p, b->cap, b->n + 1)) return NULL;
    batch_profile_t *p = &b->p[b->n];
    memset(p, 0, sizeof *p);
    p->profile_type = strdup(ptype);
    p->time_ns = time_ns;
    p->duration_ns = duration_ns;
    if (!p->profile_type || labels_copy(&p->labels, labels)) {
        free(p->profile_type);
        labels_destroy(&p->labels);
        return NULL;
    }
    b->last = b->n++;
    return p;
}

int batch_sample(batch_profile_t *p, uint32_t stack, int64_t value) {
    size_t cap = p->cap;
    if (VEC_RESERVE(p->stacks, cap, p->n + 1)) return -1;
    if (cap != p->cap) {
        int64_t *v = realloc(p->values, cap * sizeof *v);
        if (!v) return -1;
        p->values = v;
        p->cap = cap;
    }
    p->stacks[p->n] = stack;
    p->values[p->n++] = value;
    return 0;
}

int batch_span_sample(batch_profile_t *p, uint32_t stack, int64_t value, uint64_t span, const uint64_t trace[2]) {
    if (VEC_RESERVE(p->spans, p->spans_cap, p->nspans + 1) || batch_sample(p, stack, value)) return -1;
    p->spans[p->nspans++] = (span_sample_t){span, stack, value, trace ? trace[0] : 0, trace ? trace[1] : 0};
    return 0;
}

size_t batch_samples(const batch_t *b) {
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) n += b->p[i].n;
    return n;
}
