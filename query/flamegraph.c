/* flamegraph.c - Pyroscope's flamebearer JSON.
 *
 * levels[d] lists the nodes at depth d left to right, 4 numbers each:
 * [x offset from the end of the previous node in the level, total, self, name
 * index]. A node's children start at its x + self (self first, then children in
 * name order), which is how Pyroscope's and Grafana's renderers read it.
 *
 * Trimming to max_nodes keeps the largest nodes by total: a dropped node's whole
 * subtree is folded into its parent's self, so every level still sums correctly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/vec.h"
#include "query/render.h"

typedef struct {
    const tree_t *t;
    flamebearer_t *fb;
    uint8_t *keep;
    int64_t *dself;  /* displayed self: own self plus dropped children */
    int64_t *next_x; /* by depth: where the next child at that depth starts */
    int64_t *level_end;
    size_t *level_cap;
    size_t names_cap;
    uint32_t *name_idx; /* by string id */
    int oom;
} fb_t;

/* The k-th largest of v[0..n) (k < n), reordering v: a quickselect (expected linear;
 * a flame graph keeps max_nodes of a tree that can have a fleet's million nodes, so a
 * full sort is wasted). */
static int64_t kth_largest(int64_t *v, size_t n, size_t k) {
    size_t lo = 0, hi = n - 1;
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    while (lo < hi) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; /* a pivot no input can aim at */
        int64_t pivot = v[lo + (size_t)(seed >> 33) % (hi - lo + 1)];
        size_t i = lo, j = hi;
        while (i <= j) { /* larger first: v[lo..i) >= pivot, v(j..hi] <= pivot */
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                int64_t x = v[i];
                v[i++] = v[j];
                v[j] = x;
                if (j == 0) break;
                j--;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return v[k];
    }
    return v[k];
}

/* Decides which nodes survive max_nodes; parents are decided before children. */
typedef struct {
    fb_t *f;
    int64_t thr;
    size_t ties; /* nodes equal to thr still to keep */
} choose_t;

static int choose_visit(void *ctx, uint32_t i, size_t depth, int enter) {
    (void)depth;
    choose_t *c = ctx;
    fb_t *f = c->f;
    if (!enter) return 1;
    const tree_node_t *n = &f->t->n[i];
    int k = i == 0;
    if (!k && f->keep[n->parent]) {
        if (n->total > c->thr) k = 1;
        else if (n->total == c->thr && c->ties) k = 1, c->ties--;
    }
    f->keep[i] = (uint8_t)k;
    f->dself[i] = n->self;
    if (!k && i && f->keep[n->parent]) f->dself[n->parent] += n->total;
    return k; /* a dropped node's subtree is dropped with it */
}

static int choose_nodes(fb_t *f, size_t max_nodes) {
    const tree_t *t = f->t;
    int64_t thr = 0;
    size_t ties = SIZE_MAX;
    if (max_nodes && t->len > max_nodes) {
        int64_t *tot = malloc(t->len * sizeof *tot);
        if (!tot) return -1;
        for (size_t i = 0; i < t->len; i++) tot[i] = t->n[i].total;
        thr = kth_largest(tot, t->len, max_nodes - 1);
        ties = max_nodes; /* how many nodes equal to thr the top max_nodes hold */
        for (size_t i = 0; i < t->len; i++) ties -= tot[i] > thr;
        free(tot);
    }
    /* In the walk's order (parents first, siblings by name), so which of equal nodes stay
     * depends on the tree, not on the order its nodes were made in: a merge split across
     * nodes or read from other blocks draws the same graph. */
    choose_t ch = {f, thr, ties};
    return tree_walk(t, choose_visit, &ch);
}

static uint32_t name_index(fb_t *f, uint32_t sid) {
    flamebearer_t *fb = f->fb;
    if (f->name_idx[sid] == UINT32_MAX) {
        if (VEC_RESERVE(fb->names, f->names_cap, fb->nnames + 1)) return f->oom = 1, 0;
        fb->names[fb->nnames] = symtab_str(f->t->sym, sid);
        f->name_idx[sid] = (uint32_t)fb->nnames++;
    }
    return f->name_idx[sid];
}

