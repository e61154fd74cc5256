/* block.c - see block.h. */
#include "storage/block.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "common/sort.h"
#include "common/vec.h"
#include "storage/functab.h"
#include "common/fsutil.h"

enum {
    SEC_META = 1,
    SEC_SYMBOLS = 2,
    SEC_PROFILES = 3,
    SEC_SAMPLES = 4,
    NSECTIONS = 4,
    SEC_FOOTER = 5,
    SEC_MPROFILES = 6,
    SEC_MSAMPLES = 7, /* version 2: pre-merged rows */
    SEC_SPANS = 8,    /* version 2: span samples, when any */
    SEC_FUNCS = 9,    /* version 2: the function table (storage/functab.h), when written */
    SEC_STACKS = 10,  /* version 2: the fingerprints of the stacks rows name, when written */
    SEC_NAMES = 11    /* version 2: a function table's names, when stored apart (before FUNCS) */
};
/* footer partition flags */
enum {
    PART_MERGED = 1,
    PART_SPANS = 2,
    PART_UNITS = 4,
    PART_FUNCS = 8,
    PART_SUMMARY = 16,
    PART_TRACES = 32,
    PART_STACKS = 64,
    PART_NAMES = 128, /* the FUNCS section names its functions by fingerprint; a NAMES section spells them */
    PART_KNOWN = 255  /* any other bit: a later format's, refused */
};
/* decode_part's flags beside the view (block.h's BLOCK_VIEW_DEFER_SYMBOLS, and this one:
 * check the STACKS section against the symbols, as the writer and a whole-block read do). */
#define VIEW_OF(v) ((v)&0xf)
#define VIEW_VERIFY 0x20
static const char MAGIC[8] = {'H', 'R', 'T', 'H', 'B', 'L', 'K', '1'};  /* version 1 */
static const char MAGIC2[8] = {'H', 'R', 'T', 'H', 'B', 'L', 'K', '2'}; /* version 2 */
static const char TAIL_MAGIC[4] = {'H', 'R', 'T', '2'};
#define HEADER_BYTES 16
#define TAIL_BYTES 16
#define MAX_SECTION_RAW ((uint64_t)4 << 30)

/* How sections are compressed: the writer's own zstd context (reused for every
 * section it writes, instead of one made and freed per section) and its level. */
typedef struct {
    ZSTD_CCtx *cctx;
    int level;
} zenc_t;

static int put_section(buf_t *out, uint32_t kind, const buf_t *raw, const zenc_t *z, hr_err_t *err) {
    size_t bound = ZSTD_compressBound(raw->len);
    buf_put_u32le(out, kind);
    buf_put_u64le(out, raw->len);
    size_t hdr = out->len;
    buf_put_u64le(out, 0);
    buf_put_u32le(out, 0);
    if (buf_reserve(out, bound) != 0) return hr_fail(err, HR_ENOMEM, "out of memory");
    size_t c = ZSTD_compressCCtx(z->cctx, out->data + out->len, bound, raw->data, raw->len, z->level);
    if (ZSTD_isError(c)) return hr_fail(err, HR_EINTERNAL, "zstd: %s", ZSTD_getErrorName(c));
    uint32_t crc = (uint32_t)crc32(0, out->data + out->len, (uInt)c);
    uint8_t *h = out->data + hdr;
    for (int i = 0; i < 8; i++) h[i] = (uint8_t)((uint64_t)c >> (8 * i));
    for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(crc >> (8 * i));
    out->len += c;
    return 0;
}

#ifndef NDEBUG
/* 1 when rows order[0..n) of s are in (series, time) order, as segment_sorted_order
 * leaves them: the series and time deltas, the pre-merged rows (one per series) and
 * the partitions' series lists are built on it. */
static int rows_in_order(const segment_t *s, const uint32_t *order, size_t n) {
    for (size_t i = 1; i < n; i++) {
        const seg_profile_t *a = &s->profiles[order[i - 1]], *b = &s->profiles[order[i]];
        if (a->series > b->series || (a->series == b->series && a->time_ns > b->time_ns)) return 0;
    }
    return 1;
}
#endif

/* The PROFILES column block of rows order[0..n) with their value units (see format/block.md). */
static void encode_profiles(const segment_t *s, const uint32_t *order, const int64_t *unit, size_t n, buf_t *b) {
    assert(rows_in_order(s, order, n)); /* else a series delta wraps and the block is refused */
    uint32_t prev_series = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t series = s->profiles[order[i]].series;
        buf_put_uvarint(b, series - prev_series);
        prev_series = series;
    }
    prev_series = UINT32_MAX;
    int64_t prev_t = 0;
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        if (p->series != prev_series) prev_t = s->min_time; /* time restarts per series */
        buf_put_svarint(b, p->time_ns - prev_t);
        prev_t = p->time_ns;
        prev_series = p->series;
    }
    for (size_t i = 0; i < n; i++) buf_put_svarint(b, s->profiles[order[i]].duration_ns);
    for (size_t i = 0; i < n; i++) buf_put_uvarint(b, s->profiles[order[i]].nsamples);
    for (size_t i = 0; i < n; i++) buf_put_uvarint(b, (uint64_t)unit[i]);
}

/* The value unit of a row: the greatest common divisor of its values (1 for a row
 * without samples, or when it would not fit an int64). A CPU profile's nanoseconds are
 * all multiples of its sampling period, so dividing by it stores counts: small varints
 * that compress to about half (format/block.md, "value units"). */
static int64_t row_unit(const segment_t *s, const seg_profile_t *p) {
    uint64_t g = 0;
    for (uint32_t j = 0; j < p->nsamples && g != 1; j++) g = buf_gcd(g, s->values[p->first + j]);
    return g == 0 || g > INT64_MAX ? 1 : (int64_t)g;
}

/* The units of rows order[0..n) (row_unit), in that order; NULL when out of memory. */
static int64_t *row_units(const segment_t *s, const uint32_t *order, size_t n) {
    int64_t *unit = malloc((n ? n : 1) * sizeof *unit);
    for (size_t i = 0; unit && i < n; i++) unit[i] = row_unit(s, &s->profiles[order[i]]);
    return unit;
}

static void encode_samples(const segment_t *s, const uint32_t *order, const int64_t *unit, size_t n, buf_t *b) {
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        assert(segment_row_valid(s, order[i])); /* its stack and span deltas (encode_spans) are positive */
        uint32_t prev = 0;                      /* stacks are sorted within a profile */
        for (uint32_t j = 0; j < p->nsamples; j++) {
            buf_put_uvarint(b, s->stacks[p->first + j] - prev);
            prev = s->stacks[p->first + j];
        }
    }
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        for (uint32_t j = 0; j < p->nsamples; j++) buf_put_svarint(b, s->values[p->first + j] / unit[i]);
    }
}

/* The SPANS column block of rows order[0..n): per row its span sample count, then
 * stack deltas (reset per row; samples are sorted by stack, then span), span ids as
 * 8 little-endian bytes (random, so varints would only grow them), values. */
/* 1 when some span sample of s carries a trace id (the SPANS section then has them). */
static int has_traces(const segment_t *s) {
    for (size_t i = 0; i < s->nspans; i++)
        if (span_has_trace(&s->spans[i])) return 1;
    return 0;
}

static void encode_spans(const segment_t *s, const uint32_t *order, size_t n, int traces, buf_t *b) {
    for (size_t i = 0; i < n; i++) buf_put_uvarint(b, s->profiles[order[i]].nspans);
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        uint32_t prev = 0;
        for (uint32_t j = 0; j < p->nspans; j++) {
            buf_put_uvarint(b, s->spans[p->span_first + j].stack - prev);
            prev = s->spans[p->span_first + j].stack;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        for (uint32_t j = 0; j < p->nspans; j++) buf_put_u64le(b, s->spans[p->span_first + j].span);
    }
    for (size_t i = 0; i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        for (uint32_t j = 0; j < p->nspans; j++) buf_put_svarint(b, s->spans[p->span_first + j].value);
    }
    for (size_t i = 0; traces && i < n; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        for (uint32_t j = 0; j < p->nspans; j++) {
            buf_put_u64le(b, s->spans[p->span_first + j].trace_hi);
            buf_put_u64le(b, s->spans[p->span_first + j].trace_lo);
        }
    }
}

/* Appends the given sections (raw bytes, kinds first, first + 1, ...) as zstd frames
 * and frees them. */
static int put_sections(buf_t *out, uint32_t first_kind, buf_t *sec, int nsec, const zenc_t *z, hr_err_t *err) {
    int rc = 0;
    for (int i = 0; i < nsec && rc == 0; i++) {
        if (sec[i].oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else rc = put_section(out, first_kind + (uint32_t)i, &sec[i], z, err);
    }
    for (int i = 0; i < nsec; i++) buf_free(&sec[i]);
    return rc;
}

/* The STACKS section of p: its stack count, then the fingerprint (from fp, one per stack
 * of p->sym) of every stack its samples and span samples name, ascending by id. */
static void encode_stack_fps(const segment_t *p, const sym_fp_t *fp, buf_t *b) {
    size_t n = p->sym->nstacks, count = 0;
    uint8_t *named = calloc(n ? n : 1, 1);
    if (!named) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < p->nsamples + p->nspans; i++) {
        uint32_t st = i < p->nsamples ? p->stacks[i] : p->spans[i - p->nsamples].stack;
        if (st && !named[st]) named[st] = 1, count++;
    }
    buf_put_uvarint(b, n);
    buf_put_uvarint(b, count);
    for (size_t st = 1, prev = 0; st < n; st++) {
        if (!named[st]) continue;
        buf_put_uvarint(b, st - prev), prev = st;
        buf_put_u64le(b, fp[st].a);
        buf_put_u64le(b, fp[st].b);
    }
    free(named);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Frees a pre-merged segment, handing back the symbols it borrowed. */
static void premerged_free(segment_t *m) {
    if (m) m->sym = NULL;
    segment_free(m);
}

/* The pre-merged view of a partition: one row per series, at the partition's first
 * time, holding the sum of all its rows' samples. A merge over a range covering the
 * whole partition reads these instead of every profile. Its stack ids are p's, so it
 * reads p's symbols (borrowed: free it with premerged_free). NULL (and no error) when
 * a series' values could overflow int64 summed.
 *
 * A series' rows are summed in a dense accumulator over p's stacks, and only the
 * stacks they touched are sorted: a series' few hundred profiles share a few hundred
 * stacks, so this sorts hundreds of ids where concatenating the rows for segment_add
 * sorted every sample (most of a cut's time). */
static segment_t *premerge(const segment_t *p, const uint32_t *order, hr_err_t *err) {
    assert(rows_in_order(p, order, p->nprofiles)); /* a series' rows are one run */
    size_t ns = p->sym->nstacks ? p->sym->nstacks : 1;
    segment_t *m = segment_new();
    if (m) symtab_free(m->sym), m->sym = p->sym;
    int64_t *acc = calloc(ns, sizeof *acc);
    uint8_t *seen = calloc(ns, 1);
    uint32_t *touched = malloc(ns * sizeof *touched);
    stack_value_t *sum = malloc(ns * sizeof *sum);
    int rc = m && acc && seen && touched && sum ? 0 : -1, overflow = 0;
    for (size_t a = 0; a < p->nprofiles && rc == 0 && !overflow;) {
        uint32_t series = p->profiles[order[a]].series;
        size_t nt = 0, b = a;
        int64_t mag = 0;
        for (; b < p->nprofiles && p->profiles[order[b]].series == series; b++) {
            const seg_profile_t *r = &p->profiles[order[b]];
            for (uint32_t j = 0; j < r->nsamples; j++) {
                uint32_t st = p->stacks[r->first + j];
                int64_t v = p->values[r->first + j], mv = v == INT64_MIN ? 0 : v < 0 ? -v : v;
                overflow |= v == INT64_MIN || __builtin_add_overflow(mag, mv, &mag);
                if (!seen[st]) seen[st] = 1, touched[nt++] = st;
                if (!overflow) acc[st] += v; /* cannot overflow: |sum| <= mag */
            }
        }
        sort_u32(touched, nt);
        size_t k = 0;
        for (size_t i = 0; i < nt; i++) {
            uint32_t st = touched[i];
            if (acc[st]) sum[k++] = (stack_value_t){st, acc[st]};
            acc[st] = 0, seen[st] = 0;
        }
        if (!overflow && segment_add_folded(m, series, p->min_time, 0, sum, k)) rc = -1;
        a = b;
    }
    free(acc);
    free(seen);
    free(touched);
    free(sum);
    if (rc) hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc || overflow) {
        premerged_free(m);
        return NULL;
    }
    return m;
}

