/* functab.c - see functab.h. */
#include "storage/functab.h"

#include <stdlib.h>
#include <string.h>

#include "common/sort.h"
#include "common/vec.h"
#include "storage/segment.h"

static const char UNNAMED[] = "?"; /* a frame with neither name: what tree.c shows */

void functab_free(functab_t *t) {
    if (!t) return;
    free(t->names);
    free(t->name_off);
    free(t->series);
    free(t->all);
    free(t->first);
    free(t->fn);
    free(t->self);
    free(t->total);
    free(t->fp);
    free(t->names_sec);
    free(t);
}

size_t functab_bytes(const functab_t *t) {
    if (!t) return 0;
    return sizeof *t + (t->names ? t->names_len + t->nnames * sizeof *t->name_off : 0) +
           (t->fp ? t->nnames * sizeof *t->fp : 0) + t->names_sec_len +
           t->nseries * (sizeof *t->series + sizeof *t->all + sizeof *t->first) +
           t->nentries * (sizeof *t->fn + 2 * sizeof *t->self);
}

/* The name a flame graph gives function f's frames, as a string of sym. */
static const char *label(const symtab_t *sym, uint32_t f) {
    const sym_function_t *fn = &sym->functions[f];
    if (fn->name) return symtab_str(sym, fn->name);
    if (fn->system_name) return symtab_str(sym, fn->system_name);
    return UNNAMED;
}

static int cmp_label(const void *a, const void *b, void *ctx) {
    const symtab_t *sym = ctx;
    return strcmp(label(sym, *(const uint32_t *)a), label(sym, *(const uint32_t *)b));
}

/* Gives t its sorted, distinct names and fills local[f] with function f's index among
 * them. 0 or -1 (OOM). */
static int collect_names(functab_t *t, const symtab_t *sym, uint32_t *local) {
    size_t nf = sym->nfunctions, len = 0;
    uint32_t *by = malloc((nf + 1) * sizeof *by);
    if (!by || !(t->name_off = malloc((nf + 1) * sizeof *t->name_off))) return free(by), -1;
    for (size_t f = 0; f < nf; f++) by[f] = (uint32_t)f, len += strlen(label(sym, (uint32_t)f)) + 1;
    qsort_r(by, nf, sizeof *by, cmp_label, (void *)sym);
    if (!(t->names = malloc(len + 1))) return free(by), -1;
    len = 0;
    for (size_t k = 0; k < nf; k++) {
        const char *s = label(sym, by[k]);
        if (!t->nnames || strcmp(s, t->names + t->name_off[t->nnames - 1])) {
            size_t n = strlen(s) + 1;
            memcpy(t->names + len, s, n);
            t->name_off[t->nnames++] = (uint32_t)len;
            len += n;
        }
        local[by[k]] = (uint32_t)(t->nnames - 1);
    }
    t->names_len = len;
    free(by);
    return 0;
}

/* Per-name sums of one series while it is built. */
typedef struct {
    int64_t *self, *total;
    uint32_t *stamp, tick; /* stamp[name] == tick: already counted in this sample's total */
    size_t nstamp;
    uint8_t *listed; /* listed[name]: in touched (a sum may return to 0 with negative values) */
    uint32_t *touched;
    size_t ntouched;
    size_t cap[3]; /* of the table's fn, self and total */
} sums_t;

static void add_total(sums_t *s, uint32_t name, int64_t v) {
    if (s->stamp[name] == s->tick) return;
    s->stamp[name] = s->tick;
    if (!s->listed[name]) s->listed[name] = 1, s->touched[s->ntouched++] = name;
    s->total[name] += v;
}

/* Adds one sample (stack st, value v) to the series' sums. */
static void add_sample(sums_t *s, const symtab_t *sym, const uint32_t *local, uint32_t st, int64_t v) {
    if (++s->tick == 0) memset(s->stamp, 0, s->nstamp * sizeof *s->stamp), s->tick = 1; /* wrapped */
    for (uint32_t k = st; k; k = sym->stacks[k].parent) {
        const sym_location_t *loc = &sym->locations[sym->stacks[k].location];
        for (uint32_t i = 0; i < loc->nlines; i++) add_total(s, local[sym->lines[loc->first_line + i].function], v);
    }
    const sym_location_t *leaf = &sym->locations[sym->stacks[st].location];
    s->self[local[sym->lines[leaf->first_line].function]] += v; /* lines[0]: the innermost frame */
}