static int visit(void *ctx, uint32_t node, size_t d, int enter) {
    fb_t *f = ctx;
    flamebearer_t *fb = f->fb;
    if (!enter || !f->keep[node] || f->oom) return 0;
    const tree_node_t *n = &f->t->n[node];
    int64_t x = node == 0 ? 0 : f->next_x[d];
    f->next_x[d] = x + n->total;
    f->next_x[d + 1] = x + f->dself[node];
    if (d + 1 > fb->nlevels) fb->nlevels = d + 1;
    if (VEC_RESERVE(fb->levels[d].v, f->level_cap[d], fb->levels[d].len + 4)) return f->oom = 1, 0;
    int64_t *v = fb->levels[d].v + fb->levels[d].len;
    v[0] = x - f->level_end[d], v[1] = n->total, v[2] = f->dself[node], v[3] = name_index(f, n->name);
    fb->levels[d].len += 4;
    f->level_end[d] = x + n->total;
    if (f->dself[node] > fb->max_self) fb->max_self = f->dself[node];
    return 1;
}

static size_t tree_depth(const tree_t *t, size_t *depth) {
    /* Depth of node i is depth of its parent + 1; parents come first. */
    size_t max = 0;
    for (size_t i = 1; i < t->len; i++) {
        depth[i] = depth[t->n[i].parent] + 1;
        if (depth[i] > max) max = depth[i];
    }
    return max;
}

int flamebearer_build(const tree_t *t, size_t max_nodes, flamebearer_t *fb) {
    memset(fb, 0, sizeof *fb);
    fb_t f = {.t = t, .fb = fb};
    size_t *depth = calloc(t->len, sizeof *depth);
    int rc = -1;
    if (!depth) return -1;
    size_t maxd = tree_depth(t, depth) + 2;
    free(depth);
    f.keep = calloc(t->len + 1, 1);
    f.dself = malloc(t->len * sizeof *f.dself);
    f.next_x = calloc(maxd + 1, sizeof *f.next_x);
    f.level_end = calloc(maxd + 1, sizeof *f.level_end);
    f.level_cap = calloc(maxd + 1, sizeof *f.level_cap);
    fb->levels = calloc(maxd + 1, sizeof *fb->levels);
    f.name_idx = malloc(t->sym->nstrings * sizeof *f.name_idx);
    if (f.keep && f.dself && f.next_x && f.level_end && f.level_cap && fb->levels && f.name_idx) {
        memset(f.name_idx, 0xff, t->sym->nstrings * sizeof *f.name_idx);
        fb->total = t->n[0].total;
        rc = choose_nodes(&f, max_nodes) || tree_walk(t, visit, &f) || f.oom ? -1 : 0;
    }
    free(f.keep);
    free(f.dself);
    free(f.next_x);
    free(f.level_end);
    free(f.level_cap);
    free(f.name_idx);
    if (rc) flamebearer_destroy(fb);
    return rc;
}

void flamebearer_destroy(flamebearer_t *fb) {
    if (fb->levels)
        for (size_t d = 0; d < fb->nlevels; d++) free(fb->levels[d].v);
    free(fb->levels);
    free(fb->names);
    memset(fb, 0, sizeof *fb);
}

void render_metadata(const merge_result_t *r, const char *format, buf_t *out) {
    long long rate;
    const char *units = ptype_units(&r->type, &rate);
    buf_printf(out, "{\"format\":\"%s\",\"spyName\":\"\",\"sampleRate\":%lld,\"units\":", format, rate);
    jsonw_str(out, units);
    buf_printf(out, ",\"name\":");
    jsonw_str(out, r->type.sample_type);
    buf_printf(out, ",\"profileType\":");
    jsonw_str(out, r->type_id);
    buf_printf(out, ",\"aggregation\":\"%s\",\"profiles\":%llu}", r->gauge ? "average" : "sum",
               (unsigned long long)r->profiles);
}

static void render_timeline(const merge_result_t *r, buf_t *out) {
    if (!r->nbuckets) {
        buf_printf(out, "null");
        return;
    }
    buf_printf(out, "{\"startTime\":%lld,\"samples\":[", (long long)(r->tl_start / 1000000000));
    for (size_t i = 0; i < r->nbuckets; i++) {
        if (i) buf_putc(out, ',');
        buf_put_i64(out, llround(r->timeline[i]));
    }
    buf_printf(out, "],\"durationDelta\":%lld,\"watermarks\":null}", (long long)(r->tl_step / 1000000000));
}

/* Pyroscope's `groups`: the first label's value -> its timeline, or null. */
static void render_group_timelines(const grouped_t *g, buf_t *out) {
    if (!g) {
        buf_printf(out, "null");
        return;
    }
    buf_putc(out, '{');
    for (size_t i = 0; i < g->n; i++) {
        if (i) buf_putc(out, ',');
        jsonw_str(out, g->width ? g->v[i].vals[0] : "");
        buf_putc(out, ':');
        render_timeline(&g->v[i].m, out);
    }
    buf_putc(out, '}');
}