/* One partition's sections: SYMBOLS, PROFILES, SAMPLES (p's rows, sorted), then the
 * pre-merged MPROFILES and MSAMPLES (empty when not pre-merged), then SPANS when any
 * row has span samples, then FUNCS when the partition has a function table (*ft, for
 * the caller to check it reads back; *funcs_len its section's bytes). *flags receives
 * the PART_* flags that apply. */
static int encode_part(const segment_t *p, const uint32_t *order, int summary, int stack_fps, const zenc_t *z,
                       buf_t *out, int *flags, functab_t **ft, uint64_t *funcs_len, uint64_t *syms_len, hr_err_t *err) {
    uint32_t *morder = NULL;
    err->code = HR_OK;
    segment_t *m = premerge(p, order, err);
    if (!m && err->code) return -1;
    if (m && segment_sorted_order(m, &morder)) {
        premerged_free(m);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    int64_t *unit = row_units(p, order, p->nprofiles), *munit = m ? row_units(m, morder, m->nprofiles) : NULL;
    int none = 0;
    *ft = m ? functab_build(p->sym, m, &none, err) : NULL;
    buf_t sec[9];
    for (int i = 0; i < 9; i++) buf_init(&sec[i]);
    sym_fp_t *fp = NULL;
    sec[0].oom = !unit || (m && !munit) || (m && !*ft && !none) || (stack_fps && symtab_stack_fps(p->sym, &fp));
    if (!sec[0].oom) { /* (put_sections reports an oom) */
        symtab_encode(p->sym, &sec[0]);
        if (stack_fps) encode_stack_fps(p, fp, &sec[7]);
        size_t rows = summary ? 0 : p->nprofiles; /* a summary keeps only the pre-merged rows */
        encode_profiles(p, order, unit, rows, &sec[1]);
        encode_samples(p, order, unit, rows, &sec[2]);
        if (m) encode_profiles(m, morder, munit, m->nprofiles, &sec[3]);
        if (m) encode_samples(m, morder, munit, m->nprofiles, &sec[4]);
    }
    int spans = p->nspans && !summary, traces = spans && has_traces(p);
    if (spans) encode_spans(p, order, p->nprofiles, traces, &sec[5]);
    int apart = *ft && stack_fps; /* the blocks of many small partitions name their functions by fingerprint */
    if (apart) functab_encode_names(*ft, &sec[8]);
    if (*ft) functab_encode(*ft, apart, &sec[6]);
    *flags = (m ? PART_MERGED : 0) | (spans ? PART_SPANS : 0) | PART_UNITS | (*ft ? PART_FUNCS : 0) |
             (summary ? PART_SUMMARY : 0) | (traces ? PART_TRACES : 0) | (stack_fps ? PART_STACKS : 0) |
             (apart ? PART_NAMES : 0);
    free(fp);
    free(morder);
    free(unit);
    free(munit);
    premerged_free(m);
    size_t start = out->len;
    int rc = put_sections(out, SEC_SYMBOLS, sec, 1, z, err);
    *syms_len = stack_fps ? out->len - start : 0;
    rc = rc ? rc : stack_fps ? put_sections(out, SEC_STACKS, sec + 7, 1, z, err) : 0;
    rc = rc ? rc : put_sections(out, SEC_PROFILES, sec + 1, 2, z, err);
    rc = rc ? rc : put_sections(out, SEC_MPROFILES, sec + 3, 2, z, err);
    rc = rc ? rc : spans ? put_sections(out, SEC_SPANS, sec + 5, 1, z, err) : 0;
    size_t at = out->len;
    rc = rc ? rc : apart ? put_sections(out, SEC_NAMES, sec + 8, 1, z, err) : 0;
    rc = rc ? rc : *ft ? put_sections(out, SEC_FUNCS, sec + 6, 1, z, err) : 0;
    *funcs_len = out->len - at;
    for (int i = 0; i < 9; i++) buf_free(&sec[i]); /* what put_sections did not take */
    return rc;
}

typedef struct {
    const char *key;
    uint32_t series;
    uint32_t run; /* the series' place among s's distinct series, ascending */
} series_key_t;

static int cmp_series_key(const void *a, const void *b) {
    const series_key_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->series > y->series) - (x->series < y->series);
}

/* The distinct series of s with their keys, sorted by (key, series). */
static series_key_t *series_keys(const segment_t *s, const uint32_t *order, block_key_fn key, void *kctx, size_t *n) {
    assert(rows_in_order(s, order, s->nprofiles));
    series_key_t *v = malloc((s->nprofiles ? s->nprofiles : 1) * sizeof *v);
    if (!v) return NULL;
    *n = 0;
    for (size_t i = 0; i < s->nprofiles; i++) {
        uint32_t series = s->profiles[order[i]].series;
        if (*n && v[*n - 1].series == series) continue; /* order is by series first */
        const char *k = key ? key(kctx, series) : NULL;
        v[*n] = (series_key_t){k ? k : "", series, (uint32_t)*n};
        (*n)++;
    }
    qsort(v, *n, sizeof *v, cmp_series_key);
    return v;
}

/* A footer's entry for one partition. */
static void footer_part(buf_t *f, const block_part_t *bp) {
    buf_put_bytes(f, bp->key, strlen(bp->key));
    buf_put_uvarint(f, bp->off);
    buf_put_uvarint(f, bp->len);
    buf_put_uvarint(f, (uint64_t)((bp->merged ? PART_MERGED : 0) | (bp->spans ? PART_SPANS : 0) |
                                  (bp->units ? PART_UNITS : 0) | (bp->funcs_len ? PART_FUNCS : 0) |
                                  (bp->summary ? PART_SUMMARY : 0) | (bp->traces ? PART_TRACES : 0) |
                                  (bp->stacks ? PART_STACKS : 0) | (bp->names ? PART_NAMES : 0)));
    if (bp->funcs_len) buf_put_uvarint(f, bp->funcs_len);
    if (bp->stacks) buf_put_uvarint(f, bp->syms_len);
    buf_put_uvarint(f, bp->nprofiles);
    buf_put_uvarint(f, bp->nsamples);
    buf_put_svarint(f, bp->min_time);
    buf_put_svarint(f, bp->max_time);
    buf_put_uvarint(f, bp->nseries);
    uint32_t prev = 0;
    for (size_t i = 0; i < bp->nseries; i++) {
        assert(i == 0 || bp->series[i] > prev); /* ascending: readers search it (block_part_has) */
        buf_put_uvarint(f, bp->series[i] - prev), prev = bp->series[i];
    }
}

/* A partition's rows (in `order`, by series then time) as footer totals. */
static void footer_rows(buf_t *t, const segment_t *p, const uint32_t *order, int64_t *prev_series, int64_t *prev_t) {
    for (size_t i = 0; i < p->nprofiles; i++) {
        const seg_profile_t *r = &p->profiles[order[i]];
        buf_put_svarint(t, (int64_t)r->series - *prev_series);
        buf_put_svarint(t, r->time_ns - *prev_t);
        buf_put_svarint(t, r->duration_ns);
        buf_put_svarint(t, r->total);
        *prev_series = r->series, *prev_t = r->time_ns;
    }
}

/* The footer section (at file offset foff, appended to out) and the tail that
 * points at it. */
static int put_footer(buf_t *out, uint64_t foff, size_t nparts, const buf_t *parts, size_t nrows, const buf_t *rows,
                      const zenc_t *z, hr_err_t *err) {
    buf_t sec;
    buf_init(&sec);
    buf_put_uvarint(&sec, nparts);
    buf_append(&sec, parts->data, parts->len);
    buf_put_uvarint(&sec, nrows);
    buf_append(&sec, rows->data, rows->len);
    if (parts->oom || rows->oom) sec.oom = 1;
    if (put_sections(out, SEC_FOOTER, &sec, 1, z, err)) return -1;
    size_t at = out->len;
    buf_put_u64le(out, foff);
    if (out->oom) return hr_fail(err, HR_ENOMEM, "out of memory");
    buf_put_u32le(out, (uint32_t)crc32(0, out->data + at, 8));
    buf_append(out, TAIL_MAGIC, 4);
    return out->oom ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
}

/* Each thread's zstd decompression context, made on its first section and freed when
 * the thread exits: a cold query decodes thousands of sections on a few decode
 * threads, and ZSTD_decompress would make and free a context (about 100 KiB) for each. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static void free_dctx(void *d) { ZSTD_freeDCtx(d); }
static void make_dctx_key(void) { pthread_key_create(&dctx_key, free_dctx); }

static ZSTD_DCtx *thread_dctx(void) {
    pthread_once(&dctx_once, make_dctx_key);
    ZSTD_DCtx *d = pthread_getspecific(dctx_key);
    if (!d && (d = ZSTD_createDCtx()) && pthread_setspecific(dctx_key, d)) ZSTD_freeDCtx(d), d = NULL;
    return d;
}

/* Reads one section, checks its CRC and decompresses it into *raw (caller frees). */
static int get_section(buf_reader_t *r, uint32_t want, uint8_t **raw, size_t *rawlen, hr_err_t *err) {
    uint32_t kind = buf_get_u32le(r);
    uint64_t rl = buf_get_u64le(r), sl = buf_get_u64le(r);
    uint32_t crc = buf_get_u32le(r);
    if (r->bad || kind != want || sl > buf_reader_left(r) || rl > MAX_SECTION_RAW)
        return hr_fail(err, HR_EUNPROC, "block: bad header of section %u", want);
    const uint8_t *p = buf_get_raw(r, (size_t)sl);
    if ((uint32_t)crc32(0, p, (uInt)sl) != crc)
        return hr_fail(err, HR_EUNPROC, "block: checksum mismatch in section %u", want);
    /* Allocate only what the zstd frame itself declares: the header's length alone
     * is not trusted (an empty section has a trivially valid CRC). */
    unsigned long long fcs = ZSTD_getFrameContentSize(p, (size_t)sl);
    if (fcs == ZSTD_CONTENTSIZE_ERROR || fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs != rl)
        return hr_fail(err, HR_EUNPROC, "block: section %u length does not match its zstd frame", want);
    *raw = malloc(rl ? (size_t)rl : 1);
    if (!*raw) return hr_fail(err, HR_ENOMEM, "out of memory");
    ZSTD_DCtx *dctx = thread_dctx(); /* NULL when out of memory: a context of its own */
    size_t d = dctx ? ZSTD_decompressDCtx(dctx, *raw, (size_t)rl, p, (size_t)sl)
                    : ZSTD_decompress(*raw, (size_t)rl, p, (size_t)sl);
    if (ZSTD_isError(d) || d != rl) {
        free(*raw);
        *raw = NULL;
        return hr_fail(err, HR_EUNPROC, "block: section %u does not decompress", want);
    }
    *rawlen = (size_t)rl;
    return 0;
}

/* The PROFILES columns of np rows into s. With units (PART_UNITS), the fifth column
 * (every row's value unit) goes to a new array *units, which the caller frees. */
