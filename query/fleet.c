/* fleet.c - see fleet.h. */
#include "query/fleet.h"

#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/vec.h"
#include "query/render.h"
#include "query/tree.h"

/* Adds group g's merge (its tree t) to f: one cell per function with a value. */
static int add_group(fleet_t *f, uint32_t g, const tree_t *t, const merge_result_t *r) {
    int64_t *self, *total;
    if (top_sums(t, r, &self, &total)) return -1;
    int rc = 0;
    for (size_t i = 0; i < t->sym->nstrings && rc == 0; i++) {
        if (!self[i] && !total[i]) continue;
        uint32_t name = symtab_string(f->names, symtab_str(t->sym, (uint32_t)i), t->sym->slen[i]);
        if (name == SYM_NONE || VEC_RESERVE(f->cells, f->cap, f->ncells + 1)) rc = -1;
        else f->cells[f->ncells++] = (fleet_cell_t){name, g, self[i], total[i]};
    }
    free(self);
    free(total);
    f->total += t->n[0].total + r->fn_all;
    f->profiles += r->profiles;
    return rc;
}

static void set_type(fleet_t *f, const merge_result_t *r) {
    memcpy(f->meta.type_id, r->type_id, sizeof f->meta.type_id);
    f->meta.type = r->type;
    f->meta.gauge = r->gauge;
}

/* Merges q narrowed to group g's values (sel restored after) into f. */
static int merge_group(store_t *st, const merge_query_t *q, selector_t *sel, fleet_t *f, uint32_t g, hr_err_t *err) {
    size_t base = sel->n;
    int rc = 0;
    for (size_t k = 0; k < f->width && rc == 0; k++)
        rc = selector_add_eq(sel, f->labels[k], f->g.v[(size_t)g * f->width + k], err);
    merge_query_t one = *q;
    one.sel = sel;
    /* A group's merge is freed before the next: its share of the budget goes with it. */
    budget_hold_t hold = {q->mem ? q->mem->b : NULL, 0};
    one.mem = q->mem ? &hold : NULL;
    merge_result_t r;
    memset(&r, 0, sizeof r);
    tree_t t = {0};
    if (rc == 0) rc = merge_run(st, &one, &r, err);
    if (rc == 0) rc = tree_build(&t, &r, err);
    if (rc == 0 && add_group(f, g, &t, &r)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    size_t now = f->cap * sizeof *f->cells + symtab_bytes(f->names);
    if (rc == 0 && q->mem && now > f->charged &&
        budget_hold_more(q->mem, now - f->charged, "this query's fleet table", err))
        rc = -1;
    f->charged = now > f->charged ? now : f->charged;
    if (rc == 0 && !f->meta.type_id[0]) set_type(f, &r);
    tree_destroy(&t);
    merge_result_destroy(&r);
    budget_hold_release(&hold);
    selector_truncate(sel, base);
    return rc;
}

int fleet_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *labels, size_t width, fleet_t *out,
              hr_err_t *err) {
    memset(out, 0, sizeof *out);
    if (width > GROUPBY_MAX_LABELS)
        return hr_fail(err, HR_EINVAL, "a group-by takes at most %d labels, not %zu", GROUPBY_MAX_LABELS, width);
    out->labels = labels, out->width = width;
    if (!(out->names = symtab_new())) return hr_fail(err, HR_ENOMEM, "out of memory");
    catalog_query_t cq = {q->tenant, sel, 1, q->from, q->until, q->deadline_ns};
    if (catalog_groups(st, &cq, 1, labels, width, &out->g, err)) return -1;
    for (size_t g = 0; g < out->g.n; g++)
        if (merge_group(st, q, sel, out, (uint32_t)g, err)) return -1;
    if (out->g.n) return 0;
    merge_result_t r; /* nothing selected: one empty merge for the type's name and unit */
    int rc = merge_run(st, q, &r, err);
    if (rc == 0) set_type(out, &r);
    merge_result_destroy(&r);
    return rc;
}

/* Cells of one function together, each function's largest self (then total) first. */
static int by_name_then_self(const void *a, const void *b) {
    const fleet_cell_t *x = a, *y = b;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    if (x->self != y->self) return x->self > y->self ? -1 : 1;
    if (x->total != y->total) return x->total > y->total ? -1 : 1;
    return (x->group > y->group) - (x->group < y->group);
}

static void put_group(const fleet_t *f, const fleet_cell_t *c, int first, buf_t *out) {
    buf_printf(out, "%s{\"labels\":", first ? "" : ",");
    render_group_labels((const char *const *)f->labels, f->g.v + (size_t)c->group * f->width, f->width, out);
    buf_printf(out, ",\"self\":%lld,\"total\":%lld}", (long long)c->self, (long long)c->total);
}

int fleet_render(const fleet_t *f, size_t limit, buf_t *out) {
    size_t nn = f->names->nstrings;
    int64_t *self = calloc(nn + 1, sizeof *self), *total = calloc(nn + 1, sizeof *total);
    size_t *first = calloc(nn + 2, sizeof *first);
    uint32_t *ids = malloc((nn + 1) * sizeof *ids);
    fleet_cell_t *cells = malloc((f->ncells + 1) * sizeof *cells);
    int rc = self && total && first && ids && cells ? 0 : -1;
    if (rc == 0) {
        memcpy(cells, f->cells, f->ncells * sizeof *cells);
        qsort(cells, f->ncells, sizeof *cells, by_name_then_self);
        for (size_t i = 0; i < f->ncells; i++)
            self[cells[i].name] += cells[i].self, total[cells[i].name] += cells[i].total;
        for (size_t i = f->ncells; i-- > 0;) first[cells[i].name] = i; /* a name's first cell */
        size_t n = 0;
        for (size_t i = 0; i < nn; i++)
            if (self[i] || total[i]) ids[n++] = (uint32_t)i;
        top_rank(ids, n, self, f->names);
        if (limit && n > limit) n = limit;
        buf_printf(out, "{\"functions\":[");
        for (size_t i = 0; i < n; i++) {
            buf_printf(out, "%s{\"name\":", i ? "," : "");
            jsonw_str(out, symtab_str(f->names, ids[i]));
            buf_printf(out, ",\"self\":%lld,\"total\":%lld,\"groups\":[", (long long)self[ids[i]],
                       (long long)total[ids[i]]);
            for (size_t c = first[ids[i]]; c < f->ncells && cells[c].name == ids[i]; c++)
                put_group(f, &cells[c], c == first[ids[i]], out);
            buf_printf(out, "]}");
        }
        buf_printf(out, "],\"groupBy\":[");
        for (size_t k = 0; k < f->width; k++) {
            if (k) buf_putc(out, ',');
            jsonw_str(out, f->labels[k]);
        }
        buf_printf(out, "],\"total\":%lld,\"unit\":", (long long)f->total);
        jsonw_str(out, f->meta.type.sample_unit);
        buf_printf(out, ",\"profileType\":");
        jsonw_str(out, f->meta.type_id);
        buf_printf(out, ",\"aggregation\":\"%s\",\"profiles\":%llu}", f->meta.gauge ? "average" : "sum",
                   (unsigned long long)f->profiles);
        rc = out->oom ? -1 : 0;
    }
    free(self), free(total), free(first), free(ids), free(cells);
    return rc;
}

void fleet_destroy(fleet_t *f) {
    symtab_free(f->names);
    free(f->cells);
    free(f->g.v);
    memset(f, 0, sizeof *f);
}
