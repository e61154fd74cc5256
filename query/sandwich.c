/* sandwich.c - the `sandwich` renderer: one function with its callers above and its
 * callees below, merged over every place it occurs (Pyroscope's sandwich view;
 * go tool pprof -peek's numbers one level deep).
 *
 * Both sides are ordinary merged profiles built from frame paths, so the flame graph
 * renderer draws them: the callees side holds, for each sample through the
 * function, the path from its outermost occurrence down to the leaf; the callers
 * side the path from its innermost occurrence up to the root, reversed. Each sample
 * counts once on each side however often it recurses through the function, so both
 * roots total what `-top` calls the function's cum. Frames are named as in every
 * other view (tree.h): a location's lines, inlined callees after their caller, an
 * address when it has none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/vec.h"
#include "query/render.h"

typedef struct {
    merge_result_t *src;
    uint32_t target;  /* the function's name, a string id of src->sym */
    uint32_t *frames; /* one stack's frame names, root first */
    size_t nframes, cap;
    merge_result_t side[2]; /* callers, callees */
} sandwich_t;

/* The string id naming a line's frame, or an address frame (interned: the names live
 * in the result, as tree_build leaves them). SYM_NONE on OOM. */
static uint32_t line_frame(symtab_t *t, const sym_line_t *l) {
    const sym_function_t *f = &t->functions[l->function];
    if (f->name) return f->name;
    return f->system_name ? f->system_name : symtab_string(t, "?", 1);
}

static uint32_t address_frame(symtab_t *t, uint64_t address) {
    char a[32];
    int n = snprintf(a, sizeof a, "0x%llx", (unsigned long long)address);
    return symtab_string(t, a, (size_t)n);
}

/* Fills c->frames with stack s's frame names, root first. 0 or -1. */
static int stack_frames(sandwich_t *c, uint32_t s) {
    symtab_t *t = c->src->sym;
    c->nframes = 0;
    for (; s; s = t->stacks[s].parent) {
        const sym_location_t loc = t->locations[t->stacks[s].location];
        if (VEC_RESERVE(c->frames, c->cap, c->nframes + loc.nlines + 1)) return -1;
        for (uint32_t i = 0; i < loc.nlines; i++) /* innermost first: reversed below */
            if ((c->frames[c->nframes++] = line_frame(t, &t->lines[loc.first_line + i])) == SYM_NONE) return -1;
        if (!loc.nlines && (c->frames[c->nframes++] = address_frame(t, loc.address)) == SYM_NONE) return -1;
    }
    for (size_t i = 0, j = c->nframes; i + 1 < j; i++, j--) {
        uint32_t x = c->frames[i];
        c->frames[i] = c->frames[j - 1], c->frames[j - 1] = x;
    }
    return 0;
}

/* A frame of side r: a location of one line of a function named like src's name. */
static uint32_t side_location(merge_result_t *r, const symtab_t *src, uint32_t name) {
    const char *s = symtab_str(src, name);
    uint32_t id = symtab_string(r->sym, s, strlen(s));
    sym_function_t f = {.name = id};
    uint32_t fid = id == SYM_NONE ? SYM_NONE : symtab_function(r->sym, &f);
    sym_line_t l = {fid, 0};
    return fid == SYM_NONE ? SYM_NONE : symtab_location(r->sym, 0, 0, &l, 1);
}

/* Adds the frames frames[from], frames[from + step], ... (n of them) as one stack of
 * side r with value v. 0 or -1. */
static int add_path(sandwich_t *c, merge_result_t *r, size_t from, long step, size_t n, double v) {
    uint32_t st = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t loc = side_location(r, c->src->sym, c->frames[(size_t)((long)from + step * (long)k)]);
        if (loc == SYM_NONE || (st = symtab_stack(r->sym, st, loc)) == SYM_NONE) return -1;
    }
    size_t have = r->nself;
    if (st >= have) {
        if (VEC_RESERVE(r->self, r->self_cap, (size_t)st + 1)) return -1;
        memset(r->self + have, 0, ((size_t)st + 1 - have) * sizeof *r->self);
        r->nself = (size_t)st + 1;
    }
    r->self[st] += v;
    r->total += v;
    return 0;
}

static int add_stack(sandwich_t *c, uint32_t s, double v) {
    if (stack_frames(c, s)) return -1;
    size_t first = SIZE_MAX, last = 0;
    for (size_t i = 0; i < c->nframes; i++)
        if (c->frames[i] == c->target) last = i, first = first == SIZE_MAX ? i : first;
    if (first == SIZE_MAX) return 0;
    if (add_path(c, &c->side[0], last, -1, last + 1, v)) return -1;
    return add_path(c, &c->side[1], first, 1, c->nframes - first, v);
}

/* A side: an empty merge of src's type (its strings point into src->type_id). */
static int side_init(merge_result_t *r, const merge_result_t *src) {
    memset(r, 0, sizeof *r);
    memcpy(r->type_id, src->type_id, sizeof r->type_id);
    r->type = src->type;
    r->gauge = src->gauge;
    r->profiles = src->profiles;
    r->first_ns = src->first_ns, r->end_ns = src->end_ns;
    if (!(r->sym = symtab_new()) || VEC_RESERVE(r->self, r->self_cap, 1)) return -1;
    r->self[0] = 0, r->nself = 1;
    return 0;
}

static int render_side(merge_result_t *r, size_t max_nodes, buf_t *out, hr_err_t *err) {
    tree_t t;
    if (tree_build(&t, r, err)) return -1;
    int rc = render_flamegraph(&t, r, max_nodes, NULL, out);
    tree_destroy(&t);
    return rc;
}

int render_sandwich(merge_result_t *r, const char *function, size_t max_nodes, buf_t *out, hr_err_t *err) {
    sandwich_t c = {.src = r, .target = symtab_string(r->sym, function, strlen(function))};
    int rc = c.target == SYM_NONE ? -1 : 0;
    for (int i = 0; i < 2 && rc == 0; i++) rc = side_init(&c.side[i], r);
    for (size_t s = 1; rc == 0 && s < r->nself && s < r->sym->nstacks; s++)
        if (r->self[s] != 0) rc = add_stack(&c, (uint32_t)s, r->self[s]);
    if (rc == 0) {
        buf_printf(out, "{\"function\":");
        jsonw_str(out, function);
        buf_printf(out, ",\"callers\":");
        rc = render_side(&c.side[0], max_nodes, out, err);
    }
    if (rc == 0) {
        buf_printf(out, ",\"callees\":");
        rc = render_side(&c.side[1], max_nodes, out, err);
    }
    buf_putc(out, '}');
    for (int i = 0; i < 2; i++) merge_result_destroy(&c.side[i]);
    free(c.frames);
    return rc || out->oom ? -1 : 0;
}