static int decode_rows(segment_t *s, const uint8_t *p, size_t n, uint64_t np, int64_t min_t, int64_t **units,
                       hr_err_t *err) {
    if (np > n / 4) return hr_fail(err, HR_EUNPROC, "block: profile count exceeds data"); /* 4 columns a row */
    s->profiles = calloc(np ? np : 1, sizeof *s->profiles);
    if (!s->profiles) return hr_fail(err, HR_ENOMEM, "out of memory");
    s->profiles_cap = s->nprofiles = (size_t)np;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint64_t series = 0;
    for (uint64_t i = 0; i < np; i++) {
        uint64_t d = buf_get_uvarint(&r);
        if (d >= UINT32_MAX - series) return hr_fail(err, HR_EUNPROC, "block: bad series id"); /* no wrap-around */
        series += d;
        s->profiles[i].series = (uint32_t)series;
    }
    int64_t t = 0;
    for (uint64_t i = 0; i < np; i++) {
        if (i == 0 || s->profiles[i].series != s->profiles[i - 1].series) t = min_t;
        if (__builtin_add_overflow(t, buf_get_svarint(&r), &t)) return hr_fail(err, HR_EUNPROC, "block: bad time");
        s->profiles[i].time_ns = t;
    }
    for (uint64_t i = 0; i < np; i++) s->profiles[i].duration_ns = buf_get_svarint(&r);
    uint64_t first = 0;
    for (uint64_t i = 0; i < np; i++) {
        uint64_t ns = buf_get_uvarint(&r);
        if (ns > UINT32_MAX) return hr_fail(err, HR_EUNPROC, "block: bad sample count");
        s->profiles[i].nsamples = (uint32_t)ns;
        s->profiles[i].first = first;
        first += ns;
    }
    if (units && !(*units = malloc((np ? np : 1) * sizeof **units))) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (uint64_t i = 0; units && i < np; i++) {
        uint64_t u = buf_get_uvarint(&r);
        if (u == 0 || u > INT64_MAX) return hr_fail(err, HR_EUNPROC, "block: bad value unit");
        (*units)[i] = (int64_t)u;
    }
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad profile columns");
    s->nsamples = (size_t)first;
    return 0;
}

/* Room for s->nsamples samples. 0 or -1. */
static int alloc_samples(segment_t *s, hr_err_t *err) {
    size_t ns = s->nsamples ? s->nsamples : 1;
    s->stacks = malloc(ns * sizeof *s->stacks);
    s->values = malloc(ns * sizeof *s->values);
    if (!s->stacks || !s->values) return hr_fail(err, HR_ENOMEM, "out of memory");
    s->samples_cap = ns;
    return 0;
}

/* Steps r over n varints without decoding them: a varint ends at a byte below 0x80,
 * so this counts such bytes, eight at a time while it can. */
static void skip_varints(buf_reader_t *r, uint64_t n) {
    const uint8_t *p = r->p, *end = r->end;
    while (n >= 8 && end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        unsigned ends = (unsigned)__builtin_popcountll(~w & 0x8080808080808080ULL);
        if (ends > n) break; /* the last ones are among these eight: byte by byte */
        n -= ends, p += 8;
    }
    for (; n && p < end; p++) n -= *p < 0x80;
    if (n) r->bad = 1;
    r->p = p;
}

/* The SAMPLES columns of rows read of s (all rows, or those with keep[i] set, whose
 * samples then lie at s->profiles[...].first as keep_rows placed them); the others'
 * bytes are stepped over. Values are multiplied back by the rows' units (NULL: stored
 * as they are). */
static int decode_samples(segment_t *s, const uint8_t *p, size_t n, size_t nstacks, const int64_t *units,
                          const seg_profile_t *all, size_t nall, const uint8_t *keep, hr_err_t *err) {
    if (s->nsamples > n) return hr_fail(err, HR_EUNPROC, "block: sample count exceeds data");
    if (alloc_samples(s, err)) return -1;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    for (size_t i = 0, o = 0; i < nall; i++) {
        if (keep && !keep[i]) {
            skip_varints(&r, all[i].nsamples);
            continue;
        }
        seg_profile_t *row = &s->profiles[o++];
        uint64_t st = 0;
        for (uint32_t j = 0; j < row->nsamples; j++) {
            uint64_t d = buf_get_uvarint(&r);
            /* Strictly ascending within a profile (segment_add sums equal stacks); only the
             * first may be 0, the empty stack of a sample without locations. */
            if (d == 0 && j > 0) return hr_fail(err, HR_EUNPROC, "block: stack ids out of order");
            if (d >= nstacks - st) return hr_fail(err, HR_EUNPROC, "block: bad stack id"); /* no wrap-around */
            st += d;
            s->stacks[row->first + j] = (uint32_t)st;
        }
    }
    for (size_t i = 0, o = 0; i < nall; i++) {
        if (keep && !keep[i]) {
            skip_varints(&r, all[i].nsamples);
            continue;
        }
        seg_profile_t *row = &s->profiles[o];
        row->total = 0;
        for (uint32_t j = 0; j < row->nsamples; j++) {
            int64_t v = buf_get_svarint(&r);
            if (units && __builtin_mul_overflow(v, units[o], &v))
                return hr_fail(err, HR_EUNPROC, "block: value out of range");
            s->values[row->first + j] = v;
            row->total += v;
        }
        o++;
    }
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad sample columns");
    return 0;
}

/* Keeps the rows of s in win (keep[i] set for them), moving them down with their units;
 * their samples' offsets follow. *all receives the rows as read, for decode_samples
 * to step over the others; NULL when out of memory. */
static uint8_t *keep_rows(segment_t *s, const block_window_t *win, int64_t *units, seg_profile_t **all) {
    uint8_t *keep = malloc(s->nprofiles + 1);
    *all = malloc((s->nprofiles + 1) * sizeof **all);
    if (!keep || !*all) {
        free(keep);
        free(*all);
        *all = NULL;
        return NULL;
    }
    memcpy(*all, s->profiles, s->nprofiles * sizeof **all);
    size_t to = 0;
    uint64_t first = 0;
    for (size_t i = 0; i < s->nprofiles; i++) {
        seg_profile_t r = s->profiles[i];
        keep[i] = r.time_ns >= win->from && r.time_ns <= win->until;
        if (!keep[i]) continue;
        r.first = first;
        first += r.nsamples;
        if (units) units[to] = units[i];
        s->profiles[to++] = r;
    }
    s->nprofiles = to;
    s->nsamples = (size_t)first;
    return keep;
}

/* The SPANS section (encode_spans) of decoded rows: every stack id in range, samples
 * in (stack, span) order without repeats, no span 0. */
static int decode_spans(segment_t *s, const uint8_t *p, size_t n, size_t nstacks, int traces, hr_err_t *err) {
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint64_t total = 0, most = n / 10; /* a span sample takes 10 bytes or more */
    for (size_t i = 0; i < s->nprofiles; i++) {
        uint64_t k = buf_get_uvarint(&r);
        if (r.bad || k > most - total) return hr_fail(err, HR_EUNPROC, "block: span sample count exceeds data");
        s->profiles[i].nspans = (uint32_t)k;
        s->profiles[i].span_first = total;
        total += k;
    }
    if (!(s->spans = malloc((total ? total : 1) * sizeof *s->spans))) return hr_fail(err, HR_ENOMEM, "out of memory");
    s->spans_cap = s->nspans = (size_t)total;
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *row = &s->profiles[i];
        uint64_t st = 0;
        for (uint32_t j = 0; j < row->nspans; j++) {
            uint64_t d = buf_get_uvarint(&r);
            if (d >= nstacks - st) return hr_fail(err, HR_EUNPROC, "block: bad span stack id");
            st += d;
            s->spans[row->span_first + j].stack = (uint32_t)st;
        }
    }
    for (size_t i = 0; i < s->nspans; i++) s->spans[i].span = buf_get_u64le(&r);
    for (size_t i = 0; i < s->nspans; i++) s->spans[i].value = buf_get_svarint(&r);
    for (size_t i = 0; i < s->nspans; i++) {
        s->spans[i].trace_hi = traces ? buf_get_u64le(&r) : 0;
        s->spans[i].trace_lo = traces ? buf_get_u64le(&r) : 0;
    }
    for (size_t i = 0; i < s->nprofiles; i++) {
        const span_sample_t *v = s->spans + s->profiles[i].span_first;
        for (uint32_t j = 0; j < s->profiles[i].nspans; j++)
            if (!v[j].span || (j && v[j].stack == v[j - 1].stack && v[j].span <= v[j - 1].span))
                return hr_fail(err, HR_EUNPROC, "block: span samples out of order");
    }
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad span columns");
    return 0;
}

/* The version-1 body after its header: META, SYMBOLS, PROFILES, SAMPLES. */
static segment_t *decode_v1(buf_reader_t *r, hr_err_t *err) {
    uint8_t *raw[NSECTIONS] = {0};
    size_t rawlen[NSECTIONS] = {0};
    segment_t *s = NULL;
    for (int i = 0; i < NSECTIONS; i++)
        if (get_section(r, (uint32_t)(SEC_META + i), &raw[i], &rawlen[i], err)) goto fail;
    buf_reader_t mr;
    buf_reader_init(&mr, raw[0], rawlen[0]);
    uint64_t np = buf_get_uvarint(&mr), nsm = buf_get_uvarint(&mr);
    int64_t min_t = buf_get_svarint(&mr), max_t = buf_get_svarint(&mr);
    if (mr.bad) {
        hr_fail(err, HR_EUNPROC, "block: bad meta section");
        goto fail;
    }
    if (!(s = calloc(1, sizeof *s))) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto fail;
    }
    if (!(s->sym = symtab_decode(raw[1], rawlen[1], err))) goto fail;
    if (decode_rows(s, raw[2], rawlen[2], np, min_t, NULL, err)) goto fail;
    if (s->nsamples != nsm) {
        hr_fail(err, HR_EUNPROC, "block: sample count mismatch");
        goto fail;
    }
    if (decode_samples(s, raw[3], rawlen[3], s->sym->nstacks, NULL, s->profiles, s->nprofiles, NULL, err)) goto fail;
    s->min_time = np ? min_t : INT64_MAX;
    s->max_time = np ? max_t : INT64_MIN;
    for (int i = 0; i < NSECTIONS; i++) free(raw[i]);
    return s;
fail:
    for (int i = 0; i < NSECTIONS; i++) free(raw[i]);
    segment_free(s);
    return NULL;
}

/* The version of a block image from its 16-byte header: 1, 2, or 0 when it is not one. */
static int header_version(const uint8_t *p, size_t n) {
    if (n < HEADER_BYTES) return 0;
    buf_reader_t r;
    buf_reader_init(&r, p + 8, 8);
    uint32_t v = buf_get_u32le(&r), rest = buf_get_u32le(&r); /* v1: section count; v2: reserved 0 */
    if (!memcmp(p, MAGIC, 8) && v == 1) return 1;
    if (!memcmp(p, MAGIC2, 8) && v == 2 && rest == 0) return 2;
    return 0;
}

/* Steps over one section without decompressing it (a view that does not need it). */
static int skip_section(buf_reader_t *r, uint32_t want, hr_err_t *err) {
    uint32_t kind = buf_get_u32le(r);
    buf_get_u64le(r);
    uint64_t sl = buf_get_u64le(r);
    buf_get_u32le(r);
    if (r->bad || kind != want || sl > buf_reader_left(r) || !buf_get_raw(r, (size_t)sl))
        return hr_fail(err, HR_EUNPROC, "block: bad header of section %u", want);
    return 0;
}

void block_part_range(const block_part_t *bp, int view, uint64_t *off, uint64_t *len) {
    uint64_t skip = (view & BLOCK_VIEW_DEFER_SYMBOLS) && bp->stacks ? bp->syms_len : 0; /* SYMBOLS leads */
    if ((view & BLOCK_VIEW_SYMBOLS) && bp->stacks) {
        *off = bp->off, *len = bp->syms_len;
        return;
    }
    view = VIEW_OF(view);
    *off = view == BLOCK_VIEW_FUNCS ? bp->off + bp->len - bp->funcs_len : bp->off + skip;
    *len = view == BLOCK_VIEW_FUNCS ? bp->funcs_len : bp->len - bp->funcs_len - skip;
}

/* Keeps the NAMES section as stored (its first len bytes of p) in ft for
 * block_funcs_names. 0 or -1 (OOM, with err). */
static int keep_names(functab_t *ft, const uint8_t *p, size_t len, hr_err_t *err) {
    if (!(ft->names_sec = malloc(len ? len : 1))) return hr_fail(err, HR_ENOMEM, "out of memory");
    memcpy(ft->names_sec, p, len);
    ft->names_sec_len = len;
    return 0;
}

/* A partition's NAMES (when stored apart) and FUNCS sections (p..p+n) as a segment
 * holding only its function table. With defer, names stored apart stay as stored
 * (block_funcs_names reads them when a dictionary does not know a fingerprint). */
