/* pprof_out.c - a merged profile as gzipped profile.proto, in canonical form.
 *
 * The merge result's symtab is a deduplicated profile; what it holds, and in which
 * order, depends on the blocks and heads the profiles were decoded from (a day
 * block, nine hourly ones, a cluster's segments). So the writer keeps only what the
 * samples reach and sorts every table by content: strings by their bytes, functions
 * by their strings, mappings by range and file, locations by mapping, address and
 * lines, samples by their location ids (equal ones summed). Ids follow that order,
 * so a merge gives the same bytes however its profiles were stored, on one node or
 * a cluster. The profile is dated by the merged profiles themselves (time_nanos the
 * earliest start, duration_nanos up to the latest end), as pprof's own merge dates
 * it; the query range says nothing about when the data was taken. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/render.h"
#include "wire/gzip.h"
#include "wire/profile.pb-c.h"

/* ---- the canonical numbering ---- */

/* Per table, old id -> new id (0: not written; strings: 0 is always "") and the
 * written entries in new-id order (by[k]: the old id of new id k + 1; for strings
 * of new id k). Entries equal in content share one new id. */
typedef struct {
    uint32_t *to, *by;
    size_t n; /* distinct entries written */
} order_t;

typedef struct {
    const symtab_t *s;
    order_t str, fn, map, loc;
} canon_t;

static void canon_free(canon_t *c) {
    order_t *o[4] = {&c->str, &c->fn, &c->map, &c->loc};
    for (int i = 0; i < 4; i++) free(o[i]->to), free(o[i]->by);
}

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }
static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int cmp_str(const void *a, const void *b, void *ctx) {
    const canon_t *c = ctx;
    return strcmp(symtab_str(c->s, *(const uint32_t *)a), symtab_str(c->s, *(const uint32_t *)b));
}

/* New string ids keep the strings' order, so comparing them compares the strings. */
static int cmp_fn(const void *a, const void *b, void *ctx) {
    const canon_t *c = ctx;
    const sym_function_t *x = &c->s->functions[*(const uint32_t *)a], *y = &c->s->functions[*(const uint32_t *)b];
    const uint32_t *t = c->str.to;
    int r = cmp_u64(t[x->name], t[y->name]);
    if (!r) r = cmp_u64(t[x->system_name], t[y->system_name]);
    if (!r) r = cmp_u64(t[x->filename], t[y->filename]);
    return r ? r : cmp_i64(x->start_line, y->start_line);
}

static int cmp_map(const void *a, const void *b, void *ctx) {
    const canon_t *c = ctx;
    const sym_mapping_t *x = &c->s->mappings[*(const uint32_t *)a], *y = &c->s->mappings[*(const uint32_t *)b];
    int r = cmp_u64(x->start, y->start);
    if (!r) r = cmp_u64(x->limit, y->limit);
    if (!r) r = cmp_u64(x->offset, y->offset);
    if (!r) r = cmp_u64(c->str.to[x->filename], c->str.to[y->filename]);
    return r ? r : cmp_u64(c->str.to[x->build_id], c->str.to[y->build_id]);
}

static int cmp_loc(const void *a, const void *b, void *ctx) {
    const canon_t *c = ctx;
    const symtab_t *s = c->s;
    const sym_location_t *x = &s->locations[*(const uint32_t *)a], *y = &s->locations[*(const uint32_t *)b];
    int r = cmp_u64(c->map.to[x->mapping], c->map.to[y->mapping]);
    if (!r) r = cmp_u64(x->address, y->address);
    if (!r) r = cmp_u64(x->nlines, y->nlines);
    for (uint32_t k = 0; !r && k < x->nlines; k++) {
        const sym_line_t *p = &s->lines[x->first_line + k], *q = &s->lines[y->first_line + k];
        r = cmp_u64(c->fn.to[p->function], c->fn.to[q->function]);
        if (!r) r = cmp_i64(p->line, q->line);
    }
    return r;
}

/* Numbers the used entries of one table (to[id] != 0 marks them; ids from `first`,
 * `cap` ids): sorted by cmp, equal ones sharing a number, numbers from base. */
