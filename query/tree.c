/* tree.c - see tree.h. */
#include "query/tree.h"

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

static uint32_t child(tree_t *t, uint32_t parent, uint32_t name) {
    child_key_t k = {parent, name};
    uint64_t h = hash_mix(parent, name);
    uint32_t id = idset_find(&t->set, h, &k, eq_child, t);
    if (id != UINT32_MAX) return id;
    if (VEC_RESERVE(t->n, t->cap, t->len + 1)) return TREE_NONE;
    id = (uint32_t)t->len;
    t->n[id] = (tree_node_t){parent, name, TREE_NONE, TREE_NONE, 0, 0};
    if (idset_add(&t->set, h, id)) return TREE_NONE;
    t->len++;
    return id;
}

/* The display name of one line of a location. */
static uint32_t line_name(symtab_t *sym, const sym_line_t *l) {
    const sym_function_t *f = &sym->functions[l->function];
    if (f->name) return f->name;
    if (f->system_name) return f->system_name;
    return symtab_string(sym, "?", 1);
}

static uint32_t address_name(symtab_t *sym, const sym_location_t *loc) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)loc->address);
    return symtab_string(sym, buf, (size_t)n);
}

/* Appends the frames of one location under parent; returns the innermost node. */
static uint32_t expand(tree_t *t, uint32_t parent, uint32_t location) {
    symtab_t *sym = t->sym;
    const sym_location_t *loc = &sym->locations[location];
    if (loc->nlines == 0) {
        uint32_t name = address_name(sym, loc);
        return name == SYM_NONE ? TREE_NONE : child(t, parent, name);
    }
    for (uint32_t i = loc->nlines; i-- > 0 && parent != TREE_NONE;) {
        /* Re-read each time: interning a name may move sym's arrays. */
        sym_line_t line = sym->lines[sym->locations[location].first_line + i];
        uint32_t name = line_name(sym, &line);
        parent = name == SYM_NONE ? TREE_NONE : child(t, parent, name);
    }
    return parent;
}

static int cmp_name(const void *a, const void *b, void *ctx) {
    const tree_t *t = ctx;
    return strcmp(tree_name(t, *(const uint32_t *)a), tree_name(t, *(const uint32_t *)b));
}

/* Links each node's children in name order: nodes grouped by parent first (a counting
 * sort: one pass to count, one to place), then each group sorted by name alone, so a
 * fleet's tree of many small sibling groups costs no global sort. */
static int link_children(tree_t *t) {
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

int tree_build(tree_t *t, merge_result_t *r, hr_err_t *err) {
    memset(t, 0, sizeof *t);
    t->sym = r->sym;
    uint32_t root_name = symtab_string(r->sym, "total", 5);
    uint32_t *frame = malloc((r->sym->nstacks ? r->sym->nstacks : 1) * sizeof *frame);
    if (!frame || root_name == SYM_NONE || VEC_RESERVE(t->n, t->cap, 1)) {
        free(frame);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    t->n[0] = (tree_node_t){TREE_NONE, root_name, TREE_NONE, TREE_NONE, 0, 0};
    t->len = 1;
    frame[0] = 0;
    t->n[0].self = r->nself ? llround(r->self[0]) : 0; /* the empty stack: value at the root itself */
    size_t nstacks = r->sym->nstacks;                  /* stacks never grow here; strings may */
    for (size_t s = 1; s < nstacks; s++) {
        /* A stack's parent has a smaller id, so its frame node is already known. */
        const sym_stack_t st = r->sym->stacks[s];
        frame[s] = expand(t, frame[st.parent], st.location);
        if (frame[s] == TREE_NONE) {
            free(frame);
            return hr_fail(err, HR_ENOMEM, "out of memory");
        }
        t->n[frame[s]].self += llround(r->self[s]);
    }
    free(frame);
    for (size_t i = t->len; i-- > 0;) {
        t->n[i].total += t->n[i].self;
        if (i) t->n[t->n[i].parent].total += t->n[i].total;
    }
    if (link_children(t)) return hr_fail(err, HR_ENOMEM, "out of memory");
    return 0;
}

void tree_destroy(tree_t *t) {
    free(t->n);
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