void render_bearer_open(const flamebearer_t *fb, buf_t *out) {
    buf_printf(out, "{\"version\":1,\"flamebearer\":{\"names\":[");
    for (size_t i = 0; i < fb->nnames; i++) {
        if (i) buf_putc(out, ',');
        jsonw_str(out, fb->names[i]);
    }
    buf_printf(out, "],\"levels\":[");
    for (size_t d = 0; d < fb->nlevels; d++) {
        if (d) buf_putc(out, ',');
        buf_putc(out, '[');
        for (size_t k = 0; k < fb->levels[d].len; k++) {
            if (k) buf_putc(out, ',');
            buf_put_i64(out, fb->levels[d].v[k]);
        }
        buf_putc(out, ']');
    }
}

int render_flamegraph(const tree_t *t, const merge_result_t *r, size_t max_nodes, const grouped_t *groups, buf_t *out) {
    flamebearer_t fb;
    if (flamebearer_build(t, max_nodes, &fb)) return -1;
    render_bearer_open(&fb, out);
    buf_printf(out, "],\"numTicks\":%lld,\"maxSelf\":%lld},\"metadata\":", (long long)fb.total, (long long)fb.max_self);
    render_metadata(r, "single", out);
    buf_printf(out, ",\"timeline\":");
    render_timeline(r, out);
    buf_printf(out, ",\"groups\":");
    render_group_timelines(groups, out);
    buf_printf(out, ",\"heatmap\":null}");
    flamebearer_destroy(&fb);
    return out->oom ? -1 : 0;
}

/* [{"timestamp":ms,"value":v}...] of n values from start, step apart. */
static void render_points(const double *v, size_t n, int64_t start, int64_t step, buf_t *out) {
    buf_putc(out, '[');
    for (size_t i = 0; i < n; i++)
        buf_printf(out, "%s{\"timestamp\":%lld,\"value\":%lld}", i ? "," : "",
                   (long long)((start + (int64_t)i * step) / 1000000), (long long)llround(v[i]));
    buf_putc(out, ']');
}

void render_group_labels(const char *const *names, const char *const *vals, size_t width, buf_t *out) {
    buf_putc(out, '{');
    for (size_t k = 0, first = 1; k < width; k++) {
        if (!*vals[k]) continue; /* the group lacks that label */
        buf_printf(out, "%s", first ? "" : ",");
        jsonw_str(out, names[k]);
        buf_putc(out, ':');
        jsonw_str(out, vals[k]);
        first = 0;
    }
    buf_putc(out, '}');
}

/* ,"groups":[{"labels":{..},"points":[..],"total":N}..],"other":{"groups":K,"points","total"}|null */
static void render_groups(const grouped_t *g, const merge_result_t *r, buf_t *out) {
    buf_printf(out, ",\"groups\":[");
    for (size_t i = 0; i < g->n; i++) {
        const merge_result_t *m = &g->v[i].m;
        buf_printf(out, "%s{\"labels\":", i ? "," : "");
        render_group_labels((const char *const *)g->names, g->v[i].vals, g->width, out);
        buf_printf(out, ",\"points\":");
        render_points(m->timeline, m->nbuckets, m->tl_start, m->tl_step, out);
        buf_printf(out, ",\"total\":%lld,\"profiles\":%llu}", (long long)llround(m->total),
                   (unsigned long long)m->profiles);
    }
    buf_printf(out, "],\"other\":");
    if (!g->nother) {
        buf_printf(out, "null");
        return;
    }
    buf_printf(out, "{\"groups\":%zu,\"points\":", g->nother);
    render_points(g->other, r->nbuckets, r->tl_start, r->tl_step, out);
    buf_printf(out, ",\"total\":%lld}", (long long)llround(g->other_total));
}

void render_timeseries(const merge_result_t *r, const grouped_t *groups, buf_t *out) {
    long long rate;
    buf_printf(out, "{\"profileType\":");
    jsonw_str(out, r->type_id);
    buf_printf(out, ",\"unit\":");
    jsonw_str(out, r->type.sample_unit);
    buf_printf(out, ",\"units\":");
    jsonw_str(out, ptype_units(&r->type, &rate));
    buf_printf(out, ",\"aggregation\":\"%s\",\"step\":%lld,\"points\":", r->gauge ? "average" : "sum",
               (long long)(r->tl_step / 1000000));
    render_points(r->timeline, r->nbuckets, r->tl_start, r->tl_step, out);
    buf_printf(out, ",\"total\":%lld,\"profiles\":%llu", (long long)llround(r->total), (unsigned long long)r->profiles);
    if (groups) render_groups(groups, r, out);
    buf_putc(out, '}');
}
