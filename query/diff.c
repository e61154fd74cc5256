/* diff.c - the "double" flamebearer: two merged profiles in one flame graph.
 *
 * The two call trees are laid over each other by frame path: a node exists in the
 * diff tree if its path exists on either side. Each level lists its nodes with 7
 * numbers: [left x delta, left total, left self, right x delta, right total, right
 * self, name index], where the left and right x positions are laid out
 * independently in each side's own units, as Pyroscope's diff renderer reads them.
 *
 * Trimming to max_nodes ranks nodes by their larger share of either side's total,
 * so a function that is tiny on the left but big on the right survives. */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/jsonw.h"
#include "common/vec.h"
#include "query/render.h"

typedef struct {
    uint32_t l, r;   /* node in each tree, TREE_NONE when absent on that side */
    uint32_t parent; /* index in the diff node array */
    uint32_t depth;
} dnode_t;

typedef struct {
    const tree_t *t[2];
    dnode_t *n;
    size_t len, cap;
    uint32_t *stack; /* of (l, r, parent, depth) quadruples being expanded */
    size_t slen, scap;
    uint32_t *kids[2];
    size_t kcap[2];
} dbuild_t;

static int64_t side_total(const tree_t *t, uint32_t n) { return n == TREE_NONE ? 0 : t->n[n].total; }
static int64_t side_self(const tree_t *t, uint32_t n) { return n == TREE_NONE ? 0 : t->n[n].self; }

static const char *dnode_name(const dbuild_t *b, const dnode_t *d) {
    return d->l != TREE_NONE ? tree_name(b->t[0], d->l) : tree_name(b->t[1], d->r);
}

static int push(dbuild_t *b, uint32_t l, uint32_t r, uint32_t parent, uint32_t depth) {
    if (VEC_RESERVE(b->stack, b->scap, b->slen + 4)) return -1;
    uint32_t *s = b->stack + b->slen;
    s[0] = l, s[1] = r, s[2] = parent, s[3] = depth;
    b->slen += 4;
    return 0;
}

/* Lists the children of node n of tree side into b->kids[side]; returns the count. */
static ssize_t children(dbuild_t *b, int side, uint32_t n) {
    size_t k = 0;
    if (n == TREE_NONE) return 0;
    for (uint32_t c = b->t[side]->n[n].first_child; c != TREE_NONE; c = b->t[side]->n[c].next_sibling) {
        if (VEC_RESERVE(b->kids[side], b->kcap[side], k + 1)) return -1;
        b->kids[side][k++] = c;
    }
    return (ssize_t)k;
}

/* Pushes the union of both sides' children of d, merged by name (both lists are
 * in name order), in reverse so that they pop in name order. */
static int push_children(dbuild_t *b, const dnode_t *d, uint32_t self) {
    ssize_t nl = children(b, 0, d->l), nr = children(b, 1, d->r);
    if (nl < 0 || nr < 0) return -1;
    ssize_t i = nl - 1, j = nr - 1;
    while (i >= 0 || j >= 0) {
        /* c > 0: the left name sorts later, so it is pushed first; c == 0: both */
        int c = i < 0 ? -1 : j < 0 ? 1 : strcmp(tree_name(b->t[0], b->kids[0][i]), tree_name(b->t[1], b->kids[1][j]));
        uint32_t l = c >= 0 && i >= 0 ? b->kids[0][i] : TREE_NONE, r = c <= 0 && j >= 0 ? b->kids[1][j] : TREE_NONE;
        if (l != TREE_NONE) i--;
        if (r != TREE_NONE) j--;
        if (push(b, l, r, self, d->depth + 1)) return -1;
    }
    return 0;
}

/* Builds the diff tree in depth-first pre-order (parents before children). */
static int build(dbuild_t *b) {
    if (push(b, 0, 0, UINT32_MAX, 0)) return -1;
    while (b->slen) {
        b->slen -= 4;
        const uint32_t *s = b->stack + b->slen;
        if (VEC_RESERVE(b->n, b->cap, b->len + 1)) return -1;
        dnode_t *d = &b->n[b->len];
        *d = (dnode_t){s[0], s[1], s[2], s[3]};
        if (push_children(b, d, (uint32_t)b->len++)) return -1;
    }
    return 0;
}

typedef struct {
    const dbuild_t *b;
    uint8_t *keep;
    int64_t *dself[2]; /* displayed self per side: own plus dropped children */
} dtrim_t;