static segment_t *decode_funcs(const uint8_t *p, size_t n, const block_part_t *bp, int defer, hr_err_t *err) {
    if (!bp->funcs_len) return hr_fail(err, HR_EINTERNAL, "block: partition `%s` has no function table", bp->key), NULL;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint8_t *raw = NULL, *names = NULL;
    size_t rawlen = 0, nameslen = 0;
    defer = defer && bp->names;
    int rc = !bp->names ? 0
             : defer    ? skip_section(&r, SEC_NAMES, err)
                        : get_section(&r, SEC_NAMES, &names, &nameslen, err);
    size_t names_sec = n - buf_reader_left(&r);
    if (rc == 0) rc = get_section(&r, SEC_FUNCS, &raw, &rawlen, err);
    functab_t *ft =
        rc || buf_reader_left(&r) ? NULL : functab_decode(raw, rawlen, bp->series, bp->nseries, bp->names, err);
    free(raw);
    if (ft && (names ? functab_decode_names(ft, names, nameslen, err) : defer && keep_names(ft, p, names_sec, err)))
        functab_free(ft), ft = NULL;
    free(names);
    if (!ft && !err->code) hr_fail(err, HR_EUNPROC, "block: partition `%s` has trailing bytes", bp->key);
    segment_t *s = ft ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        functab_free(ft);
        if (ft) hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->funcs = ft;
    s->min_time = bp->nprofiles ? bp->min_time : INT64_MAX;
    s->max_time = bp->nprofiles ? bp->max_time : INT64_MIN;
    return s;
}

int block_window_narrows(const block_part_t *bp, const block_window_t *win) {
    return win && bp->nprofiles && (win->from > bp->min_time || win->until < bp->max_time);
}

/* The rows view's rows and samples (and spans), all or (win) those in the window. */
static int decode_row_view(segment_t *s, const block_part_t *bp, uint8_t *const *raw, const size_t *rawlen,
                           size_t nstacks, const block_window_t *win, hr_err_t *err) {
    int64_t *units = NULL;
    seg_profile_t *all = NULL;
    uint8_t *keep = NULL;
    int rc = decode_rows(s, raw[1], rawlen[1], bp->nprofiles, bp->min_time, bp->units ? &units : NULL, err);
    if (rc == 0 && s->nsamples != bp->nsamples) rc = hr_fail(err, HR_EUNPROC, "block: sample count mismatch");
    size_t nall = s->nprofiles;
    if (rc == 0 && win && !(keep = keep_rows(s, win, units, &all))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    if (rc == 0) rc = decode_samples(s, raw[2], rawlen[2], nstacks, units, all ? all : s->profiles, nall, keep, err);
    free(units);
    free(all);
    free(keep);
    return rc;
}

/* A STACKS section (raw): its partition's stack count, and ids[1..count] (ascending,
 * below that count) with fps[1..count] their fingerprints ([0] is the empty stack's
 * place, never read). Sized by the section's own bytes: an entry takes 17 or more. */
typedef struct {
    uint64_t nstacks;
    uint32_t *ids;
    sym_fp_t *fps;
    size_t count;
} stack_fps_t;

static int parse_stack_fps(const uint8_t *p, size_t n, stack_fps_t *f, hr_err_t *err) {
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    f->nstacks = buf_get_uvarint(&r);
    uint64_t c = buf_get_uvarint(&r);
    if (r.bad || f->nstacks == 0 || f->nstacks > UINT32_MAX || c >= f->nstacks || c > buf_reader_left(&r) / 17)
        return hr_fail(err, HR_EUNPROC, "block: bad stack fingerprint section");
    f->count = (size_t)c;
    f->ids = malloc((f->count + 1) * sizeof *f->ids);
    f->fps = malloc((f->count + 1) * sizeof *f->fps);
    if (!f->ids || !f->fps) return hr_fail(err, HR_ENOMEM, "out of memory");
    f->ids[0] = 0, f->fps[0] = (sym_fp_t){0, 0};
    uint64_t id = 0;
    for (size_t k = 1; k <= f->count; k++) {
        uint64_t d = buf_get_uvarint(&r);
        if (d == 0 || d >= f->nstacks - id) return hr_fail(err, HR_EUNPROC, "block: bad stack fingerprint id");
        id += d;
        f->ids[k] = (uint32_t)id;
        f->fps[k].a = buf_get_u64le(&r);
        f->fps[k].b = buf_get_u64le(&r);
    }
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad stack fingerprint section");
    return 0;
}

/* The index k (1..n) of stack id in ids[1..n] (ascending), searched from *at on, or 0
 * when absent. A row names its stacks in ascending order, so each search of a row
 * starts where the last ended (*at, left at the answer) and gallops forward. */
static uint32_t local_stack(const uint32_t *ids, size_t n, uint32_t id, size_t *at) {
    size_t lo = *at, hi = lo, step = 1; /* every ids[k < lo] is below id */
    while (hi <= n && ids[hi] < id) lo = hi + 1, hi += step, step *= 2;
    if (hi > n) hi = n + 1; /* ids[hi] >= id, or hi is past the end */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    *at = lo;
    return lo <= n && ids[lo] == id ? (uint32_t)lo : 0;
}

/* Stack id -> its index in f (0: unlisted), as a table when one costs at most a few
 * times the section itself (the section's stack count is the file's word, not a size
 * read), else (or out of memory) NULL: the ids are then searched (local_stack). */
static uint32_t *listed_table(const stack_fps_t *f) {
    if (f->nstacks > 16 * ((uint64_t)f->count + 1) + 4096) return NULL;
    uint32_t *t = calloc((size_t)f->nstacks, sizeof *t);
    for (size_t k = 1; t && k <= f->count; k++) t[f->ids[k]] = (uint32_t)k;
    return t;
}

/* Checks that every stack s's samples and span samples name (but the empty one) is
 * listed in f, and with renumber replaces each by its index there. 0, or -1 with err.
 * The decoder has bounded every id by f's stack count. */
static int stacks_listed(segment_t *s, const stack_fps_t *f, int renumber, const char *key, hr_err_t *err) {
    uint32_t *t = listed_table(f);
#define LISTED(id, at) ((id) == 0 ? 0 : t ? t[id] : local_stack(f->ids, f->count, (id), (at)))
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *row = &s->profiles[i];
        size_t at = 1, span_at = 1;
        for (uint64_t j = row->first; j < row->first + row->nsamples; j++) {
            uint32_t k = LISTED(s->stacks[j], &at);
            if (s->stacks[j] && !k) goto unlisted;
            if (renumber) s->stacks[j] = k;
        }
        for (uint64_t j = row->span_first; j < row->span_first + row->nspans; j++) {
            uint32_t k = LISTED(s->spans[j].stack, &span_at);
            if (s->spans[j].stack && !k) goto unlisted;
            if (renumber) s->spans[j].stack = k;
        }
    }
#undef LISTED
    free(t);
    return 0;
unlisted:
    free(t);
    return hr_fail(err, HR_EUNPROC, "block: partition `%s` names a stack its fingerprints do not list", key);
}

/* A whole read's check of a STACKS section (raw) against the decoded symbols: each
 * listed fingerprint is its stack's, and the rows name only listed stacks. */
static int stack_fps_match(segment_t *s, const uint8_t *raw, size_t n, const char *key, hr_err_t *err) {
    stack_fps_t f = {0};
    sym_fp_t *fp = NULL;
    int rc = parse_stack_fps(raw, n, &f, err);
    if (rc == 0 && f.nstacks != s->sym->nstacks)
        rc = hr_fail(err, HR_EUNPROC, "block: partition `%s`: stack fingerprints of another table", key);
    if (rc == 0 && symtab_stack_fps(s->sym, &fp)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t k = 1; rc == 0 && k <= f.count; k++)
        if (fp[f.ids[k]].a != f.fps[k].a || fp[f.ids[k]].b != f.fps[k].b)
            rc = hr_fail(err, HR_EUNPROC, "block: partition `%s`: a stack fingerprint does not match", key);
    if (rc == 0) rc = stacks_listed(s, &f, 0, key, err);
    free(fp);
    free(f.ids);
    free(f.fps);
    return rc;
}

/* A BLOCK_VIEW_DEFER_SYMBOLS read's symbols: the listed fingerprints (raw, its STACKS
 * section) become s's stacks 1..count. */
static int defer_symbols(segment_t *s, const uint8_t *raw, size_t rawlen, const char *key, hr_err_t *err) {
    stack_fps_t f = {0};
    int rc = parse_stack_fps(raw, rawlen, &f, err);
    if (rc == 0) rc = stacks_listed(s, &f, 1, key, err);
    if (rc) {
        free(f.ids);
        free(f.fps);
        return rc;
    }
    s->stack_src = f.ids, s->stack_fp = f.fps, s->nstack_fp = f.count;
    return 0;
}

/* A BLOCK_VIEW_SYMBOLS read: the partition's SYMBOLS section (p..p+n) alone. */
static segment_t *decode_symbols(const uint8_t *p, size_t n, const block_part_t *bp, hr_err_t *err) {
    if (!bp->stacks)
        return hr_fail(err, HR_EINTERNAL, "block: partition `%s` has no symbols to read alone", bp->key), NULL;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    segment_t *s = calloc(1, sizeof *s);
    if (!s) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    s->min_time = INT64_MAX, s->max_time = INT64_MIN;
    if (get_section(&r, SEC_SYMBOLS, &raw, &rawlen, err) == 0 && buf_reader_left(&r))
        hr_fail(err, HR_EUNPROC, "block: partition `%s` has a bad symbols length", bp->key);
    else if (raw) s->sym = symtab_decode(raw, rawlen, err);
    free(raw);
    if (!s->sym) {
        segment_free(s);
        return NULL;
    }
    return s;
}

int block_funcs_names(functab_t *ft, hr_err_t *err) {
    if (!ft->names_sec) return hr_fail(err, HR_EINTERNAL, "block: no function names kept");
    buf_reader_t r;
    buf_reader_init(&r, ft->names_sec, ft->names_sec_len);
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    int rc = get_section(&r, SEC_NAMES, &raw, &rawlen, err);
    if (rc == 0) rc = functab_decode_names(ft, raw, rawlen, err);
    free(raw);
    if (rc == 0) free(ft->names_sec), ft->names_sec = NULL, ft->names_sec_len = 0;
    return rc;
}

int block_part_symbols(segment_t *s, segment_t *syms, hr_err_t *err) {
    int rc = syms->sym ? 0 : hr_fail(err, HR_EINTERNAL, "block: no symbols read");
    for (size_t k = 1; rc == 0 && k <= s->nstack_fp; k++)
        if (s->stack_src[k] >= syms->sym->nstacks)
            rc = hr_fail(err, HR_EUNPROC, "block: stack fingerprints of another symbol table");
    if (rc == 0 && !s->sym) s->sym = syms->sym, syms->sym = NULL;
    segment_free(syms);
    return rc;
}

/* One version-2 partition's sections (p..p+n, block_part_range's bytes for the view)
 * into a segment: its profile rows (with a window, those in it, without spans), or
 * (view BLOCK_VIEW_MERGED) its pre-merged rows, one per series, or (BLOCK_VIEW_FUNCS)
 * its function table. The footer's entry supplies the counts and the time base, which
 * the sections must match. view may carry BLOCK_VIEW_DEFER_SYMBOLS and VIEW_VERIFY. */