/* Appends the series' entries (ascending by name) to t and clears its sums. */
static int emit_series(functab_t *t, sums_t *s) {
    sort_u32(s->touched, s->ntouched);
    size_t n = t->nentries + s->ntouched;
    if (VEC_RESERVE(t->fn, s->cap[0], n) || VEC_RESERVE(t->self, s->cap[1], n) || VEC_RESERVE(t->total, s->cap[2], n))
        return -1;
    for (size_t k = 0; k < s->ntouched; k++) {
        uint32_t name = s->touched[k];
        if (s->self[name] || s->total[name]) {
            t->fn[t->nentries] = name;
            t->self[t->nentries] = s->self[name];
            t->total[t->nentries++] = s->total[name];
        }
        s->self[name] = s->total[name] = 0;
        s->listed[name] = 0;
    }
    s->ntouched = 0;
    return 0;
}

static functab_t *build(const symtab_t *sym, const segment_t *m) {
    functab_t *t = calloc(1, sizeof *t);
    uint32_t *local = malloc((sym->nfunctions + 1) * sizeof *local);
    sums_t s = {0};
    size_t nn = sym->nfunctions + 1;
    s.self = calloc(nn, sizeof *s.self), s.total = calloc(nn, sizeof *s.total);
    s.stamp = calloc(nn, sizeof *s.stamp), s.nstamp = nn, s.touched = malloc(nn * sizeof *s.touched);
    s.listed = calloc(nn, 1);
    int rc = t && local && s.self && s.total && s.stamp && s.touched && s.listed ? collect_names(t, sym, local) : -1;
    if (rc == 0) {
        t->nseries = m->nprofiles;
        t->all = calloc(t->nseries + 1, sizeof *t->all);
        t->first = calloc(t->nseries + 1, sizeof *t->first);
        t->series = malloc((t->nseries + 1) * sizeof *t->series);
        rc = t->all && t->first && t->series ? 0 : -1;
    }
    for (size_t r = 0; rc == 0 && r < m->nprofiles; r++) {
        const seg_profile_t *p = &m->profiles[r];
        t->first[r] = t->nentries;
        t->series[r] = p->series;
        for (uint32_t j = 0; j < p->nsamples; j++) {
            uint32_t st = m->stacks[p->first + j];
            t->all[r] += m->values[p->first + j];
            if (st) add_sample(&s, sym, local, st, m->values[p->first + j]);
        }
        rc = emit_series(t, &s);
    }
    if (rc == 0) t->first[t->nseries] = t->nentries;
    free(local);
    free(s.self), free(s.total), free(s.stamp), free(s.touched), free(s.listed);
    if (rc) functab_free(t), t = NULL;
    return t;
}

functab_t *functab_build(const symtab_t *sym, const segment_t *merged, int *none, hr_err_t *err) {
    *none = 0;
    for (size_t i = 1; i < sym->nlocations; i++)
        if (!sym->locations[i].nlines) return *none = 1, NULL;
    functab_t *t = build(sym, merged);
    if (!t) hr_fail(err, HR_ENOMEM, "out of memory");
    return t;
}

/* Series i's value unit: the greatest common divisor of its values (a CPU series' are
 * all multiples of its sampling period), at least 1. */
static int64_t series_unit(const functab_t *t, size_t i) {
    uint64_t g = buf_gcd(0, t->all[i]);
    for (size_t e = t->first[i]; e < t->first[i + 1] && g != 1; e++) g = buf_gcd(buf_gcd(g, t->self[e]), t->total[e]);
    return g == 0 || g > INT64_MAX ? 1 : (int64_t)g;
}

/* A stored value times its unit; 0 with *bad set when that overflows. */
static int64_t times(int64_t v, int64_t unit, int *bad) {
    int64_t r;
    if (__builtin_mul_overflow(v, unit, &r)) return *bad = 1, 0;
    return r;
}

void functab_encode_names(const functab_t *t, buf_t *out) {
    buf_put_uvarint(out, t->nnames);
    for (size_t i = 0; i < t->nnames; i++) {
        const char *s = t->names + t->name_off[i];
        buf_put_bytes(out, s, strlen(s));
    }
}

