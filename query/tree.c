/* tree.c - see tree.h. */
#include "query/tree.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

typedef struct {
    uint32_t parent, name;
} child_key_t;

static int eq_child(const void *ctx, uint32_t id, const void *key) {
    const tree_t *t = ctx;
    const child_key_t *k = key;
    return t->n[id].parent == k->parent && t->n[id].name == k->name;
}

/* While a tree is built, each node's children are a list (first_child, next_sibling,
 * newest first) that finds a child by walking it: most nodes of a call tree have a few
 * children, created close together, and a walk over them costs no hash probe into a
 * table as big as a fleet's tree. A node past CHAIN_MAX children gets its children
 * indexed in t->set by (parent, name) instead. tree_finish relinks the lists in name
 * order. */
#define CHAIN_MAX 8

static uint64_t child_hash(uint32_t parent, uint32_t name) { return hash_mix(parent, name); }

static int index_children(tree_t *t, uint32_t parent) {
    for (uint32_t c = t->n[parent].first_child; c != TREE_NONE; c = t->n[c].next_sibling)
        if (idset_add(&t->set, child_hash(parent, t->n[c].name), c)) return -1;
    return 0;
}

static uint32_t child(tree_t *t, uint32_t parent, uint32_t name) {
    child_key_t k = {parent, name};
    uint32_t id = TREE_NONE;
    if (t->kids[parent] <= CHAIN_MAX) {
        for (uint32_t c = t->n[parent].first_child; c != TREE_NONE; c = t->n[c].next_sibling)
            if (t->n[c].name == name) return c;
    } else if ((id = idset_find(&t->set, child_hash(parent, name), &k, eq_child, t)) != UINT32_MAX) {
        return id;
    }
    if (VEC_RESERVE(t->n, t->cap, t->len + 1) || VEC_RESERVE(t->kids, t->kids_cap, t->len + 1)) return TREE_NONE;
    id = (uint32_t)t->len++;
    t->n[id] = (tree_node_t){parent, name, TREE_NONE, t->n[parent].first_child, 0, 0};
    t->kids[id] = 0;
    t->n[parent].first_child = id;
    if (t->kids[parent] < UINT8_MAX) t->kids[parent]++;
    int rc = 0;
    if (t->kids[parent] == CHAIN_MAX + 1) rc = index_children(t, parent);
    else if (t->kids[parent] > CHAIN_MAX + 1) rc = idset_add(&t->set, child_hash(parent, name), id);
    return rc ? TREE_NONE : id;
}

/* Stacks of one symtab being added to a tree (tree_add). */
typedef struct {
    tree_t *t;
    const symtab_t *src; /* == t->sym: names need no copying */
    uint32_t *names;     /* src string id -> t->sym's, TREE_NONE until used; NULL when src is t->sym */
    uint32_t *node;      /* src stack id -> its node, TREE_NONE until reached */
    uint32_t *path;      /* stacks on the way up to a known one */
} adder_t;

/* t->sym's id for string sid of src. SYM_NONE on OOM. */
static uint32_t name_of(adder_t *a, uint32_t sid) {
    if (!a->names) return sid;
    if (a->names[sid] == TREE_NONE)
        a->names[sid] = symtab_string(a->t->sym, symtab_str(a->src, sid), a->src->slen[sid]);
    return a->names[sid];
}

/* The display name of one line of a location. */
static uint32_t line_name(adder_t *a, const sym_line_t *l) {
    const sym_function_t *f = &a->src->functions[l->function];
    if (f->name) return name_of(a, f->name);
    if (f->system_name) return name_of(a, f->system_name);
    return symtab_string(a->t->sym, "?", 1);
}

static uint32_t address_name(symtab_t *sym, const sym_location_t *loc) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)loc->address);
    return symtab_string(sym, buf, (size_t)n);
}

/* Appends the frames of one location under parent; returns the innermost node. */
static uint32_t expand(adder_t *a, uint32_t parent, uint32_t location) {
    tree_t *t = a->t;
    const sym_location_t *loc = &a->src->locations[location];
    if (loc->nlines == 0) {
        uint32_t name = address_name(t->sym, loc);
        return name == SYM_NONE ? TREE_NONE : child(t, parent, name);
    }
    for (uint32_t i = loc->nlines; i-- > 0 && parent != TREE_NONE;) {
        /* Re-read each time: interning a name may move src's arrays when src is t->sym. */
        sym_line_t line = a->src->lines[a->src->locations[location].first_line + i];
        uint32_t name = line_name(a, &line);
        parent = name == SYM_NONE ? TREE_NONE : child(t, parent, name);
    }
    return parent;
}

/* The node of stack s: its ancestors up to one already reached are expanded first. */
static uint32_t stack_node(adder_t *a, uint32_t s) {
    size_t up = 0;
    uint32_t x = s;
    while (x && a->node[x] == TREE_NONE) a->path[up++] = x, x = a->src->stacks[x].parent;
    uint32_t at = x ? a->node[x] : 0;
    while (up-- > 0 && at != TREE_NONE) {
        uint32_t y = a->path[up];
        at = a->node[y] = expand(a, at, a->src->stacks[y].location);
    }
    return at;
}

