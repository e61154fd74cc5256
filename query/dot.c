/* dot.c - render_dot (render.h): a merge's call graph as Graphviz DOT, as
 * `go tool pprof -dot` draws it.
 *
 * One node per function (frame name) with its flat (self) and cum (total, each sample
 * once however often the function recurs in it); one edge per caller -> callee pair
 * of adjacent frames, weighted by the samples whose stack holds the pair, each sample
 * once, as pprof weighs its edges (a recursive call draws no edge to itself). The max_nodes functions with the largest cum are
 * kept (ties by name) and the edges between them. Node and edge tooltips are pprof's:
 * `name (value)` and `caller -> callee (value)`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "query/render.h"

typedef struct {
    uint64_t key; /* caller name << 32 | callee name */
    int64_t weight;
    uint32_t active; /* times the pair is on the path being walked */
} edge_t;

/* The call graph's edges: at most one per tree node, found by key through `at`. */
typedef struct {
    const tree_t *t;
    u64map_t at; /* key -> index in e */
    edge_t *e;
    size_t n;
    int oom;
} edges_t;

static edge_t *edge_of(edges_t *g, uint64_t key) {
    int added;
    uint64_t *i = u64map_put(&g->at, key, &added);
    if (!i) return NULL;
    if (added) *i = g->n, g->e[g->n++] = (edge_t){key, 0, 0};
    return &g->e[*i];
}

/* A pair adds a node's total when it is not already on the path above (once per sample). */
static int edge_visit(void *ctx, uint32_t node, size_t depth, int enter) {
    (void)depth;
    edges_t *g = ctx;
    const tree_node_t *n = &g->t->n[node];
    if (node == 0 || n->parent == 0) return 1;
    edge_t *e = edge_of(g, (uint64_t)g->t->n[n->parent].name << 32 | n->name);
    if (!e) return g->oom = 1, 0; /* the walk goes on; the answer is refused */
    if (enter && e->active++ == 0) e->weight += n->total;
    if (!enter) e->active--;
    return 1;
}

typedef struct {
    const int64_t *total;
    const symtab_t *names;
} by_cum_t;

static int by_cum(const void *a, const void *b, void *ctx) {
    const by_cum_t *c = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (c->total[x] != c->total[y]) return c->total[x] > c->total[y] ? -1 : 1;
    return strcmp(symtab_str(c->names, x), symtab_str(c->names, y));
}

static int by_weight(const void *a, const void *b, void *ctx) {
    const edge_t *x = a, *y = b;
    const uint32_t *node_of = ctx;
    if (x->weight != y->weight) return x->weight > y->weight ? -1 : 1;
    uint32_t xa = node_of[x->key >> 32], ya = node_of[y->key >> 32];
    if (xa != ya) return xa < ya ? -1 : 1;
    return (node_of[(uint32_t)x->key] > node_of[(uint32_t)y->key]) -
           (node_of[(uint32_t)x->key] < node_of[(uint32_t)y->key]);
}

/* s with `"` and `\` escaped, for a DOT string. */
static void dot_str(buf_t *out, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf_putc(out, '\\');
        buf_putc(out, *s);
    }
}

static const char *unit_suffix(const char *unit) {
    return !strcmp(unit, "nanoseconds") ? "ns" : !strcmp(unit, "bytes") ? "B" : "";
}

static double pct(int64_t v, int64_t total) { return total ? 100.0 * (double)v / (double)total : 0; }

static void write_node(buf_t *out, size_t id, const char *name, int64_t flat, int64_t cum, int64_t total,
                       int64_t max_flat, const char *u) {
    int size = 8 + (max_flat ? (int)(42.0 * sqrt((double)(flat < 0 ? -flat : flat) / (double)max_flat)) : 0);
    buf_printf(out, "N%zu [label=\"", id);
    dot_str(out, name);
    if (flat) buf_printf(out, "\\n%lld%s (%.2f%%)\\nof ", (long long)flat, u, pct(flat, total));
    else buf_printf(out, "\\n0 of ");
    buf_printf(out, "%lld%s (%.2f%%)\" id=\"node%zu\" fontsize=%d shape=box tooltip=\"", (long long)cum, u,
               pct(cum, total), id, size);
    dot_str(out, name);
    buf_printf(out, " (%lld%s)\"]\n", (long long)cum, u);
}