/* The names' fingerprints in place of the names (apart). */
static void encode_fps(const functab_t *t, buf_t *out) {
    buf_put_uvarint(out, t->nnames);
    for (size_t i = 0; i < t->nnames; i++) {
        const char *s = t->names + t->name_off[i];
        sym_fp_t fp = symtab_string_fp(s, strlen(s));
        buf_put_u64le(out, fp.a);
        buf_put_u64le(out, fp.b);
    }
}

void functab_encode(const functab_t *t, int apart, buf_t *out) {
    if (apart) encode_fps(t, out);
    else functab_encode_names(t, out);
    buf_put_uvarint(out, t->nseries);
    if (apart) buf_put_uvarint(out, t->nentries); /* so a reader sizes the table exactly */
    for (size_t i = 0; i < t->nseries; i++) {
        int64_t unit = series_unit(t, i);
        buf_put_uvarint(out, (uint64_t)unit);
        buf_put_svarint(out, t->all[i] / unit);
        buf_put_uvarint(out, t->first[i + 1] - t->first[i]);
        for (size_t e = t->first[i], next = 0; e < t->first[i + 1]; next = t->fn[e++] + 1) {
            buf_put_uvarint(out, t->fn[e] - next); /* ascending: the gap from the next possible */
            buf_put_svarint(out, t->self[e] / unit);
            buf_put_svarint(out, t->total[e] / unit);
        }
    }
}

static functab_t *bad(functab_t *t, hr_err_t *err, const char *why) {
    functab_free(t);
    hr_fail(err, HR_EUNPROC, "block: bad function table: %s", why);
    return NULL;
}

/* Reads the names (no NUL inside) into one exactly sized blob: a first pass measures
 * them. Their order is the writer's promise, not checked: nothing here relies on it.
 * 0, -1 (malformed) or -2 (OOM). */
static int decode_names(functab_t *t, buf_reader_t *r) {
    uint64_t n = buf_get_uvarint(r);
    if (r->bad || n > buf_reader_left(r)) return -1;
    t->nnames = (size_t)n;
    buf_reader_t first = *r;
    size_t sl, total = 0;
    for (size_t i = 0; i < t->nnames; i++) {
        const uint8_t *s = buf_get_bytes(r, &sl);
        if (r->bad || memchr(s, 0, sl)) return -1;
        total += sl + 1;
    }
    if (!(t->names = malloc(total + 1)) || !(t->name_off = malloc((t->nnames + 1) * sizeof *t->name_off))) return -2;
    t->names_len = total;
    for (size_t i = 0, len = 0; i < t->nnames; i++, len += sl + 1) {
        const uint8_t *s = buf_get_bytes(&first, &sl);
        memcpy(t->names + len, s, sl);
        t->names[len + sl] = 0;
        t->name_off[i] = (uint32_t)len;
    }
    return 0;
}

/* Reads the fingerprints that stand for the names (apart). 0, -1 or -2, as decode_names. */
static int decode_fps(functab_t *t, buf_reader_t *r) {
    uint64_t n = buf_get_uvarint(r);
    if (r->bad || n > buf_reader_left(r) / (2 * sizeof(uint64_t))) return -1;
    t->nnames = (size_t)n;
    const uint8_t *p = buf_get_raw(r, t->nnames * 2 * sizeof(uint64_t));
    if (!p) return -1;
    if (!(t->fp = malloc((t->nnames + 1) * sizeof *t->fp))) return -2;
    for (size_t i = 0; i < t->nnames; i++, p += 16) t->fp[i].a = buf_le64(p), t->fp[i].b = buf_le64(p + 8);
    return 0;
}

int functab_decode_names(functab_t *t, const uint8_t *p, size_t n, hr_err_t *err) {
    functab_t names = {0};
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    int rc = t->fp && !t->names ? decode_names(&names, &r) : -1;
    if (rc == 0 && (buf_reader_left(&r) || names.nnames != t->nnames)) rc = -1;
    for (size_t i = 0; rc == 0 && i < names.nnames; i++) {
        const char *s = names.names + names.name_off[i];
        size_t len = (i + 1 < names.nnames ? names.name_off[i + 1] : names.names_len) - names.name_off[i] - 1;
        sym_fp_t fp = symtab_string_fp(s, len);
        if (fp.a != t->fp[i].a || fp.b != t->fp[i].b) rc = -1;
    }
    if (rc) {
        free(names.names), free(names.name_off);
        if (rc == -2) return hr_fail(err, HR_ENOMEM, "out of memory");
        return hr_fail(err, HR_EUNPROC, "block: the function table's names do not match their fingerprints");
    }
    t->names = names.names, t->name_off = names.name_off, t->names_len = names.names_len;
    return 0;
}