static int number(canon_t *c, order_t *o, size_t first, size_t cap, uint32_t base,
                  int (*cmp)(const void *, const void *, void *)) {
    size_t n = 0;
    if (!(o->by = malloc((cap + 1) * sizeof *o->by))) return -1;
    for (size_t i = first; i < cap; i++)
        if (o->to[i]) o->by[n++] = (uint32_t)i;
    qsort_r(o->by, n, sizeof *o->by, cmp, c);
    size_t w = 0;
    for (size_t k = 0; k < n; k++) {
        if (w && cmp(&o->by[w - 1], &o->by[k], c) == 0) {
            o->to[o->by[k]] = (uint32_t)(base + w - 1); /* the same content: the same id */
            continue;
        }
        o->by[w] = o->by[k];
        o->to[o->by[w]] = (uint32_t)(base + w);
        w++;
    }
    o->n = w;
    return 0;
}

/* Marks what the samples reach, then numbers every table in content order. */
static int canon_build(canon_t *c, const merge_result_t *r) {
    const symtab_t *s = r->sym;
    c->s = s;
    if (!(c->str.to = calloc(s->nstrings + 1, sizeof(uint32_t))) ||
        !(c->fn.to = calloc(s->nfunctions + 1, sizeof(uint32_t))) ||
        !(c->map.to = calloc(s->nmappings + 1, sizeof(uint32_t))) ||
        !(c->loc.to = calloc(s->nlocations + 1, sizeof(uint32_t))))
        return -1;
    for (size_t i = 0; i < r->nself; i++)
        if (llround(r->self[i]))
            for (uint32_t st = (uint32_t)i; st; st = s->stacks[st].parent) c->loc.to[s->stacks[st].location] = 1;
    for (size_t i = 1; i < s->nlocations; i++) {
        if (!c->loc.to[i]) continue;
        const sym_location_t *l = &s->locations[i];
        c->map.to[l->mapping] = l->mapping != 0;
        for (uint32_t k = 0; k < l->nlines; k++) c->fn.to[s->lines[l->first_line + k].function] = 1;
    }
    for (size_t i = 1; i < s->nfunctions; i++)
        if (c->fn.to[i]) {
            const sym_function_t *f = &s->functions[i];
            c->str.to[f->name] = c->str.to[f->system_name] = c->str.to[f->filename] = 1;
        }
    for (size_t i = 1; i < s->nmappings; i++)
        if (c->map.to[i]) c->str.to[s->mappings[i].filename] = c->str.to[s->mappings[i].build_id] = 1;
    for (size_t i = 0; i < s->nstrings; i++) /* "" is string 0, whatever its id here */
        if (c->str.to[i] && !symtab_str(s, (uint32_t)i)[0]) c->str.to[i] = 0;
    c->fn.to[0] = c->map.to[0] = c->loc.to[0] = 0; /* id 0 is "none" in every table: written as 0 */
    /* strings from 1 (0 is ""; numbered from 1), then the tables from id 1 */
    if (number(c, &c->str, 1, s->nstrings, 1, cmp_str)) return -1;
    if (number(c, &c->fn, 1, s->nfunctions, 1, cmp_fn) || number(c, &c->map, 1, s->nmappings, 1, cmp_map)) return -1;
    return number(c, &c->loc, 1, s->nlocations, 1, cmp_loc);
}

/* ---- the profile message ---- */

typedef struct {
    Perftools__Profiles__Profile p;
    Perftools__Profiles__Function *fn, **fnp;
    Perftools__Profiles__Mapping *mp, **mpp;
    Perftools__Profiles__Location *loc, **locp;
    Perftools__Profiles__Line *line, **linep;
    Perftools__Profiles__Sample *smp, **smpp;
    Perftools__Profiles__ValueType st, *stp, pt;
    uint64_t *locids;
    int64_t *values;
    char **strings;
} pb_t;

static void pb_free(pb_t *b) {
    free(b->fn), free(b->fnp), free(b->mp), free(b->mpp), free(b->loc), free(b->locp);
    free(b->line), free(b->linep), free(b->smp), free(b->smpp), free(b->locids), free(b->values);
    free(b->strings);
}

