/* pyrotree.c - Pyroscope's tree bytes: the PROFILE_FORMAT_TREE answer of the Connect
 * querier (SelectMergeStacktracesResponse.tree), which Pyroscope's own query path
 * merges and Grafana can ask for.
 *
 * The layout is a depth-first walk from a virtual root (empty name, self 0); each node
 * is uvarint(name length), the name, uvarint(self), uvarint(number of children), and
 * its children follow, each with its subtree, before the node's next sibling. Readers
 * attach each node to the last node still owed children, so sibling order carries no
 * meaning. As Pyroscope truncates it, a node is kept when its total is at least the
 * max_nodes-th largest total; a parent's dropped children become one child named
 * "other". The root's own self (samples without a stack) has no place in the format. */
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"
#include "query/render.h"

#define OTHER UINT32_MAX /* a stack entry standing for a parent's dropped children */

typedef struct {
    uint32_t node; /* or OTHER */
    int64_t value; /* OTHER: the dropped children's total */
} item_t;

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The smallest total kept: the max_nodes-th largest, or 0 to keep every node. -1 OOM. */
static int64_t min_value(const tree_t *t, size_t max_nodes) {
    if (!max_nodes || t->len <= max_nodes) return 0;
    int64_t *v = malloc(t->len * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < t->len; i++) v[i] = t->n[i].total;
    qsort(v, t->len, sizeof *v, cmp_desc);
    int64_t m = v[max_nodes - 1];
    free(v);
    return m;
}

static void put_node(buf_t *out, const char *name, int64_t self, uint64_t nchildren) {
    size_t n = strlen(name);
    buf_put_uvarint(out, n);
    buf_append(out, name, n);
    buf_put_uvarint(out, (uint64_t)(self > 0 ? self : 0));
    buf_put_uvarint(out, nchildren);
}

int render_pyroscope_tree(const tree_t *t, size_t max_nodes, buf_t *out) {
    if (!t->len || t->n[0].first_child == TREE_NONE) return 0; /* an empty tree is no bytes */
    int64_t minv = min_value(t, max_nodes);
    item_t *stack = NULL;
    size_t n = 0, cap = 0;
    if (minv < 0 || VEC_RESERVE(stack, cap, 1)) return free(stack), -1;
    stack[n++] = (item_t){0, 0}; /* node 0, "total", written as the virtual root */
    while (n) {
        item_t it = stack[--n];
        if (it.node == OTHER) {
            put_node(out, "other", it.value, 0);
            continue;
        }
        const tree_node_t *nd = &t->n[it.node];
        uint64_t kept = 0;
        int64_t other = 0;
        for (uint32_t c = nd->first_child; c != TREE_NONE; c = t->n[c].next_sibling) {
            if (t->n[c].total >= minv) kept++;
            else other += t->n[c].total;
        }
        put_node(out, it.node ? tree_name(t, it.node) : "", it.node ? nd->self : 0, kept + (other > 0));
        if (VEC_RESERVE(stack, cap, n + kept + 2)) return free(stack), -1;
        if (other > 0) stack[n++] = (item_t){OTHER, other};
        for (uint32_t c = nd->first_child; c != TREE_NONE; c = t->n[c].next_sibling)
            if (t->n[c].total >= minv) stack[n++] = (item_t){c, 0};
    }
    free(stack);
    return out->oom ? -1 : 0;
}