static double share(const dbuild_t *b, const dnode_t *d) {
    double lt = (double)b->t[0]->n[0].total, rt = (double)b->t[1]->n[0].total;
    double a = lt > 0 ? (double)side_total(b->t[0], d->l) / lt : 0;
    double c = rt > 0 ? (double)side_total(b->t[1], d->r) / rt : 0;
    return a > c ? a : c;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int trim(dtrim_t *t, size_t max_nodes) {
    const dbuild_t *b = t->b;
    double thr = -1;
    size_t ties = SIZE_MAX;
    if (max_nodes && b->len > max_nodes) {
        double *sh = malloc(b->len * sizeof *sh);
        if (!sh) return -1;
        for (size_t i = 0; i < b->len; i++) sh[i] = share(b, &b->n[i]);
        qsort(sh, b->len, sizeof *sh, cmp_desc);
        thr = sh[max_nodes - 1];
        ties = 0;
        for (size_t i = 0; i < max_nodes; i++) ties += sh[i] == thr;
        free(sh);
    }
    for (size_t i = 0; i < b->len; i++) {
        const dnode_t *d = &b->n[i];
        int k = i == 0;
        if (!k && t->keep[d->parent]) {
            double s = share(b, d);
            if (s > thr) k = 1;
            else if (s == thr && ties) k = 1, ties--;
        }
        t->keep[i] = (uint8_t)k;
        for (int side = 0; side < 2; side++) {
            uint32_t n = side ? d->r : d->l;
            t->dself[side][i] = side_self(b->t[side], n);
            if (!k && i && t->keep[d->parent]) t->dself[side][d->parent] += side_total(b->t[side], n);
        }
    }
    return 0;
}

typedef struct {
    flamebearer_t *fb;
    size_t *level_cap, names_cap;
    int64_t *next_x[2], *level_end[2];
} demit_t;

static int put(demit_t *e, size_t dep, int64_t v) {
    fb_level_t *lv = &e->fb->levels[dep];
    if (VEC_RESERVE(lv->v, e->level_cap[dep], lv->len + 1)) return -1;
    lv->v[lv->len++] = v;
    return 0;
}

static int emit(const dbuild_t *b, const dtrim_t *t, demit_t *e) {
    flamebearer_t *fb = e->fb;
    for (size_t i = 0; i < b->len; i++) {
        if (!t->keep[i]) continue;
        const dnode_t *d = &b->n[i];
        size_t dep = d->depth;
        for (int side = 0; side < 2; side++) {
            uint32_t n = side ? d->r : d->l;
            int64_t tot = side_total(b->t[side], n), self = t->dself[side][i];
            int64_t x = i == 0 ? 0 : e->next_x[side][dep];
            e->next_x[side][dep] = x + tot;
            e->next_x[side][dep + 1] = x + self;
            if (put(e, dep, x - e->level_end[side][dep]) || put(e, dep, tot) || put(e, dep, self)) return -1;
            e->level_end[side][dep] = x + tot;
            if (self > fb->max_self) fb->max_self = self;
        }
        /* Names are not deduplicated across nodes: the two trees have separate
         * string tables, and repeated names cost only bytes. */
        if (put(e, dep, (int64_t)fb->nnames) || VEC_RESERVE(fb->names, e->names_cap, fb->nnames + 1)) return -1;
        fb->names[fb->nnames++] = dnode_name(b, d);
        if (dep + 1 > fb->nlevels) fb->nlevels = dep + 1;
    }
    return 0;
}

int diffbearer_build(const tree_t *left, const tree_t *right, size_t max_nodes, flamebearer_t *fb) {
    dbuild_t b = {.t = {left, right}};
    dtrim_t t = {.b = &b};
    demit_t e = {.fb = fb};
    memset(fb, 0, sizeof *fb);
    int rc = -1;
    size_t maxd = 0;
    if (build(&b)) goto out;
    for (size_t i = 0; i < b.len; i++)
        if (b.n[i].depth > maxd) maxd = b.n[i].depth;
    t.keep = malloc(b.len);
    fb->levels = calloc(maxd + 2, sizeof *fb->levels);
    e.level_cap = calloc(maxd + 2, sizeof *e.level_cap);
    for (int s = 0; s < 2; s++) {
        t.dself[s] = malloc(b.len * sizeof(int64_t));
        e.next_x[s] = calloc(maxd + 2, sizeof(int64_t));
        e.level_end[s] = calloc(maxd + 2, sizeof(int64_t));
        if (!t.dself[s] || !e.next_x[s] || !e.level_end[s]) goto out;
    }
    if (!t.keep || !fb->levels || !e.level_cap || trim(&t, max_nodes) || emit(&b, &t, &e)) goto out;
    fb->total = left->n[0].total + right->n[0].total;
    rc = 0;
out:
    if (rc) fb->nlevels = maxd + 2, flamebearer_destroy(fb); /* every level's array, filled or not */
    for (int s = 0; s < 2; s++) free(t.dself[s]), free(e.next_x[s]), free(e.level_end[s]);
    free(t.keep);
    free(e.level_cap);
    free(b.n);
    free(b.stack);
    free(b.kids[0]);
    free(b.kids[1]);
    return rc;
}

int render_diff(const tree_t *left, const merge_result_t *lm, const tree_t *right, size_t max_nodes, buf_t *out) {
    flamebearer_t fb;
    if (diffbearer_build(left, right, max_nodes, &fb)) return -1;
    long long lt = (long long)left->n[0].total, rt = (long long)right->n[0].total;
    render_bearer_open(&fb, out);
    buf_printf(out,
               "],\"numTicks\":%lld,\"maxSelf\":%lld,\"leftTicks\":%lld,\"rightTicks\":%lld},\"metadata\":", lt + rt,
               (long long)fb.max_self, lt, rt);
    render_metadata(lm, "double", out);
    buf_printf(out, ",\"leftTicks\":%lld,\"rightTicks\":%lld,\"timeline\":null}", lt, rt);
    flamebearer_destroy(&fb);
    return out->oom ? -1 : 0;
}