/* The symbol tables in canonical order; `extra` string slots are left at the end. */
static int fill_symbols(pb_t *b, const canon_t *c, size_t extra) {
    const symtab_t *s = c->s;
    size_t ns = c->str.n + 1, nf = c->fn.n, nm = c->map.n, nl = c->loc.n, nlines = 0;
    for (size_t k = 0; k < nl; k++) nlines += s->locations[c->loc.by[k]].nlines;
    b->strings = malloc((ns + extra) * sizeof *b->strings);
    b->fn = calloc(nf + 1, sizeof *b->fn), b->fnp = calloc(nf + 1, sizeof *b->fnp);
    b->mp = calloc(nm + 1, sizeof *b->mp), b->mpp = calloc(nm + 1, sizeof *b->mpp);
    b->loc = calloc(nl + 1, sizeof *b->loc), b->locp = calloc(nl + 1, sizeof *b->locp);
    b->line = calloc(nlines + 1, sizeof *b->line), b->linep = calloc(nlines + 1, sizeof *b->linep);
    if (!b->strings || !b->fn || !b->fnp || !b->mp || !b->mpp || !b->loc || !b->locp || !b->line || !b->linep)
        return -1;
    b->strings[0] = "";
    for (size_t k = 0; k < c->str.n; k++) b->strings[k + 1] = (char *)symtab_str(s, c->str.by[k]);
    const uint32_t *t = c->str.to;
    for (size_t k = 0; k < nf; k++) {
        const sym_function_t *f = &s->functions[c->fn.by[k]];
        perftools__profiles__function__init(&b->fn[k]);
        b->fn[k].id = k + 1, b->fn[k].name = t[f->name], b->fn[k].system_name = t[f->system_name];
        b->fn[k].filename = t[f->filename], b->fn[k].start_line = f->start_line;
        b->fnp[k] = &b->fn[k];
    }
    for (size_t k = 0; k < nm; k++) {
        const sym_mapping_t *m = &s->mappings[c->map.by[k]];
        perftools__profiles__mapping__init(&b->mp[k]);
        b->mp[k].id = k + 1, b->mp[k].memory_start = m->start, b->mp[k].memory_limit = m->limit;
        b->mp[k].file_offset = m->offset, b->mp[k].filename = t[m->filename], b->mp[k].build_id = t[m->build_id];
        /* A mapping all of whose locations have lines (as they arrived, or symbolized at
         * query time) says so, or go tool pprof tries to symbolize it again from a binary
         * it lacks; cleared below for one that has a location without. */
        b->mp[k].has_functions = b->mp[k].has_filenames = b->mp[k].has_line_numbers = 1;
        b->mpp[k] = &b->mp[k];
    }
    for (size_t k = 0, li = 0; k < nl; k++) {
        const sym_location_t *l = &s->locations[c->loc.by[k]];
        uint32_t mid = c->map.to[l->mapping];
        perftools__profiles__location__init(&b->loc[k]);
        b->loc[k].id = k + 1, b->loc[k].mapping_id = mid, b->loc[k].address = l->address;
        b->loc[k].n_line = l->nlines, b->loc[k].line = b->linep + li;
        for (uint32_t j = 0; j < l->nlines; j++, li++) {
            perftools__profiles__line__init(&b->line[li]);
            b->line[li].function_id = c->fn.to[s->lines[l->first_line + j].function];
            b->line[li].line = s->lines[l->first_line + j].line;
            b->linep[li] = &b->line[li];
        }
        if (!l->nlines && mid)
            b->mp[mid - 1].has_functions = b->mp[mid - 1].has_filenames = b->mp[mid - 1].has_line_numbers = 0;
        b->locp[k] = &b->loc[k];
    }
    b->p.n_function = nf, b->p.function = b->fnp;
    b->p.n_mapping = nm, b->p.mapping = b->mpp;
    b->p.n_location = nl, b->p.location = b->locp;
    return 0;
}

/* Samples in the order of their location ids (leaf first, as pprof stores them);
 * samples whose ids are equal (stacks the same in content) are one, summed. */
static int cmp_sample(const void *a, const void *b, void *ctx) {
    (void)ctx;
    const Perftools__Profiles__Sample *x = *(Perftools__Profiles__Sample *const *)a;
    const Perftools__Profiles__Sample *y = *(Perftools__Profiles__Sample *const *)b;
    for (size_t k = 0; k < x->n_location_id && k < y->n_location_id; k++)
        if (x->location_id[k] != y->location_id[k]) return cmp_u64(x->location_id[k], y->location_id[k]);
    return cmp_u64(x->n_location_id, y->n_location_id);
}