static segment_t *decode_part(const uint8_t *p, size_t n, const block_part_t *bp, int view, const block_window_t *win,
                              hr_err_t *err) {
    int defer = (view & BLOCK_VIEW_DEFER_SYMBOLS) && bp->stacks, verify = (view & VIEW_VERIFY) && bp->stacks;
    if (view & BLOCK_VIEW_SYMBOLS) return decode_symbols(p, n, bp, err);
    if (VIEW_OF(view) == BLOCK_VIEW_FUNCS) return decode_funcs(p, n, bp, (view & BLOCK_VIEW_DEFER_SYMBOLS) != 0, err);
    view = VIEW_OF(view);
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint8_t *raw[5] = {0}, *fps = NULL;
    size_t rawlen[5] = {0}, fpslen = 0;
    segment_t *s = calloc(1, sizeof *s);
    if (!s) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    int merged = view == BLOCK_VIEW_MERGED, rc = 0;
    if (merged && !bp->merged) rc = hr_fail(err, HR_EINTERNAL, "block: partition `%s` is not pre-merged", bp->key);
    if (merged || !block_window_narrows(bp, win)) win = NULL;                           /* every row */
    if (rc == 0 && !defer) rc = get_section(&r, SEC_SYMBOLS, &raw[0], &rawlen[0], err); /* else not in p..p+n */
    if (rc == 0 && bp->stacks)
        rc = defer || verify ? get_section(&r, SEC_STACKS, &fps, &fpslen, err) : skip_section(&r, SEC_STACKS, err);
    static const uint32_t KINDS[5] = {SEC_SYMBOLS, SEC_PROFILES, SEC_SAMPLES, SEC_MPROFILES, SEC_MSAMPLES};
    for (int i = 1; i < 5 && rc == 0; i++) {
        int wanted = (i <= 2) != merged;
        rc = wanted ? get_section(&r, KINDS[i], &raw[i], &rawlen[i], err) : skip_section(&r, KINDS[i], err);
    }
    uint8_t *spans = NULL;
    size_t spanlen = 0;
    if (rc == 0 && bp->spans)
        rc = merged || win ? skip_section(&r, SEC_SPANS, err) : get_section(&r, SEC_SPANS, &spans, &spanlen, err);
    if (rc == 0 && buf_reader_left(&r))
        rc = hr_fail(err, HR_EUNPROC, "block: partition `%s` has trailing bytes", bp->key);
    uint64_t nstacks = 0;
    if (rc == 0 && defer) {
        buf_reader_t fr; /* the stack count leads the section */
        buf_reader_init(&fr, fps, fpslen);
        nstacks = buf_get_uvarint(&fr);
        if (fr.bad || nstacks == 0 || nstacks > UINT32_MAX)
            rc = hr_fail(err, HR_EUNPROC, "block: bad stack fingerprint section");
    } else if (rc == 0 && !(s->sym = symtab_decode(raw[0], rawlen[0], err))) {
        rc = -1;
    }
    if (rc == 0 && s->sym) nstacks = s->sym->nstacks;
    if (rc == 0 && merged) {
        int64_t *units = NULL;
        rc = decode_rows(s, raw[3], rawlen[3], bp->nseries, bp->min_time, bp->units ? &units : NULL, err);
        if (rc == 0) rc = decode_samples(s, raw[4], rawlen[4], nstacks, units, s->profiles, s->nprofiles, NULL, err);
        free(units);
    } else if (rc == 0) {
        rc = decode_row_view(s, bp, raw, rawlen, nstacks, win, err);
    }
    if (rc == 0 && spans) rc = decode_spans(s, spans, spanlen, nstacks, bp->traces, err);
    free(spans);
    /* Queries pick partitions and views by the footer's time range: it must hold. */
    for (size_t i = 0; rc == 0 && i < s->nprofiles; i++)
        if (s->profiles[i].time_ns < bp->min_time || s->profiles[i].time_ns > bp->max_time)
            rc = hr_fail(err, HR_EUNPROC, "block: partition `%s` has rows outside its time range", bp->key);
    if (rc == 0 && defer) rc = defer_symbols(s, fps, fpslen, bp->key, err);
    if (rc == 0 && verify) rc = stack_fps_match(s, fps, fpslen, bp->key, err);
    for (int i = 0; i < 5; i++) free(raw[i]);
    free(fps);
    if (rc) {
        segment_free(s);
        return NULL;
    }
    int some = bp->nprofiles || (merged && bp->summary);
    s->min_time = some ? bp->min_time : INT64_MAX;
    s->max_time = some ? bp->max_time : INT64_MIN;
    return s;
}

void block_index_free(block_index_t *ix) {
    if (!ix) return;
    for (size_t i = 0; i < ix->nparts; i++) {
        free(ix->parts[i].key);
        free(ix->parts[i].series);
        free(ix->parts[i].covers);
    }
    free(ix->parts);
    segment_free(ix->totals);
    free(ix);
}

