/* top.c - the table-shaped renderers: the top table, folded text, Grafana data frame.
 *
 * A function's self is the sum of self over its nodes; its total counts each
 * sample once even under recursion (a node adds its total only when no ancestor
 * has the same name), which is what go tool pprof's `cum` column means. A merge that
 * read block function tables (merge.h's fn_*) holds those sums already, by name: the
 * table adds them to the tree's. */
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "query/render.h"

typedef struct {
    const tree_t *t;
    int64_t *self, *total;
    uint32_t *onpath;
} top_t;

static int top_visit(void *ctx, uint32_t node, size_t depth, int enter) {
    (void)depth;
    top_t *c = ctx;
    if (node == 0) return 1;
    const tree_node_t *n = &c->t->n[node];
    if (enter) {
        c->self[n->name] += n->self;
        if (c->onpath[n->name]++ == 0) c->total[n->name] += n->total;
    } else {
        c->onpath[n->name]--;
    }
    return 1;
}

typedef struct {
    const int64_t *self;
    const symtab_t *names;
} rank_t;

static int by_self(const void *a, const void *b, void *ctx) {
    const rank_t *r = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (r->self[x] != r->self[y]) return r->self[x] > r->self[y] ? -1 : 1;
    return strcmp(symtab_str(r->names, x), symtab_str(r->names, y));
}

void top_rank(uint32_t *ids, size_t n, const int64_t *self, const symtab_t *names) {
    rank_t r = {self, names};
    qsort_r(ids, n, sizeof *ids, by_self, &r);
}

int top_sums(const tree_t *t, const merge_result_t *r, int64_t **self, int64_t **total) {
    size_t ns = t->sym->nstrings;
    top_t c = {t, calloc(ns + 1, sizeof(int64_t)), calloc(ns + 1, sizeof(int64_t)), calloc(ns + 1, sizeof(uint32_t))};
    int rc = c.self && c.total && c.onpath && tree_walk(t, top_visit, &c) == 0 ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < r->nfn && i < ns; i++) c.self[i] += r->fn_self[i], c.total[i] += r->fn_total[i];
    free(c.onpath);
    if (rc) free(c.self), free(c.total), c.self = c.total = NULL;
    *self = c.self, *total = c.total;
    return rc;
}

int render_top(const tree_t *t, const merge_result_t *r, size_t limit, buf_t *out) {
    size_t ns = t->sym->nstrings;
    top_t c = {t, NULL, NULL, NULL};
    uint32_t *ids = malloc((ns + 1) * sizeof *ids);
    int rc = -1;
    if (!ids || top_sums(t, r, &c.self, &c.total)) goto out;
    size_t n = 0;
    for (size_t i = 0; i < ns; i++)
        if (c.total[i] || c.self[i]) ids[n++] = (uint32_t)i;
    top_rank(ids, n, c.self, t->sym);
    if (limit && n > limit) n = limit;
    buf_printf(out, "{\"functions\":[");
    for (size_t i = 0; i < n; i++) {
        buf_printf(out, "%s{\"name\":", i ? "," : "");
        jsonw_str(out, symtab_str(t->sym, ids[i]));
        buf_printf(out, ",\"self\":%lld,\"total\":%lld}", (long long)c.self[ids[i]], (long long)c.total[ids[i]]);
    }
    buf_printf(out, "],\"total\":%lld,\"unit\":", (long long)(t->n[0].total + r->fn_all));
    jsonw_str(out, r->type.sample_unit);
    buf_printf(out, ",\"profileType\":");
    jsonw_str(out, r->type_id);
    buf_printf(out, ",\"aggregation\":\"%s\",\"profiles\":%llu}", r->gauge ? "average" : "sum",
               (unsigned long long)r->profiles);
    rc = out->oom ? -1 : 0;
out:
    free(c.self);
    free(c.total);
    free(ids);
    return rc;
}

typedef struct {
    const tree_t *t;
    uint32_t *path;
    buf_t *out;
} folded_t;

static int folded_visit(void *ctx, uint32_t node, size_t depth, int enter) {
    folded_t *f = ctx;
    if (!enter) return 1;
    f->path[depth] = node;
    const tree_node_t *n = &f->t->n[node];
    if (node == 0 || n->self == 0) return 1;
    for (size_t i = 1; i <= depth; i++) {
        if (i > 1) buf_putc(f->out, ';');
        const char *s = tree_name(f->t, f->path[i]);
        buf_append(f->out, s, strlen(s));
    }
    buf_printf(f->out, " %lld\n", (long long)n->self);
    return 1;
}

int render_folded(const tree_t *t, buf_t *out) {
    folded_t f = {t, malloc((t->len + 1) * sizeof(uint32_t)), out};
    if (!f.path) return -1;
    int rc = tree_walk(t, folded_visit, &f);
    free(f.path);
    return rc || out->oom ? -1 : 0;
}

/* ---- dataframe: the nested-set table of Grafana's flame graph panel ----
 * One row per node in depth-first pre-order (siblings in name order): level (depth,
 * root 0), value (total), self, label. The panel rebuilds the tree from this order. */

typedef struct {
    const tree_t *t;
    buf_t level, value, self, label;
    size_t rows;
} frame_t;

static int frame_visit(void *ctx, uint32_t node, size_t depth, int enter) {
    frame_t *f = ctx;
    if (!enter) return 1;
    const tree_node_t *n = &f->t->n[node];
    const char *sep = f->rows ? "," : "";
    buf_printf(&f->level, "%s%zu", sep, depth);
    buf_printf(&f->value, "%s%lld", sep, (long long)n->total);
    buf_printf(&f->self, "%s%lld", sep, (long long)n->self);
    if (f->rows) buf_putc(&f->label, ',');
    jsonw_str(&f->label, tree_name(f->t, node));
    f->rows++;
    return 1;
}

int render_dataframe(const tree_t *t, const merge_result_t *r, buf_t *out) {
    frame_t f = {.t = t};
    buf_init(&f.level), buf_init(&f.value), buf_init(&f.self), buf_init(&f.label);
    int rc = tree_walk(t, frame_visit, &f);
    const char *unit = !strcmp(r->type.sample_unit, "nanoseconds") ? "ns"
                       : !strcmp(r->type.sample_unit, "bytes")     ? "bytes"
                                                                   : "short";
    buf_printf(out,
               "{\"name\":\"response\",\"meta\":{\"preferredVisualization\":\"flamegraph\"},\"unit\":\"%s\","
               "\"profileType\":",
               unit);
    jsonw_str(out, r->type_id);
    buf_printf(out, ",\"fields\":{\"level\":[");
    buf_append(out, f.level.data, f.level.len);
    buf_printf(out, "],\"value\":[");
    buf_append(out, f.value.data, f.value.len);
    buf_printf(out, "],\"self\":[");
    buf_append(out, f.self.data, f.self.len);
    buf_printf(out, "],\"label\":[");
    buf_append(out, f.label.data, f.label.len);
    buf_printf(out, "]}}");
    int oom = f.level.oom || f.value.oom || f.self.oom || f.label.oom || out->oom;
    buf_free(&f.level), buf_free(&f.value), buf_free(&f.self), buf_free(&f.label);
    return rc || oom ? -1 : 0;
}