static void write_edge(buf_t *out, size_t from, size_t to, const char *a, const char *b, int64_t w, int64_t total,
                       const char *u) {
    int width = 1 + (int)(5.0 * pct(w, total) / 100.0);
    buf_printf(out, "N%zu -> N%zu [label=\" %lld%s\" weight=%d penwidth=%d tooltip=\"", from, to, (long long)w, u,
               (int)pct(w, total) + 1, width);
    for (int k = 0; k < 2; k++) {
        dot_str(out, a);
        buf_printf(out, " -> ");
        dot_str(out, b);
        buf_printf(out, " (%lld%s)\"%s", (long long)w, u, k ? "]\n" : " labeltooltip=\"");
    }
}

int render_dot(const tree_t *t, const merge_result_t *r, size_t max_nodes, buf_t *out) {
    size_t ns = t->sym->nstrings;
    int64_t *self = NULL, *total = NULL;
    edges_t g = {.t = t, .e = malloc((t->len + 1) * sizeof(edge_t))};
    uint32_t *ids = malloc((ns + 1) * sizeof *ids), *node_of = calloc(ns + 1, sizeof *node_of);
    int rc = g.e && ids && node_of && top_sums(t, r, &self, &total) == 0 && tree_walk(t, edge_visit, &g) == 0 && !g.oom
                 ? 0
                 : -1;
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < ns; i++)
        if (total[i] || self[i]) ids[n++] = (uint32_t)i;
    by_cum_t c = {total, t->sym};
    if (rc == 0) qsort_r(ids, n, sizeof *ids, by_cum, &c);
    if (max_nodes && n > max_nodes) n = max_nodes;
    int64_t all = t->n[0].total, shown = 0, max_flat = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        node_of[ids[i]] = (uint32_t)(i + 1);
        shown += self[ids[i]];
        if (llabs(self[ids[i]]) > max_flat) max_flat = llabs(self[ids[i]]);
    }
    const char *u = unit_suffix(r->type.sample_unit);
    if (rc == 0) {
        buf_printf(out, "digraph \"%s\" {\nnode [style=filled fillcolor=\"#f8f8f8\"]\n", r->type.name);
        buf_printf(out,
                   "subgraph cluster_L { \"Type: %s\" [shape=box fontsize=16 label=\"Type: %s\\l"
                   "Showing nodes accounting for %lld%s, %.2f%% of %lld%s total\\l\" tooltip=\"%s\"] }\n",
                   r->type.sample_type, r->type.sample_type, (long long)shown, u, pct(shown, all), (long long)all, u,
                   r->type.name);
        for (size_t i = 0; i < n; i++)
            write_node(out, i + 1, symtab_str(t->sym, ids[i]), self[ids[i]], total[ids[i]], all, max_flat, u);
        size_t ne = 0; /* the kept edges, heaviest first, to the front of g.e */
        for (size_t i = 0; i < g.n; i++) {
            const edge_t *e = &g.e[i];
            uint32_t a = (uint32_t)(e->key >> 32), b = (uint32_t)e->key;
            if (a != b && node_of[a] && node_of[b] && e->weight) g.e[ne++] = *e; /* no self edge, as pprof */
        }
        qsort_r(g.e, ne, sizeof *g.e, by_weight, node_of);
        for (size_t i = 0; i < ne; i++) {
            uint32_t a = (uint32_t)(g.e[i].key >> 32), b = (uint32_t)g.e[i].key;
            write_edge(out, node_of[a], node_of[b], symtab_str(t->sym, a), symtab_str(t->sym, b), g.e[i].weight, all,
                       u);
        }
        buf_printf(out, "}\n");
    }
    free(self), free(total), free(g.e), free(ids), free(node_of);
    u64map_free(&g.at);
    return rc || out->oom ? -1 : 0;
}