int tree_add(tree_t *t, const symtab_t *src, const double *self, size_t n) {
    assert(n <= src->nstacks);
    adder_t a = {t, src, NULL, malloc((n ? n : 1) * sizeof *a.node), malloc((n ? n : 1) * sizeof *a.path)};
    int rc = !a.node || !a.path ? -1 : 0;
    if (rc == 0 && src != t->sym && !(a.names = malloc((src->nstrings ? src->nstrings : 1) * sizeof *a.names))) rc = -1;
    if (a.names) memset(a.names, 0xff, src->nstrings * sizeof *a.names);
    if (a.node) memset(a.node, 0xff, n * sizeof *a.node);
    if (rc == 0 && n && self[0]) t->n[0].self += llround(self[0]); /* the empty stack: at the root itself */
    for (size_t s = 1; s < n && rc == 0; s++) {
        if (self[s] == 0) continue;
        uint32_t at = stack_node(&a, (uint32_t)s);
        if (at == TREE_NONE) rc = -1;
        else t->n[at].self += llround(self[s]);
    }
    free(a.names);
    free(a.node);
    free(a.path);
    return rc;
}

size_t tree_bytes(const tree_t *t) { return t->cap * sizeof *t->n + t->kids_cap + idset_bytes(&t->set); }

static int cmp_name(const void *a, const void *b, void *ctx) {
    const tree_t *t = ctx;
    return strcmp(tree_name(t, *(const uint32_t *)a), tree_name(t, *(const uint32_t *)b));
}

/* Links each node's children in name order: nodes grouped by parent first (a counting
 * sort: one pass to count, one to place), then each group sorted by name alone, so a
 * fleet's tree of many small sibling groups costs no global sort. */
static int link_children(tree_t *t) {
    for (size_t i = 0; i < t->len; i++) t->n[i].first_child = t->n[i].next_sibling = TREE_NONE;
    uint32_t *order = malloc(t->len * sizeof *order), *start = calloc(t->len + 1, sizeof *start);
    if (!order || !start) return free(order), free(start), -1;
    for (size_t i = 1; i < t->len; i++) start[t->n[i].parent + 1]++;
    for (size_t p = 0; p < t->len; p++) start[p + 1] += start[p];
    for (size_t i = 1; i < t->len; i++) order[start[t->n[i].parent]++] = (uint32_t)i; /* start[p]: p's group end */
    for (size_t p = 0, from = 0; p < t->len; from = start[p++]) {
        size_t n = start[p] - from;
        if (n > 1) qsort_r(order + from, n, sizeof *order, cmp_name, t);
        for (size_t k = n; k-- > 0;) { /* back to front so the list ends up in order */
            tree_node_t *c = &t->n[order[from + k]];
            c->next_sibling = t->n[p].first_child;
            t->n[p].first_child = order[from + k];
        }
    }
    free(order);
    free(start);
    return 0;
}

int tree_init(tree_t *t, symtab_t *sym) {
    memset(t, 0, sizeof *t);
    t->sym = sym;
    uint32_t root_name = symtab_string(sym, "total", 5);
    if (root_name == SYM_NONE || VEC_RESERVE(t->n, t->cap, 1) || VEC_RESERVE(t->kids, t->kids_cap, 1)) return -1;
    t->n[0] = (tree_node_t){TREE_NONE, root_name, TREE_NONE, TREE_NONE, 0, 0};
    t->kids[0] = 0;
    t->len = 1;
    return 0;
}

int tree_finish(tree_t *t) {
    for (size_t i = t->len; i-- > 0;) {
        t->n[i].total += t->n[i].self;
        if (i) t->n[t->n[i].parent].total += t->n[i].total;
    }
    return link_children(t);
}

int tree_build(tree_t *t, merge_result_t *r, hr_err_t *err) {
    int rc = 0;
    if (r->tree) {
        *t = *r->tree;
        free(r->tree);
        r->tree = NULL;
        t->sym = r->sym;
    } else {
        rc = tree_init(t, r->sym);
    }
    /* Stacks never grow here; strings may. */
    if (rc == 0) rc = tree_add(t, r->sym, r->self, r->sym->nstacks);
    if (rc == 0) rc = tree_finish(t);
    return rc ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
}

void tree_destroy(tree_t *t) {
    free(t->n);
    free(t->kids);
    idset_free(&t->set);
    memset(t, 0, sizeof *t);
}

int tree_walk(const tree_t *t, tree_visit_fn visit, void *ctx) {
    if (!t->len) return 0;
    /* Explicit stack: real call trees can be thousands of frames deep. */
    uint32_t *stack = malloc(t->len * sizeof *stack);
    if (!stack) return -1;
    size_t sp = 0, depth = 0;
    uint32_t cur = 0;
    for (;;) {
        if (cur != TREE_NONE) {
            if (visit(ctx, cur, depth, 1) && t->n[cur].first_child != TREE_NONE) {
                stack[sp++] = cur;
                depth++;
                cur = t->n[cur].first_child;
                continue;
            }
            visit(ctx, cur, depth, 0);
            cur = t->n[cur].next_sibling;
            continue;
        }
        if (!sp) break;
        cur = stack[--sp];
        depth--;
        visit(ctx, cur, depth, 0);
        cur = cur == 0 ? TREE_NONE : t->n[cur].next_sibling;
        if (!sp && cur == TREE_NONE) break;
    }
    free(stack);
    return 0;
}