static int fill_samples(pb_t *b, const merge_result_t *r, const canon_t *c) {
    const symtab_t *s = r->sym;
    size_t n = 0, nloc = 0;
    for (size_t i = 0; i < r->nself; i++) /* from 0: an empty stack is a sample with no locations */
        if (llround(r->self[i])) n++, nloc += symtab_stack_depth(s, (uint32_t)i);
    b->smp = calloc(n + 1, sizeof *b->smp), b->smpp = calloc(n + 1, sizeof *b->smpp);
    b->locids = malloc((nloc + 1) * sizeof *b->locids), b->values = malloc((n + 1) * sizeof *b->values);
    if (!b->smp || !b->smpp || !b->locids || !b->values) return -1;
    size_t k = 0, off = 0;
    for (size_t i = 0; i < r->nself; i++) {
        int64_t v = llround(r->self[i]);
        if (!v) continue;
        Perftools__Profiles__Sample *sm = &b->smp[k];
        perftools__profiles__sample__init(sm);
        sm->location_id = b->locids + off;
        for (uint32_t st = (uint32_t)i; st; st = s->stacks[st].parent)
            b->locids[off++] = c->loc.to[s->stacks[st].location];
        sm->n_location_id = (size_t)(b->locids + off - sm->location_id);
        b->values[k] = v;
        sm->n_value = 1, sm->value = &b->values[k];
        b->smpp[k++] = sm;
    }
    qsort_r(b->smpp, n, sizeof *b->smpp, cmp_sample, NULL);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && cmp_sample(&b->smpp[w - 1], &b->smpp[i], NULL) == 0) b->smpp[w - 1]->value[0] += b->smpp[i]->value[0];
        else b->smpp[w++] = b->smpp[i];
    }
    b->p.n_sample = w, b->p.sample = b->smpp;
    return 0;
}

static int pack_profile(const merge_result_t *r, int gzip, buf_t *out, hr_err_t *err) {
    pb_t b;
    memset(&b, 0, sizeof b);
    perftools__profiles__profile__init(&b.p);
    canon_t c;
    memset(&c, 0, sizeof c);
    if (canon_build(&c, r) || fill_symbols(&b, &c, 4) || fill_samples(&b, r, &c)) {
        canon_free(&c);
        pb_free(&b);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    /* The four type strings go after the symbols' strings. */
    size_t ns = c.str.n + 1;
    const char *extra[4] = {r->type.sample_type, r->type.sample_unit, r->type.period_type, r->type.period_unit};
    for (int i = 0; i < 4; i++) b.strings[ns + i] = (char *)extra[i];
    b.p.n_string_table = ns + 4, b.p.string_table = b.strings;
    perftools__profiles__value_type__init(&b.st);
    perftools__profiles__value_type__init(&b.pt);
    b.st.type = (int64_t)ns, b.st.unit = (int64_t)ns + 1;
    b.pt.type = (int64_t)ns + 2, b.pt.unit = (int64_t)ns + 3;
    b.stp = &b.st;
    b.p.n_sample_type = 1, b.p.sample_type = &b.stp;
    b.p.period_type = &b.pt;
    b.p.period = 1;
    b.p.time_nanos = r->first_ns, b.p.duration_nanos = r->end_ns - r->first_ns;
    size_t len = perftools__profiles__profile__get_packed_size(&b.p);
    uint8_t *raw = malloc(len ? len : 1);
    int rc = -1;
    if (!raw) {
        hr_fail(err, HR_ENOMEM, "out of memory");
    } else {
        perftools__profiles__profile__pack(&b.p, raw);
        uint8_t *gz = NULL;
        size_t gzlen;
        if (!gzip || gz_deflate(raw, len, &gz, &gzlen, err) == 0) {
            if (gzip) buf_append(out, gz, gzlen);
            else buf_append(out, raw, len);
            free(gz);
            rc = out->oom ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
        }
    }
    free(raw);
    canon_free(&c);
    pb_free(&b);
    return rc;
}

int render_pprof(const merge_result_t *r, buf_t *out, hr_err_t *err) { return pack_profile(r, 1, out, err); }

int render_pprof_raw(const merge_result_t *r, buf_t *out, hr_err_t *err) { return pack_profile(r, 0, out, err); }
