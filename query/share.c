/* share.c - see share.h. */
#include "query/share.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[4] = {'H', 'S', 'H', '2'};

void share_encode(const merge_result_t *r, int totals, uint64_t parts_decoded, uint64_t cpu_us, buf_t *out) {
    buf_t sym;
    buf_init(&sym);
    symtab_encode(r->sym, &sym);
    buf_append(out, MAGIC, 4);
    buf_put_uvarint(out, sym.len);
    buf_append(out, sym.data, sym.len);
    out->oom |= sym.oom;
    buf_free(&sym);
    buf_put_uvarint(out, r->nself);
    for (size_t i = 0; i < r->nself; i++) buf_put_svarint(out, llround(r->self[i]));
    size_t nfn = 0;
    for (size_t i = 0; i < r->nfn; i++) nfn += r->fn_self[i] || r->fn_total[i];
    buf_put_uvarint(out, nfn);
    for (size_t i = 0; i < r->nfn; i++) {
        if (!r->fn_self[i] && !r->fn_total[i]) continue;
        buf_put_uvarint(out, i);
        buf_put_svarint(out, r->fn_self[i]);
        buf_put_svarint(out, r->fn_total[i]);
    }
    buf_put_svarint(out, r->fn_all);
    buf_put_uvarint(out, parts_decoded);
    buf_put_uvarint(out, cpu_us);
    buf_put_uvarint(out, totals ? 1 : 0);
    if (!totals) return;
    buf_put_svarint(out, llround(r->total));
    buf_put_uvarint(out, r->profiles);
    buf_put_svarint(out, r->first_ns);
    buf_put_svarint(out, r->end_ns);
    buf_put_uvarint(out, r->nbuckets);
    for (size_t i = 0; i < r->nbuckets; i++) buf_put_svarint(out, llround(r->timeline[i]));
}

static int bad(hr_err_t *err, const char *what) {
    return hr_fail(err, HR_EUNPROC, "a peer's merge share is malformed: %s", what);
}

/* The totals section, after the flag said one follows. 0 or -1. */
static int decode_totals(buf_reader_t *r, share_t *out, hr_err_t *err) {
    out->has_totals = 1;
    out->total = buf_get_svarint(r);
    out->profiles = buf_get_uvarint(r);
    out->first_ns = buf_get_svarint(r);
    out->end_ns = buf_get_svarint(r);
    uint64_t nb = buf_get_uvarint(r);
    if (r->bad || nb > buf_reader_left(r)) return bad(err, "timeline length");
    if (!(out->timeline = malloc((nb + 1) * sizeof *out->timeline))) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (out->nbuckets = 0; out->nbuckets < nb; out->nbuckets++) out->timeline[out->nbuckets] = buf_get_svarint(r);
    return 0;
}

int share_decode(const uint8_t *p, size_t n, share_t *out, hr_err_t *err) {
    memset(out, 0, sizeof *out);
    if (n < 4 || memcmp(p, MAGIC, 4)) return bad(err, "magic");
    buf_reader_t r;
    buf_reader_init(&r, p + 4, n - 4);
    uint64_t sl = buf_get_uvarint(&r);
    const uint8_t *sp = r.bad || sl > buf_reader_left(&r) ? NULL : buf_get_raw(&r, (size_t)sl);
    if (!sp) return bad(err, "symbols");
    if (!(out->sym = symtab_decode(sp, (size_t)sl, err))) return -1;
    uint64_t ns = buf_get_uvarint(&r);
    if (r.bad || ns != out->sym->nstacks) return bad(err, "stack count");
    if (!(out->self = calloc(ns + 1, sizeof *out->self))) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < ns; i++) out->self[i] = buf_get_svarint(&r);
    uint64_t nf = buf_get_uvarint(&r);
    if (r.bad || nf > buf_reader_left(&r)) return bad(err, "function count");
    out->fn = malloc((nf + 1) * sizeof *out->fn);
    out->fself = malloc((nf + 1) * sizeof *out->fself), out->ftotal = malloc((nf + 1) * sizeof *out->ftotal);
    if (!out->fn || !out->fself || !out->ftotal) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (; out->nfn < nf; out->nfn++) {
        uint64_t id = buf_get_uvarint(&r);
        if (r.bad || id >= out->sym->nstrings) return bad(err, "function name");
        out->fn[out->nfn] = (uint32_t)id;
        out->fself[out->nfn] = buf_get_svarint(&r);
        out->ftotal[out->nfn] = buf_get_svarint(&r);
    }
    out->fn_all = buf_get_svarint(&r);
    out->parts_decoded = buf_get_uvarint(&r);
    out->cpu_us = buf_get_uvarint(&r);
    uint64_t totals = buf_get_uvarint(&r);
    if (r.bad || totals > 1) return bad(err, "totals flag");
    if (totals && decode_totals(&r, out, err)) return -1;
    if (r.bad || buf_reader_left(&r)) return bad(err, "trailing bytes");
    return 0;
}

void share_destroy(share_t *s) {
    symtab_free(s->sym);
    free(s->self);
    free(s->fn);
    free(s->fself);
    free(s->ftotal);
    free(s->timeline);
    memset(s, 0, sizeof *s);
}
