/* pprof_out.c - a merged profile as gzipped profile.proto.
 *
 * The merge result's symtab already is a deduplicated profile, so ids carry over
 * one to one: string i is string_table[i], function/mapping/location i have id i,
 * and each stack node with a non-zero value becomes one sample. The profile is
 * dated by the merged profiles themselves (time_nanos the earliest start,
 * duration_nanos up to the latest end), as pprof's own merge dates it; the query
 * range says nothing about when the data was taken. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/render.h"
#include "wire/gzip.h"
#include "wire/profile.pb-c.h"

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

static int fill_symbols(pb_t *b, const symtab_t *s, size_t extra) {
    size_t nf = s->nfunctions - 1, nm = s->nmappings - 1, nl = s->nlocations - 1;
    b->strings = malloc((s->nstrings + extra) * sizeof *b->strings);
    b->fn = calloc(nf + 1, sizeof *b->fn), b->fnp = calloc(nf + 1, sizeof *b->fnp);
    b->mp = calloc(nm + 1, sizeof *b->mp), b->mpp = calloc(nm + 1, sizeof *b->mpp);
    b->loc = calloc(nl + 1, sizeof *b->loc), b->locp = calloc(nl + 1, sizeof *b->locp);
    b->line = calloc(s->nlines + 1, sizeof *b->line), b->linep = calloc(s->nlines + 1, sizeof *b->linep);
    if (!b->strings || !b->fn || !b->fnp || !b->mp || !b->mpp || !b->loc || !b->locp || !b->line || !b->linep)
        return -1;
    for (size_t i = 0; i < s->nstrings; i++) b->strings[i] = (char *)symtab_str(s, (uint32_t)i);
    for (size_t i = 0; i < nf; i++) {
        const sym_function_t *f = &s->functions[i + 1];
        perftools__profiles__function__init(&b->fn[i]);
        b->fn[i].id = i + 1, b->fn[i].name = f->name, b->fn[i].system_name = f->system_name;
        b->fn[i].filename = f->filename, b->fn[i].start_line = f->start_line;
        b->fnp[i] = &b->fn[i];
    }
    for (size_t i = 0; i < nm; i++) {
        const sym_mapping_t *m = &s->mappings[i + 1];
        perftools__profiles__mapping__init(&b->mp[i]);
        b->mp[i].id = i + 1, b->mp[i].memory_start = m->start, b->mp[i].memory_limit = m->limit;
        b->mp[i].file_offset = m->offset, b->mp[i].filename = m->filename, b->mp[i].build_id = m->build_id;
        b->mpp[i] = &b->mp[i];
    }
    for (size_t i = 0; i < s->nlines; i++) {
        perftools__profiles__line__init(&b->line[i]);
        b->line[i].function_id = s->lines[i].function, b->line[i].line = s->lines[i].line;
        b->linep[i] = &b->line[i];
    }
    /* A mapping all of whose locations have lines (as they arrived, or symbolized at query
     * time) says so, or go tool pprof tries to symbolize it again from a binary it lacks. */
    for (size_t i = 0; i < nm; i++) b->mp[i].has_functions = b->mp[i].has_filenames = b->mp[i].has_line_numbers = 1;
    for (size_t i = 0; i < nl; i++) {
        const sym_location_t *l = &s->locations[i + 1];
        if (!l->nlines && l->mapping)
            b->mp[l->mapping - 1].has_functions = b->mp[l->mapping - 1].has_filenames =
                b->mp[l->mapping - 1].has_line_numbers = 0;
    }
    for (size_t i = 0; i < nl; i++) {
        const sym_location_t *l = &s->locations[i + 1];
        perftools__profiles__location__init(&b->loc[i]);
        b->loc[i].id = i + 1, b->loc[i].mapping_id = l->mapping, b->loc[i].address = l->address;
        b->loc[i].n_line = l->nlines, b->loc[i].line = b->linep + l->first_line;
        b->locp[i] = &b->loc[i];
    }
    b->p.n_function = nf, b->p.function = b->fnp;
    b->p.n_mapping = nm, b->p.mapping = b->mpp;
    b->p.n_location = nl, b->p.location = b->locp;
    return 0;
}

static int fill_samples(pb_t *b, const merge_result_t *r) {
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
        for (uint32_t st = (uint32_t)i; st; st = s->stacks[st].parent) b->locids[off++] = s->stacks[st].location;
        sm->n_location_id = (size_t)(b->locids + off - sm->location_id);
        b->values[k] = v;
        sm->n_value = 1, sm->value = &b->values[k];
        b->smpp[k] = sm;
        k++;
    }
    b->p.n_sample = n, b->p.sample = b->smpp;
    return 0;
}

static int pack_profile(const merge_result_t *r, int gzip, buf_t *out, hr_err_t *err) {
    pb_t b;
    memset(&b, 0, sizeof b);
    perftools__profiles__profile__init(&b.p);
    const symtab_t *s = r->sym;
    if (fill_symbols(&b, s, 4) || fill_samples(&b, r)) {
        pb_free(&b);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    /* The four type strings go after the symtab's strings. */
    size_t ns = s->nstrings;
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
    pb_free(&b);
    return rc;
}

int render_pprof(const merge_result_t *r, buf_t *out, hr_err_t *err) { return pack_profile(r, 1, out, err); }

int render_pprof_raw(const merge_result_t *r, buf_t *out, hr_err_t *err) { return pack_profile(r, 0, out, err); }
