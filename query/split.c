/* split.c - see split.h. */
#include "query/split.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A unit of the plan: refs [i, end) go to one node together. */
typedef struct {
    size_t i, end;
    uint64_t bytes;
} unit_t;

static int by_bytes_desc(const void *a, const void *b) {
    const unit_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* With this many blocks per node or more, whole blocks are dealt: a node reads the
 * footer of every block it has a partition of, so dealing partitions of many small
 * blocks (a store as cut, a few partitions per block) makes each node read nearly every
 * footer, a cost that does not divide. With fewer (a compacted store: one block, a
 * partition per service), partitions are dealt, or one node would get everything. */
#define BLOCKS_PER_NODE 4

int split_by_blocks(size_t nblocks, size_t nodes) { return nblocks >= BLOCKS_PER_NODE * nodes; }

/* The plan's units into u: one per block when there are enough blocks, else one per
 * partition. Returns their count. refs are sorted, so a block's refs are adjacent. */
static size_t make_units(const store_part_ref_t *refs, const uint64_t *bytes, size_t n, size_t nodes, unit_t *u) {
    size_t nblocks = 0;
    for (size_t i = 0; i < n; i++) nblocks += i == 0 || refs[i].block != refs[i - 1].block;
    int by_block = split_by_blocks(nblocks, nodes);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!by_block || i == 0 || refs[i].block != refs[i - 1].block) u[m++] = (unit_t){i, i, 0};
        u[m - 1].end = i + 1;
        u[m - 1].bytes += bytes[i] + 1; /* + 1: empty partitions still spread */
    }
    return m;
}

int split_plan(const store_part_ref_t *refs, const uint64_t *bytes, size_t n, size_t nodes, store_part_ref_t **shares,
               size_t *nshares) {
    unit_t *u = malloc((n + 1) * sizeof *u);
    uint64_t *load = calloc(nodes, sizeof *load);
    uint32_t *owner = malloc((n + 1) * sizeof *owner);
    int rc = u && load && owner ? 0 : -1;
    for (size_t k = 0; k < nodes; k++) shares[k] = NULL, nshares[k] = 0;
    size_t m = rc == 0 ? make_units(refs, bytes, n, nodes, u) : 0;
    if (m > 1) qsort(u, m, sizeof *u, by_bytes_desc);
    for (size_t j = 0; j < m; j++) { /* longest processing time first */
        size_t best = 0;
        for (size_t k = 1; k < nodes; k++)
            if (load[k] < load[best]) best = k;
        load[best] += u[j].bytes;
        for (size_t i = u[j].i; i < u[j].end; i++) owner[i] = (uint32_t)best;
        nshares[best] += u[j].end - u[j].i;
    }
    for (size_t k = 0; rc == 0 && k < nodes; k++)
        if (!(shares[k] = malloc((nshares[k] + 1) * sizeof **shares))) rc = -1;
    for (size_t k = 0; rc == 0 && k < nodes; k++) nshares[k] = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) shares[owner[i]][nshares[owner[i]]++] = refs[i]; /* stays sorted */
    free(u);
    free(load);
    free(owner);
    return rc;
}

typedef struct {
    const merge_remote_t *rm;
    size_t peer;
    const store_part_ref_t *refs;
    size_t n;
    merge_share_ask_t ask;
    int asked, ok;
    pthread_t tid;
    buf_t body;
    hr_err_t err;
} job_t;

struct split_run {
    size_t njobs;
    job_t jobs[];
};

static void *run_job(void *arg) {
    job_t *j = arg;
    j->ok = j->rm->fetch(j->rm->ctx, j->peer, j->refs, j->n, &j->ask, &j->body, &j->err) == 0;
    return NULL;
}

split_run_t *split_start(const merge_remote_t *rm, store_part_ref_t *const *shares, const size_t *nshares,
                         const merge_share_ask_t *ask) {
    split_run_t *s = calloc(1, sizeof *s + rm->npeers * sizeof(job_t));
    if (!s) return NULL;
    s->njobs = rm->npeers;
    for (size_t p = 0; p < rm->npeers; p++) {
        job_t *j = &s->jobs[p];
        *j = (job_t){.rm = rm, .peer = p, .refs = shares[p + 1], .n = nshares[p + 1], .ask = *ask, .ok = 1};
        buf_init(&j->body);
        if (!j->n) continue;
        j->asked = pthread_create(&j->tid, NULL, run_job, j) == 0;
        if (!j->asked) j->ok = 0, hr_fail(&j->err, HR_ENOMEM, "cannot start a thread to ask a peer");
    }
    return s;
}

void split_join(split_run_t *s, int *ok, buf_t *body, hr_err_t *err) {
    for (size_t p = 0; p < s->njobs; p++) {
        job_t *j = &s->jobs[p];
        if (j->asked) pthread_join(j->tid, NULL);
        ok[p + 1] = j->ok;
        body[p + 1] = j->body;
        err[p + 1] = j->err;
        if (!j->ok) buf_free(&body[p + 1]);
    }
    free(s);
}