/* Gives back the room decoding reserved past the entries (a cached table lives long). */
static void shrink(functab_t *t) {
    size_t n = t->nentries ? t->nentries : 1;
    uint32_t *fn = realloc(t->fn, n * sizeof *fn);
    int64_t *self = realloc(t->self, n * sizeof *self), *total = realloc(t->total, n * sizeof *total);
    t->fn = fn ? fn : t->fn, t->self = self ? self : t->self, t->total = total ? total : t->total;
}

functab_t *functab_decode(const uint8_t *p, size_t n, const uint32_t *series, size_t nseries, int apart,
                          hr_err_t *err) {
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    functab_t *t = calloc(1, sizeof *t);
    if (!t) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    int rc = apart ? decode_fps(t, &r) : decode_names(t, &r);
    if (rc == -2) return functab_free(t), hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    if (rc) return bad(t, err, "names");
    if (buf_get_uvarint(&r) != nseries || r.bad) return bad(t, err, "series count");
    t->nseries = nseries;
    /* Names apart come with the entry count; else room for as many as the bytes could
     * hold (an entry takes at least 3), given back after. */
    uint64_t cap = apart ? buf_get_uvarint(&r) : buf_reader_left(&r) / 3;
    if (r.bad || cap > buf_reader_left(&r) / 3) return bad(t, err, "entry count");
    t->all = malloc((nseries + 1) * sizeof *t->all), t->first = malloc((nseries + 1) * sizeof *t->first);
    t->fn = malloc((cap + 1) * sizeof *t->fn), t->self = malloc((cap + 1) * sizeof *t->self);
    t->total = malloc((cap + 1) * sizeof *t->total), t->series = malloc((nseries + 1) * sizeof *t->series);
    if (!t->all || !t->first || !t->fn || !t->self || !t->total || !t->series) {
        functab_free(t);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    if (nseries) memcpy(t->series, series, nseries * sizeof *series);
    int over = 0;
    for (size_t i = 0; i < nseries; i++) {
        uint64_t unit = buf_get_uvarint(&r);
        if (unit == 0 || unit > INT64_MAX) return bad(t, err, "value unit");
        t->all[i] = times(buf_get_svarint(&r), (int64_t)unit, &over);
        uint64_t k = buf_get_uvarint(&r);
        t->first[i] = t->nentries;
        if (r.bad || k > cap - t->nentries) return bad(t, err, "entry count");
        for (uint64_t next = 0; k-- > 0; t->nentries++) {
            uint64_t gap = buf_get_uvarint(&r), fn = next + gap;
            if (r.bad || gap >= t->nnames - next) return bad(t, err, "name index"); /* no wrap: ascending */
            t->fn[t->nentries] = (uint32_t)fn;
            t->self[t->nentries] = times(buf_get_svarint(&r), (int64_t)unit, &over);
            t->total[t->nentries] = times(buf_get_svarint(&r), (int64_t)unit, &over);
            next = fn + 1;
        }
    }
    if (over) return bad(t, err, "a value overflows");
    if (apart && t->nentries != cap) return bad(t, err, "entry count");
    t->first[nseries] = t->nentries;
    if (r.bad || buf_reader_left(&r)) return bad(t, err, "trailing bytes");
    if (!apart) shrink(t);
    return t;
}

int functab_equal(const functab_t *a, const functab_t *b) {
    if (!a->names || !b->names || a->nnames != b->nnames || a->nseries != b->nseries || a->nentries != b->nentries)
        return 0;
    for (size_t i = 0; i < a->nnames; i++)
        if (strcmp(a->names + a->name_off[i], b->names + b->name_off[i])) return 0;
    for (size_t i = 0; i <= a->nseries; i++)
        if (a->first[i] != b->first[i] || (i < a->nseries && (a->all[i] != b->all[i] || a->series[i] != b->series[i])))
            return 0;
    for (size_t e = 0; e < a->nentries; e++)
        if (a->fn[e] != b->fn[e] || a->self[e] != b->self[e] || a->total[e] != b->total[e]) return 0;
    return 1;
}