/* One footer partition entry; its byte range must lie in [HEADER_BYTES, limit). */
static int parse_part(buf_reader_t *r, block_part_t *p, uint64_t limit, hr_err_t *err) {
    size_t kl;
    const uint8_t *k = buf_get_bytes(r, &kl);
    p->off = buf_get_uvarint(r);
    p->len = buf_get_uvarint(r);
    uint64_t flags = buf_get_uvarint(r);
    p->merged = (flags & PART_MERGED) != 0;
    p->spans = (flags & PART_SPANS) != 0;
    p->units = (flags & PART_UNITS) != 0;
    p->summary = (flags & PART_SUMMARY) != 0;
    p->traces = (flags & PART_TRACES) != 0;
    p->stacks = (flags & PART_STACKS) != 0;
    p->names = (flags & PART_NAMES) != 0;
    p->funcs_len = flags & PART_FUNCS ? buf_get_uvarint(r) : 0;
    p->syms_len = flags & PART_STACKS ? buf_get_uvarint(r) : 0;
    uint64_t np = buf_get_uvarint(r), ns = buf_get_uvarint(r);
    p->min_time = buf_get_svarint(r);
    p->max_time = buf_get_svarint(r);
    uint64_t nser = buf_get_uvarint(r);
    /* Counts are not trusted to size anything here: decode_rows checks them against the
     * decompressed bytes, and each series id below takes at least one footer byte. */
    if (r->bad || !k || p->off < HEADER_BYTES || p->len > limit || p->off > limit - p->len ||
        nser > buf_reader_left(r) || (nser > np && !p->summary) || np > SIZE_MAX || ns > SIZE_MAX ||
        p->funcs_len >= p->len || ((flags & PART_FUNCS) && (!p->funcs_len || !p->merged)) ||
        (p->names && !p->funcs_len) || (p->stacks && (!p->syms_len || p->syms_len >= p->len - p->funcs_len)) ||
        (p->summary && (np || ns || !p->merged || p->spans || !nser || p->min_time > p->max_time)) ||
        (p->traces && !p->spans) || (flags & ~(uint64_t)PART_KNOWN))
        return hr_fail(err, HR_EUNPROC, "block: bad footer partition entry");
    p->nprofiles = (size_t)np, p->nsamples = (size_t)ns, p->nseries = (size_t)nser;
    if (!(p->key = malloc(kl + 1)) || !(p->series = malloc((nser ? nser : 1) * sizeof *p->series)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    memcpy(p->key, k, kl);
    p->key[kl] = 0;
    uint64_t id = 0;
    for (size_t i = 0; i < nser; i++) {
        uint64_t d = buf_get_uvarint(r);
        if ((i && !d) || d >= UINT32_MAX - id) return hr_fail(err, HR_EUNPROC, "block: bad footer series list");
        id += d;
        p->series[i] = (uint32_t)id;
    }
    return r->bad ? hr_fail(err, HR_EUNPROC, "block: bad footer series list") : 0;
}

/* The footer's totals: rows only, no samples, an empty symtab. */
static segment_t *parse_totals(buf_reader_t *r, uint64_t nrows, hr_err_t *err) {
    if (nrows > buf_reader_left(r) / 4) /* a row is at least four varints */
        return hr_fail(err, HR_EUNPROC, "block: bad footer row count"), NULL;
    segment_t *t = segment_new();
    if (!t || !(t->profiles = calloc(nrows ? nrows : 1, sizeof *t->profiles))) {
        segment_free(t);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    t->profiles_cap = t->nprofiles = (size_t)nrows;
    int64_t series = 0, time = 0;
    for (size_t i = 0; i < nrows; i++) {
        seg_profile_t *p = &t->profiles[i];
        int64_t ds = buf_get_svarint(r), dt = buf_get_svarint(r);
        if (__builtin_add_overflow(series, ds, &series) || __builtin_add_overflow(time, dt, &time)) r->bad = 1;
        p->duration_ns = buf_get_svarint(r);
        p->total = buf_get_svarint(r);
        if (series < 0 || series >= UINT32_MAX) r->bad = 1;
        p->series = (uint32_t)series, p->time_ns = time;
        if (time < t->min_time) t->min_time = time;
        if (time > t->max_time) t->max_time = time;
    }
    if (r->bad || buf_reader_left(r)) {
        segment_free(t);
        return hr_fail(err, HR_EUNPROC, "block: bad footer rows"), NULL;
    }
    return t;
}

/* 1 when the footer's rows are its partitions' rows, partition by partition: each
 * partition's count of them, of its series, in its time range (scans hand a query
 * the slice of the partitions it wants). */
static int rows_match_parts(const block_index_t *ix) {
    size_t at = 0;
    for (size_t p = 0; p < ix->nparts; p++) {
        const block_part_t *bp = &ix->parts[p];
        if (bp->nprofiles > ix->totals->nprofiles - at) return 0;
        for (size_t k = at; k < at + bp->nprofiles; k++) {
            const seg_profile_t *r = &ix->totals->profiles[k];
            if (!block_part_has(bp, r->series) || r->time_ns < bp->min_time || r->time_ns > bp->max_time) return 0;
        }
        at += bp->nprofiles;
    }
    return at == ix->totals->nprofiles;
}

/* Parses a FOOTER section (at f, n bytes) of a file of size `size` whose footer
 * starts at foff. */
static int link_summaries(block_index_t *ix, hr_err_t *err);

static block_index_t *parse_footer(const uint8_t *f, size_t n, uint64_t foff, hr_err_t *err) {
    buf_reader_t r;
    buf_reader_init(&r, f, n);
    uint8_t *raw = NULL;
    size_t rawlen = 0;
    block_index_t *ix = calloc(1, sizeof *ix);
    if (!ix) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    ix->version = 2;
    int rc = get_section(&r, SEC_FOOTER, &raw, &rawlen, err);
    buf_reader_t fr;
    buf_reader_init(&fr, raw, rc ? 0 : rawlen);
    uint64_t np = rc == 0 ? buf_get_uvarint(&fr) : 0;
    if (rc == 0 && (fr.bad || np > rawlen)) rc = hr_fail(err, HR_EUNPROC, "block: bad footer");
    if (rc == 0 && !(ix->parts = calloc(np ? np : 1, sizeof *ix->parts))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < np && rc == 0; i++, ix->nparts++) rc = parse_part(&fr, &ix->parts[i], foff, err);
    if (rc == 0 && !(ix->totals = parse_totals(&fr, buf_get_uvarint(&fr), err))) rc = -1;
    if (rc == 0 && !rows_match_parts(ix))
        rc = hr_fail(err, HR_EUNPROC, "block: footer rows do not match its partitions");
    if (rc == 0) rc = link_summaries(ix, err);
    free(raw);
    if (rc) {
        block_index_free(ix);
        return NULL;
    }
    return ix;
}

/* The footer offset from a 16-byte tail (file size `size`); 0 when the tail is bad. */
static uint64_t tail_footer(const uint8_t *t, uint64_t size) {
    buf_reader_t r;
    buf_reader_init(&r, t, 12);
    uint64_t off = buf_get_u64le(&r);
    uint32_t crc = buf_get_u32le(&r);
    if (memcmp(t + 12, TAIL_MAGIC, 4) || (uint32_t)crc32(0, t, 8) != crc || off < HEADER_BYTES ||
        off > size - TAIL_BYTES)
        return 0;
    return off;
}

/* The index of an in-memory version-2 image. */
static block_index_t *index_of_image(const uint8_t *p, size_t n, hr_err_t *err) {
    uint64_t foff = n >= HEADER_BYTES + TAIL_BYTES ? tail_footer(p + n - TAIL_BYTES, n) : 0;
    if (!foff) return hr_fail(err, HR_EUNPROC, "block: bad tail"), NULL;
    return parse_footer(p + foff, (size_t)(n - TAIL_BYTES - foff), foff, err);
}

int block_part_has(const block_part_t *p, uint32_t series) {
    if (!p->series) return 1;
    size_t lo = 0, hi = p->nseries;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->series[mid] < series) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->nseries && p->series[lo] == series;
}

/* ---- summaries (format/block.md): a partition of pre-merged rows alone, standing for
 * the other partitions of its key in the block that its time range holds ---- */

/* 1 when summary partition s stands for partition q (s != q): same key, and s's range
 * holds q's; of two summaries with one range the first stands for the second. */
static int summary_covers(const block_index_t *ix, size_t si, size_t qi) {
    const block_part_t *sp = &ix->parts[si], *q = &ix->parts[qi];
    if (si == qi || !sp->summary || strcmp(sp->key, q->key)) return 0;
    if (sp->min_time > q->min_time || q->max_time > sp->max_time) return 0;
    return !q->summary || sp->min_time != q->min_time || sp->max_time != q->max_time || si < qi;
}

static int cmp_part_key(const void *a, const void *b, void *ctx) {
    const block_part_t *parts = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int c = strcmp(parts[x].key, parts[y].key);
    return c ? c : (x > y) - (x < y);
}

/* Fills every partition's `covers`: the summaries standing for it. A key's partitions
 * are grouped by sorting, so a block of many services costs its size, not its square. */
static int link_summaries(block_index_t *ix, hr_err_t *err) {
    size_t n = ix->nparts, nsum = 0;
    for (size_t i = 0; i < n; i++) nsum += (size_t)ix->parts[i].summary;
    if (!nsum) return 0;
    uint32_t *by = malloc(n * sizeof *by);
    if (!by) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) by[i] = (uint32_t)i;
    qsort_r(by, n, sizeof *by, cmp_part_key, ix->parts);
    int rc = 0;
    for (size_t a = 0, b; a < n && rc == 0; a = b) {
        for (b = a; b < n && !strcmp(ix->parts[by[a]].key, ix->parts[by[b]].key); b++) {
        }
        for (size_t i = a; i < b && rc == 0; i++) {
            block_part_t *q = &ix->parts[by[i]];
            for (size_t j = a; j < b && rc == 0; j++) {
                if (!summary_covers(ix, by[j], by[i])) continue;
                uint32_t *c = realloc(q->covers, (q->ncovers + 1) * sizeof *c);
                if (!c) rc = hr_fail(err, HR_ENOMEM, "out of memory");
                else q->covers = c, q->covers[q->ncovers++] = by[j];
            }
        }
    }
    free(by);
    return rc;
}

/* A summary's pre-merged totals per series (ascending), kept by the writer until the
 * footer shows which rows the summary stands for. */
typedef struct {
    size_t part;
    uint32_t *series;
    int64_t *total;
    size_t n;
} sum_totals_t;

/* m's rows (one per series) into t. 0 or -1 (OOM). */
static int summary_totals(const segment_t *m, sum_totals_t *t) {
    t->series = malloc((m->nprofiles ? m->nprofiles : 1) * sizeof *t->series);
    t->total = malloc((m->nprofiles ? m->nprofiles : 1) * sizeof *t->total);
    if (!t->series || !t->total) return -1;
    for (size_t i = 0; i < m->nprofiles; i++) t->series[i] = m->profiles[i].series, t->total[i] = m->profiles[i].total;
    t->n = m->nprofiles;
    return 0;
}

static int is_covered_by(const block_part_t *q, size_t si) {
    for (size_t k = 0; k < q->ncovers; k++)
        if (q->covers[k] == si) return 1;
    return 0;
}

/* 1 when summary t (partition t->part of ix) sums exactly the footer rows of the
 * partitions it stands for, series by series; 0, or -1 on OOM. */
static int summary_matches(const block_index_t *ix, const sum_totals_t *t) {
    int64_t *acc = calloc(t->n ? t->n : 1, sizeof *acc);
    uint8_t *seen = calloc(t->n ? t->n : 1, 1);
    int ok = acc && seen ? 1 : -1;
    size_t at = 0;
    for (size_t q = 0; q < ix->nparts && ok == 1; at += ix->parts[q].nprofiles, q++) {
        if (ix->parts[q].summary || !is_covered_by(&ix->parts[q], t->part)) continue;
        for (size_t k = at; k < at + ix->parts[q].nprofiles && ok == 1; k++) {
            const seg_profile_t *r = &ix->totals->profiles[k];
            const uint32_t *hit = bsearch(&r->series, t->series, t->n, sizeof *t->series, cmp_u32);
            if (!hit || __builtin_add_overflow(acc[hit - t->series], r->total, &acc[hit - t->series])) ok = 0;
            else seen[hit - t->series] = 1;
        }
    }
    for (size_t i = 0; i < t->n && ok == 1; i++) ok = seen[i] && acc[i] == t->total[i];
    free(acc);
    free(seen);
    return ok;
}

/* 1 when m holds one row per series of p, whose total is the sum of that series'
 * totals in p (p's rows in `order`, NULL: as they are, by series then time). */
static int merged_matches(const segment_t *p, const uint32_t *order, const segment_t *m) {
    size_t k = 0;
#define ROW(i) (&p->profiles[order ? order[i] : (i)])
    for (size_t i = 0; i < p->nprofiles;) {
        uint32_t series = ROW(i)->series;
        int64_t sum = 0;
        for (; i < p->nprofiles && ROW(i)->series == series; i++) sum += ROW(i)->total;
#undef ROW
        if (k == m->nprofiles || m->profiles[k].series != series || m->profiles[k].total != sum) return 0;
        k++;
    }
    return k == m->nprofiles;
}

/* 1 when partition bp's function table (in image p) is the one its pre-merged rows m
 * give; else 0 with err. */
static int funcs_match(const uint8_t *p, const block_part_t *bp, const segment_t *m, hr_err_t *err) {
    uint64_t off, len;
    block_part_range(bp, BLOCK_VIEW_FUNCS, &off, &len);
    segment_t *f = decode_part(p + off, (size_t)len, bp, BLOCK_VIEW_FUNCS, NULL, err);
    int none = 0;
    functab_t *want = f ? functab_build(m->sym, m, &none, err) : NULL;
    int ok = want && functab_equal(want, f->funcs);
    if (f && (want || none) && !ok)
        hr_fail(err, HR_EUNPROC, "block: the function table of partition `%s` does not match its rows", bp->key);
    functab_free(want);
    segment_free(f);
    return ok;
}

/* Every partition of a version-2 image, merged into one segment. */
static segment_t *decode_v2(const uint8_t *p, size_t n, hr_err_t *err) {
    block_index_t *ix = index_of_image(p, n, err);
    if (!ix) return NULL;
    segment_t **parts = calloc(ix->nparts ? ix->nparts : 1, sizeof *parts), *all = NULL;
    int rc = parts ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < ix->nparts && rc == 0; i++) {
        const block_part_t *bp = &ix->parts[i];
        uint64_t off, len;
        block_part_range(bp, BLOCK_VIEW_ROWS, &off, &len);
        if (!(parts[i] = decode_part(p + off, (size_t)len, bp, BLOCK_VIEW_ROWS | VIEW_VERIFY, NULL, err))) rc = -1;
        /* The whole block (hearth check, compaction) is verified whole: pre-merged rows too. */
        segment_t *m = rc == 0 && bp->merged
                           ? decode_part(p + off, (size_t)len, bp, BLOCK_VIEW_MERGED | VIEW_VERIFY, NULL, err)
                           : NULL;
        if (rc == 0 && bp->merged && (!m || (!bp->summary && !merged_matches(parts[i], NULL, m))))
            rc = m ? hr_fail(err, HR_EUNPROC, "block: pre-merged rows of partition `%s` do not match", bp->key) : -1;
        if (rc == 0 && bp->funcs_len && !funcs_match(p, bp, m, err)) rc = -1;
        sum_totals_t st = {.part = i};
        if (rc == 0 && bp->summary && summary_totals(m, &st)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        int sm = rc == 0 && bp->summary ? summary_matches(ix, &st) : 1;
        if (sm <= 0)
            rc = sm < 0 ? hr_fail(err, HR_ENOMEM, "out of memory")
                        : hr_fail(err, HR_EUNPROC, "block: summary partition `%s` does not sum its rows", bp->key);
        free(st.series);
        free(st.total);
        segment_free(m);
    }
    if (rc == 0) all = segment_merge((const segment_t *const *)parts, ix->nparts, err);
    for (size_t i = 0; parts && i < ix->nparts; i++) segment_free(parts[i]);
    free(parts);
    block_index_free(ix);
    return all;
}

segment_t *block_decode(const uint8_t *p, size_t n, hr_err_t *err) {
    int v = header_version(p, n);
    if (v == 2) return decode_v2(p, n, err);
    if (v != 1) {
        hr_fail(err, HR_EUNPROC,
                n >= 8 && (!memcmp(p, MAGIC, 8) || !memcmp(p, MAGIC2, 8)) ? "block: unsupported version"
                                                                          : "block: not a Hearth block (bad magic)");
        return NULL;
    }
    buf_reader_t r;
    buf_reader_init(&r, p + 12, n - 12);
    if (buf_get_u32le(&r) != NSECTIONS) return hr_fail(err, HR_EUNPROC, "block: unsupported version 1 layout"), NULL;
    return decode_v1(&r, err);
}

/* ---- writing ---- */

/* A footer row as the writer checks it: what a reader must get back. */
typedef struct {
    uint32_t series, zero; /* zero: no padding, as rows are compared with memcmp */
    int64_t time_ns, duration_ns, total;
} row_t;

/* Appends seg's rows to v, rows order[0..) when order is given (the order written). */
static void rows_of(const segment_t *seg, const uint32_t *order, row_t *v, size_t *n) {
    for (size_t i = 0; i < seg->nprofiles; i++) {
        const seg_profile_t *p = &seg->profiles[order ? order[i] : i];
        v[(*n)++] = (row_t){p->series, 0, p->time_ns, p->duration_ns, p->total};
    }
}

/* The block being written: partitions are encoded, checked and written one at a
 * time (two by add_by_key), so only one (two) is ever in memory; the footer entries
 * and rows accumulate. */
struct block_writer {
    int fd; /* -1: the image is kept in out */
    char path[4096], tmp[4100];
    zenc_t z;
    buf_t out;            /* the image not yet written to fd (in memory: all of it) */
    uint64_t flushed;     /* bytes already written to fd */
    buf_t parts, totals;  /* the footer's partition entries and rows so far */
    block_part_t *parted; /* what each footer entry says: the parsed footer must say the same */
    size_t nparts, parts_cap;
    row_t *rows; /* every row added, in the order written: the footer's rows must be these */
    size_t nrows, rows_cap;
    sum_totals_t *sums; /* each summary's totals: the footer must show it sums its rows */
    size_t nsums, sums_cap;
    int64_t prev_series, prev_t; /* the footer rows' deltas run across partitions */
    block_summary_t sum;
    int stack_fps; /* BLOCK_WRITE_STACK_FPS */
};

block_writer_t *block_writer_new(const char *path, int level, int flags, hr_err_t *err) {
    block_writer_t *w = calloc(1, sizeof *w);
    if (!w) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    w->fd = -1;
    w->stack_fps = (flags & BLOCK_WRITE_STACK_FPS) != 0;
    w->z.level = level;
    if (!(w->z.cctx = ZSTD_createCCtx())) {
        free(w);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    w->sum = (block_summary_t){.min_time = INT64_MAX, .max_time = INT64_MIN};
    buf_init(&w->out);
    buf_init(&w->parts);
    buf_init(&w->totals);
    buf_append(&w->out, MAGIC2, 8);
    buf_put_u32le(&w->out, 2);
    buf_put_u32le(&w->out, 0);
    if (!path) return w;
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", w->path);
    if ((w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        hr_fail(err, HR_EIO, "create %s: %s", w->tmp, strerror(errno));
        block_writer_free(w);
        return NULL;
    }
    return w;
}

void block_writer_free(block_writer_t *w) {
    if (!w) return;
    ZSTD_freeCCtx(w->z.cctx);
    if (w->fd >= 0) { /* never committed: no half-written block stays behind */
        close(w->fd);
        unlink(w->tmp);
    }
    for (size_t i = 0; i < w->nsums; i++) {
        free(w->sums[i].series);
        free(w->sums[i].total);
    }
    free(w->sums);
    for (size_t i = 0; i < w->nparts; i++) {
        free(w->parted[i].key);
        free(w->parted[i].series);
    }
    free(w->parted);
    free(w->rows);
    buf_free(&w->out);
    buf_free(&w->parts);
    buf_free(&w->totals);
    free(w);
}

/* Writes out what is pending (a file writer), keeping only the unwritten in memory. */
static int flush(block_writer_t *w, hr_err_t *err) {
    if (w->out.oom) return hr_fail(err, HR_ENOMEM, "out of memory");
    if (w->fd < 0) return 0;
    if (fs_write_all(w->fd, w->out.data, w->out.len, w->tmp, err)) return -1;
    w->flushed += w->out.len;
    w->out.len = 0;
    return 0;
}

/* 1 when row i of a and row j of b say the same (series, time, duration, total, counts). */
static int same_row(const segment_t *a, size_t i, const segment_t *b, size_t j) {
    const seg_profile_t *x = &a->profiles[i], *y = &b->profiles[j];
    return x->series == y->series && x->time_ns == y->time_ns && x->duration_ns == y->duration_ns &&
           x->total == y->total && x->nsamples == y->nsamples && x->nspans == y->nspans;
}

/* 1 when the partition just encoded (img, n bytes, as bp describes it) decodes to
 * p's rows, its series all listed, its pre-merged rows summing them. The rows were
 * written in `order` and a reader gets them back in the order written, so row k read
 * is row order[k] given: compared in place, without sorting either side. */
static int part_matches(const segment_t *p, const uint32_t *order, const uint8_t *img, const block_part_t *bp,
                        const functab_t *ft, sum_totals_t *sums, hr_err_t *err) {
    size_t n = (size_t)(bp->len - bp->funcs_len);
    segment_t *d = decode_part(img, n, bp, BLOCK_VIEW_ROWS | VIEW_VERIFY, NULL, err), *m = NULL, *f = NULL;
    int ok = d && d->nprofiles == (bp->summary ? 0 : p->nprofiles);
    for (size_t k = 0; ok && k < d->nprofiles; k++)
        ok = block_part_has(bp, d->profiles[k].series) && same_row(p, order[k], d, k);
    /* A summary's pre-merged rows must sum the rows it was made of (the source). They
     * are read as a cold query reads them, symbols deferred: the symbols and the
     * fingerprints were checked against each other by d's read, and this one checks
     * that the sections past the footer's SYMBOLS length read alone. */
    int defer = bp->stacks ? BLOCK_VIEW_DEFER_SYMBOLS : 0;
    size_t skip = defer ? (size_t)bp->syms_len : 0;
    if (ok && bp->merged)
        ok = (m = decode_part(img + skip, n - skip, bp, BLOCK_VIEW_MERGED | defer, NULL, err)) &&
             (bp->summary ? merged_matches(p, order, m) : merged_matches(d, NULL, m));
    if (ok && bp->summary && sums) ok = summary_totals(m, sums) == 0;
    if (ok && defer && !bp->merged) { /* no pre-merged rows read that way: the rows are */
        segment_t *lazy = decode_part(img + skip, n - skip, bp, BLOCK_VIEW_ROWS | defer, NULL, err);
        ok = lazy && lazy->nsamples == d->nsamples;
        segment_free(lazy);
    }
    if (ok && ft)
        ok = (f = decode_part(img + n, (size_t)bp->funcs_len, bp, BLOCK_VIEW_FUNCS, NULL, err)) &&
             functab_equal(ft, f->funcs);
    segment_free(f);
    segment_free(m);
    segment_free(d);
    return ok;
}

/* A block the reader refuses must never be written: a cut that writes it then
 * checkpoints the WAL, so the refused block would be the only copy of its data. */
static int refuse(hr_err_t *err, const hr_err_t *why) {
    if (why->code == HR_ENOMEM) return hr_fail(err, HR_ENOMEM, "out of memory verifying a block");
    return hr_fail(err, HR_EINTERNAL, "refusing to write a block that does not read back as written%s%s",
                   why->msg[0] ? ": " : "", why->msg);
}

/* The distinct series of p (rows in `order`), ascending, into bp. 0 or -1 (OOM). */
static int part_series(const segment_t *p, const uint32_t *order, block_part_t *bp) {
    if (!(bp->series = malloc((p->nprofiles ? p->nprofiles : 1) * sizeof *bp->series))) return -1;
    for (size_t i = 0; i < p->nprofiles; i++) {
        uint32_t sid = p->profiles[order[i]].series; /* order is by series first */
        if (!bp->nseries || bp->series[bp->nseries - 1] != sid) bp->series[bp->nseries++] = sid;
    }
    return 0;
}

/* One partition on its way into a block: encoded and checked by prepare_part, which
 * reads no writer state (so partitions can be prepared on two threads), then appended
 * in order by commit_part. The rows are p's, or (src set) rows[0..nrows) of src, which
 * prepare_part selects into a segment of their own (owned). */
typedef struct {
    const char *key;
    const segment_t *p, *src;
    const uint32_t *rows;
    size_t nrows;
    segment_t *owned;
    int summary;
    uint32_t *order;
    block_part_t bp;
    sum_totals_t st;
    buf_t img; /* the partition's bytes, as they will stand in the block */
    int rc;    /* 0, 1 (nothing to add: a summary whose sums could overflow) or -1 with err */
    hr_err_t err;
} part_job_t;

static void part_job_free(part_job_t *j) {
    free(j->order);
    free(j->bp.key);
    free(j->bp.series);
    free(j->st.series);
    free(j->st.total);
    buf_free(&j->img);
    segment_free(j->owned);
}

static int prepare_part(part_job_t *j, int stack_fps, const zenc_t *z) {
    hr_err_t *err = &j->err;
    if (j->src && !(j->p = j->owned = segment_select(j->src, j->rows, j->nrows, err))) return j->rc = -1;
    const segment_t *p = j->p;
    block_part_t *bp = &j->bp;
    int rc = 0, flags = 0;
    if (!(bp->key = strdup(j->key)) || segment_sorted_order(p, &j->order) || part_series(p, j->order, bp))
        rc = hr_fail(err, HR_ENOMEM, "out of memory");
    functab_t *ft = NULL;
    if (rc == 0)
        rc = encode_part(p, j->order, j->summary, stack_fps, z, &j->img, &flags, &ft, &bp->funcs_len, &bp->syms_len,
                         err);
    if (rc == 0 && j->summary && !(flags & PART_MERGED)) rc = 1; /* sums that could overflow: no summary */
    if (rc == 0) {
        bp->len = j->img.len;
        bp->merged = (flags & PART_MERGED) != 0, bp->spans = (flags & PART_SPANS) != 0;
        bp->units = (flags & PART_UNITS) != 0, bp->summary = j->summary, bp->traces = (flags & PART_TRACES) != 0;
        bp->stacks = (flags & PART_STACKS) != 0, bp->names = (flags & PART_NAMES) != 0;
        bp->nprofiles = j->summary ? 0 : p->nprofiles, bp->nsamples = j->summary ? 0 : p->nsamples;
        bp->min_time = p->min_time, bp->max_time = p->max_time;
        hr_err_t why = {0};
        if (!part_matches(p, j->order, j->img.data, bp, ft, j->summary ? &j->st : NULL, &why)) rc = refuse(err, &why);
    }
    functab_free(ft);
    return j->rc = rc;
}

static int commit_part(block_writer_t *w, part_job_t *j, hr_err_t *err) {
    if (j->rc < 0) {
        *err = j->err;
        return -1;
    }
    if (j->rc == 1) return 0;
    const segment_t *p = j->p;
    if (VEC_RESERVE(w->parted, w->parts_cap, w->nparts + 1) ||
        VEC_RESERVE(w->rows, w->rows_cap, w->nrows + p->nprofiles) || VEC_RESERVE(w->sums, w->sums_cap, w->nsums + 1))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    j->bp.off = w->flushed + w->out.len;
    buf_append(&w->out, j->img.data, j->img.len);
    if (w->out.oom) return hr_fail(err, HR_ENOMEM, "out of memory");
    footer_part(&w->parts, &j->bp);
    if (!j->summary) {
        footer_rows(&w->totals, p, j->order, &w->prev_series, &w->prev_t);
        rows_of(p, j->order, w->rows, &w->nrows);
        w->sum.profiles += p->nprofiles, w->sum.samples += p->nsamples;
    } else {
        j->st.part = w->nparts;
        w->sums[w->nsums++] = j->st, j->st.series = NULL, j->st.total = NULL;
    }
    w->parted[w->nparts++] = j->bp, j->bp.key = NULL, j->bp.series = NULL;
    if (p->min_time < w->sum.min_time) w->sum.min_time = p->min_time;
    if (p->max_time > w->sum.max_time) w->sum.max_time = p->max_time;
    return flush(w, err);
}

/* Adds p as a partition of key, or (summary) its pre-merged rows alone. */
static int add_part(block_writer_t *w, const char *key, const segment_t *p, int summary, hr_err_t *err) {
    if (!p->nprofiles) return 0;
    part_job_t j = {.key = key, .p = p, .summary = summary};
    buf_init(&j.img);
    prepare_part(&j, w->stack_fps, &w->z);
    int rc = commit_part(w, &j, err);
    part_job_free(&j);
    return rc;
}

int block_writer_add(block_writer_t *w, const char *key, const segment_t *p, hr_err_t *err) {
    return add_part(w, key, p, 0, err);
}

int block_writer_add_summary(block_writer_t *w, const char *key, const segment_t *p, hr_err_t *err) {
    return add_part(w, key, p, 1, err);
}

uint64_t block_writer_bytes(const block_writer_t *w) { return w->flushed + w->out.len; }

/* 1 when a parsed footer entry says what the writer wrote. */
static int same_part(const block_part_t *a, const block_part_t *b) {
    return !strcmp(a->key, b->key) && a->off == b->off && a->len == b->len && a->merged == b->merged &&
           a->spans == b->spans && a->nprofiles == b->nprofiles && a->nsamples == b->nsamples &&
           a->min_time == b->min_time && a->max_time == b->max_time && a->nseries == b->nseries &&
           a->funcs_len == b->funcs_len && a->summary == b->summary && a->traces == b->traces &&
           a->stacks == b->stacks && a->syms_len == b->syms_len &&
           (!a->nseries || !memcmp(a->series, b->series, a->nseries * sizeof *a->series));
}

/* 1 when the footer at out[at..] (file offset foff), parsed as a reader would,
 * lists the partitions written and holds every row's total. */
static int footer_matches(block_writer_t *w, size_t at, uint64_t foff, hr_err_t *err) {
    const uint8_t *tail = w->out.data + w->out.len - TAIL_BYTES;
    if (tail_footer(tail, foff + (w->out.len - at)) != foff) return hr_fail(err, HR_EUNPROC, "block: bad tail"), 0;
    block_index_t *ix = parse_footer(w->out.data + at, w->out.len - at - TAIL_BYTES, foff, err);
    row_t *c = ix ? malloc((w->nrows ? w->nrows : 1) * sizeof *c) : NULL;
    if (ix && !c) hr_fail(err, HR_ENOMEM, "out of memory");
    int ok = c && ix->nparts == w->nparts && ix->totals->nprofiles == w->nrows;
    for (size_t i = 0; ok && i < w->nparts; i++) ok = same_part(&ix->parts[i], &w->parted[i]);
    size_t nc = 0;
    if (ok) rows_of(ix->totals, NULL, c, &nc);
    /* Written partition after partition, each in its sorted order, and read back so. */
    ok = ok && nc == w->nrows && (nc == 0 || !memcmp(w->rows, c, nc * sizeof *c));
    int sm = 1;
    for (size_t i = 0; ok && sm == 1 && i < w->nsums; i++) sm = summary_matches(ix, &w->sums[i]);
    if (sm < 0) hr_fail(err, HR_ENOMEM, "out of memory");
    if (sm == 0) hr_fail(err, HR_EUNPROC, "block: a summary does not sum the rows it stands for");
    ok = ok && sm == 1;
    free(c);
    block_index_free(ix);
    return ok;
}

int block_writer_commit(block_writer_t *w, block_summary_t *sum, buf_t *image, hr_err_t *err) {
    size_t at = w->out.len;
    uint64_t foff = w->flushed + at;
    if (put_footer(&w->out, foff, w->nparts, &w->parts, w->nrows, &w->totals, &w->z, err)) return -1;
    hr_err_t why = {0};
    if (!footer_matches(w, at, foff, &why)) return refuse(err, &why);
    if (flush(w, err)) return -1;
    w->sum.bytes = w->flushed + w->out.len; /* a file writer has flushed it all */
    if (w->fd >= 0) {
        int fd = w->fd;
        w->fd = -1; /* fs_commit_tmp closes it, and removes tmp should it fail */
        if (fs_commit_tmp(fd, w->tmp, w->path, err)) return -1;
    } else if (image) {
        buf_append(image, w->out.data, w->out.len);
        if (image->oom) return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (sum) *sum = w->sum;
    return 0;
}

/* A second thread that prepares every other partition of add_by_key while the
 * writer's thread prepares the one before it: partitions are independent until
 * appended, so a cut takes about half the time where a core is free. They go in
 * pairs, so no more than two are in memory at once. */
typedef struct {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    part_job_t *job; /* handed over and not yet prepared; NULL when idle */
    int quit, stack_fps;
    zenc_t z;
} helper_t;

static void *helper_main(void *arg) {
    helper_t *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->job && !h->quit) pthread_cond_wait(&h->cv, &h->mu);
        if (!h->job) break;
        part_job_t *j = h->job;
        pthread_mutex_unlock(&h->mu);
        prepare_part(j, h->stack_fps, &h->z);
        pthread_mutex_lock(&h->mu);
        h->job = NULL;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* A started helper for w, or NULL (one core, or no memory or thread for it): the
 * partitions are then all prepared on the caller's thread. */
static helper_t *helper_start(const block_writer_t *w) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return NULL;
    helper_t *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->stack_fps = w->stack_fps, h->z.level = w->z.level;
    if (!(h->z.cctx = ZSTD_createCCtx())) return free(h), NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->tid, NULL, helper_main, h)) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        ZSTD_freeCCtx(h->z.cctx);
        return free(h), NULL;
    }
    return h;
}

static void helper_stop(helper_t *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->quit = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->tid, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    ZSTD_freeCCtx(h->z.cctx);
    free(h);
}

/* Prepares a and b, b on the helper when there is one. */
static void prepare_pair(block_writer_t *w, helper_t *h, part_job_t *a, part_job_t *b) {
    if (h) {
        pthread_mutex_lock(&h->mu);
        h->job = b;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    prepare_part(a, w->stack_fps, &w->z);
    if (!h) {
        prepare_part(b, w->stack_fps, &w->z);
        return;
    }
    pthread_mutex_lock(&h->mu);
    while (h->job) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

/* Deals s's rows (order: series runs, each in time order; part_of: each run's
 * partition) into rows, partition by partition, by a counting sort: the first pass
 * counts each partition's rows, the second places them. Afterwards partition p's rows
 * are rows[start[p]..start[p + 1]); start has nparts + 2 zeroed slots. */
static void deal_rows(const segment_t *s, const uint32_t *order, const uint32_t *part_of, size_t nparts, size_t *start,
                      uint32_t *rows) {
    for (int place = 0; place < 2; place++) {
        for (size_t i = 0, run = 0; i < s->nprofiles; i++) {
            if (i && s->profiles[order[i]].series != s->profiles[order[i - 1]].series) run++;
            if (place) rows[start[part_of[run] + 1]++] = order[i]; /* start[p + 1]: p's next row */
            else start[part_of[run] + 2]++;
        }
        for (size_t p = 0; !place && p < nparts; p++) start[p + 2] += start[p + 1];
    }
}

/* Adds every row of s to w, one partition per key, each with only its symbols. The
 * rows are dealt into their partitions in one pass (a counting sort by partition that
 * keeps each partition's rows in series-then-time order). */
static int add_by_key(block_writer_t *w, const segment_t *s, block_key_fn key, void *kctx, hr_err_t *err) {
    uint32_t *order;
    size_t nsk = 0, nparts = 0;
    if (segment_sorted_order(s, &order)) return hr_fail(err, HR_ENOMEM, "out of memory");
    series_key_t *sk = series_keys(s, order, key, kctx, &nsk);
    uint32_t *rows = malloc((s->nprofiles ? s->nprofiles : 1) * sizeof *rows);
    uint32_t *part_of = malloc((nsk ? nsk : 1) * sizeof *part_of); /* by run */
    size_t *start = calloc(nsk + 2, sizeof *start), *first = malloc((nsk + 1) * sizeof *first);
    int rc = sk && rows && part_of && start && first ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t k = 0; rc == 0 && k < nsk; k++) {
        if (k && strcmp(sk[k].key, sk[k - 1].key)) nparts++;
        if (k == 0 || strcmp(sk[k].key, sk[k - 1].key)) first[nparts] = k;
        part_of[sk[k].run] = (uint32_t)nparts;
    }
    if (nsk) nparts++;
    if (rc == 0) deal_rows(s, order, part_of, nparts, start, rows);
    helper_t *h = rc == 0 && nparts > 1 ? helper_start(w) : NULL;
    for (size_t p = 0; rc == 0 && p < nparts; p += 2) { /* start[p]..start[p + 1]: p's rows */
        part_job_t job[2] = {{0}};
        for (size_t k = 0; k < 2 && p + k < nparts; k++) {
            job[k] = (part_job_t){.key = sk[first[p + k]].key,
                                  .src = s,
                                  .rows = rows + start[p + k],
                                  .nrows = start[p + k + 1] - start[p + k]};
            buf_init(&job[k].img);
        }
        if (p + 1 < nparts) prepare_pair(w, h, &job[0], &job[1]);
        else prepare_part(&job[0], w->stack_fps, &w->z);
        for (size_t k = 0; k < 2 && p + k < nparts; k++) {
            if (rc == 0) rc = commit_part(w, &job[k], err);
            part_job_free(&job[k]);
        }
    }
    helper_stop(h);
    free(order);
    free(sk);
    free(rows);
    free(part_of);
    free(start);
    free(first);
    if (rc == 0 && w->sum.profiles != s->nprofiles) /* every row landed in one partition */
        rc = hr_fail(err, HR_EINTERNAL, "refusing to write a block that lost rows while partitioning");
    return rc;
}

int block_encode(const segment_t *s, block_key_fn key, void *kctx, int level, buf_t *out, hr_err_t *err) {
    block_writer_t *w = block_writer_new(NULL, level, BLOCK_WRITE_STACK_FPS, err);
    int rc = w && add_by_key(w, s, key, kctx, err) == 0 ? block_writer_commit(w, NULL, out, err) : -1;
    block_writer_free(w);
    return rc;
}

int block_write(const char *path, const segment_t *s, block_key_fn key, void *kctx, int level, size_t *bytes,
                hr_err_t *err) {
    block_summary_t sum;
    block_writer_t *w = block_writer_new(path, level, BLOCK_WRITE_STACK_FPS, err);
    int rc = w && add_by_key(w, s, key, kctx, err) == 0 ? block_writer_commit(w, &sum, NULL, err) : -1;
    block_writer_free(w);
    if (rc == 0 && bytes) *bytes = (size_t)sum.bytes;
    return rc;
}

segment_t *block_read(const char *path, hr_err_t *err) {
    uint8_t *data;
    size_t n;
    if (fs_read_file(path, (size_t)16 << 30, &data, &n, err)) return NULL;
    segment_t *s = block_decode(data, n, err);
    free(data);
    return s;
}

/* Reads n bytes at off of src into a new buffer. */
static uint8_t *read_range(const block_src_t *src, uint64_t off, uint64_t n, hr_err_t *err) {
    uint8_t *b = malloc(n ? (size_t)n : 1);
    if (!b) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    if (n && src->read(src->ctx, src->name, off, n, b, err)) return free(b), NULL;
    return b;
}

/* block_src_t's read for files: name is the path. */
static int file_read(void *ctx, const char *path, uint64_t off, uint64_t n, uint8_t *out, hr_err_t *err) {
    (void)ctx;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hr_fail(err, errno == ENOENT ? HR_ENOTFOUND : HR_EIO, "open %s: %s", path, strerror(errno));
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, out + got, (size_t)(n - got), (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            close(fd);
            return hr_fail(err, k < 0 ? HR_EIO : HR_EUNPROC, "read %s: %s", path,
                           k < 0 ? strerror(errno) : "short file");
        }
        got += (size_t)k;
    }
    close(fd);
    return 0;
}

int block_src_file(block_src_t *src, const char *path, hr_err_t *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return hr_fail(err, errno == ENOENT ? HR_ENOTFOUND : HR_EIO, "stat %s: %s", path, strerror(errno));
    *src = (block_src_t){.name = path, .size = (uint64_t)st.st_size, .read = file_read, .ctx = NULL};
    return 0;
}

/* A version-1 file is one partition of every series, with no footer totals. */
static block_index_t *index_v1(uint64_t size, hr_err_t *err) {
    block_index_t *ix = calloc(1, sizeof *ix);
    if (!ix || !(ix->parts = calloc(1, sizeof *ix->parts)) || !(ix->parts[0].key = strdup(""))) {
        block_index_free(ix);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    ix->version = 1;
    ix->nparts = 1;
    ix->parts[0] = (block_part_t){.key = ix->parts[0].key, .len = size, .min_time = INT64_MIN, .max_time = INT64_MAX};
    return ix;
}

/* How much of a block's end one read takes: the tail and, mostly, the whole footer, so
 * opening a block costs one read (one round trip to an object store), not three. */
#define INDEX_READ_AHEAD ((uint64_t)64 << 10)

/* A version-1 file has no tail: told by its header. */
static block_index_t *index_by_header(const block_src_t *src, hr_err_t *err) {
    uint8_t head[HEADER_BYTES];
    if (src->size < HEADER_BYTES || src->read(src->ctx, src->name, 0, HEADER_BYTES, head, err)) {
        if (src->size < HEADER_BYTES) hr_fail(err, HR_EUNPROC, "block %s: not a Hearth block (too short)", src->name);
        return NULL;
    }
    int v = header_version(head, HEADER_BYTES);
    if (v == 1) return index_v1(src->size, err);
    return hr_fail(err, HR_EUNPROC, "block %s: not a Hearth block (bad magic, version or tail)", src->name), NULL;
}

block_index_t *block_index_read_src(const block_src_t *src, hr_err_t *err) {
    uint64_t size = src->size;
    if (size < HEADER_BYTES + TAIL_BYTES) return index_by_header(src, err);
    uint64_t chunk = size - HEADER_BYTES < INDEX_READ_AHEAD ? size - HEADER_BYTES : INDEX_READ_AHEAD;
    uint64_t at = size - chunk; /* the chunk is [at, size) */
    uint8_t *t = read_range(src, at, chunk, err);
    if (!t) return NULL;
    uint64_t foff = tail_footer(t + chunk - TAIL_BYTES, size);
    if (!foff) {
        free(t);
        return index_by_header(src, err);
    }
    block_index_t *ix = NULL;
    size_t flen = (size_t)(size - TAIL_BYTES - foff);
    if (foff >= at) {
        ix = parse_footer(t + (foff - at), flen, foff, err);
    } else {
        uint8_t *f = read_range(src, foff, flen, err);
        if (f) ix = parse_footer(f, flen, foff, err);
        free(f);
    }
    free(t);
    return ix;
}

block_index_t *block_index_read(const char *path, hr_err_t *err) {
    block_src_t src;
    return block_src_file(&src, path, err) ? NULL : block_index_read_src(&src, err);
}

segment_t *block_read_part_src(const block_src_t *src, const block_index_t *ix, size_t p, int view,
                               const block_window_t *win, hr_err_t *err) {
    const block_part_t *bp = ix->version == 1 ? NULL : &ix->parts[p];
    uint64_t off = 0, len = src->size;
    if (bp) block_part_range(bp, view, &off, &len);
    uint8_t *b = read_range(src, off, len, err);
    if (!b) return NULL;
    segment_t *s = bp ? decode_part(b, (size_t)len, bp, view, win, err) : block_decode(b, (size_t)src->size, err);
    free(b);
    return s;
}

segment_t *block_read_part(const char *path, const block_index_t *ix, size_t p, int view, hr_err_t *err) {
    block_src_t src;
    return block_src_file(&src, path, err) ? NULL : block_read_part_src(&src, ix, p, view, NULL, err);
}
