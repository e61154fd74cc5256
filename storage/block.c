/* block.c - see block.h. */
#include "storage/block.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "storage/fsutil.h"

enum { SEC_META = 1, SEC_SYMBOLS = 2, SEC_PROFILES = 3, SEC_SAMPLES = 4, NSECTIONS = 4 };
static const char MAGIC[8] = {'H', 'R', 'T', 'H', 'B', 'L', 'K', '1'};
#define MAX_SECTION_RAW ((uint64_t)4 << 30)

static int put_section(buf_t *out, uint32_t kind, const buf_t *raw, int level, hr_err_t *err) {
    size_t bound = ZSTD_compressBound(raw->len);
    buf_put_u32le(out, kind);
    buf_put_u64le(out, raw->len);
    size_t hdr = out->len;
    buf_put_u64le(out, 0);
    buf_put_u32le(out, 0);
    if (buf_reserve(out, bound) != 0) return hr_fail(err, HR_ENOMEM, "out of memory");
    size_t c = ZSTD_compress(out->data + out->len, bound, raw->data, raw->len, level);
    if (ZSTD_isError(c)) return hr_fail(err, HR_EINTERNAL, "zstd: %s", ZSTD_getErrorName(c));
    uint32_t crc = (uint32_t)crc32(0, out->data + out->len, (uInt)c);
    uint8_t *h = out->data + hdr;
    for (int i = 0; i < 8; i++) h[i] = (uint8_t)((uint64_t)c >> (8 * i));
    for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(crc >> (8 * i));
    out->len += c;
    return 0;
}

static void encode_profiles(const segment_t *s, const uint32_t *order, buf_t *b) {
    uint32_t prev_series = 0;
    for (size_t i = 0; i < s->nprofiles; i++) {
        uint32_t series = s->profiles[order[i]].series;
        buf_put_uvarint(b, series - prev_series);
        prev_series = series;
    }
    prev_series = UINT32_MAX;
    int64_t prev_t = 0;
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        if (p->series != prev_series) prev_t = s->min_time; /* time restarts per series */
        buf_put_svarint(b, p->time_ns - prev_t);
        prev_t = p->time_ns;
        prev_series = p->series;
    }
    for (size_t i = 0; i < s->nprofiles; i++) buf_put_svarint(b, s->profiles[order[i]].duration_ns);
    for (size_t i = 0; i < s->nprofiles; i++) buf_put_uvarint(b, s->profiles[order[i]].nsamples);
}

static void encode_samples(const segment_t *s, const uint32_t *order, buf_t *b) {
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        uint32_t prev = 0; /* stacks are sorted within a profile */
        for (uint32_t j = 0; j < p->nsamples; j++) {
            buf_put_uvarint(b, s->stacks[p->first + j] - prev);
            prev = s->stacks[p->first + j];
        }
    }
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *p = &s->profiles[order[i]];
        for (uint32_t j = 0; j < p->nsamples; j++) buf_put_svarint(b, s->values[p->first + j]);
    }
}

int block_encode(const segment_t *s, int level, buf_t *out, hr_err_t *err) {
    uint32_t *order;
    if (segment_sorted_order(s, &order)) return hr_fail(err, HR_ENOMEM, "out of memory");
    buf_t sec[NSECTIONS];
    for (int i = 0; i < NSECTIONS; i++) buf_init(&sec[i]);
    buf_put_uvarint(&sec[0], s->nprofiles);
    buf_put_uvarint(&sec[0], s->nsamples);
    buf_put_svarint(&sec[0], s->nprofiles ? s->min_time : 0);
    buf_put_svarint(&sec[0], s->nprofiles ? s->max_time : 0);
    symtab_encode(s->sym, &sec[1]);
    encode_profiles(s, order, &sec[2]);
    encode_samples(s, order, &sec[3]);
    free(order);
    int rc = 0;
    buf_append(out, MAGIC, 8);
    buf_put_u32le(out, BLOCK_VERSION);
    buf_put_u32le(out, NSECTIONS);
    for (int i = 0; i < NSECTIONS && rc == 0; i++) {
        if (sec[i].oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else rc = put_section(out, (uint32_t)(SEC_META + i), &sec[i], level, err);
    }
    for (int i = 0; i < NSECTIONS; i++) buf_free(&sec[i]);
    if (rc == 0 && out->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    return rc;
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
    size_t d = ZSTD_decompress(*raw, (size_t)rl, p, (size_t)sl);
    if (ZSTD_isError(d) || d != rl) {
        free(*raw);
        *raw = NULL;
        return hr_fail(err, HR_EUNPROC, "block: section %u does not decompress", want);
    }
    *rawlen = (size_t)rl;
    return 0;
}

static int decode_rows(segment_t *s, const uint8_t *p, size_t n, uint64_t np, int64_t min_t,
                       hr_err_t *err) {
    if (np > n) return hr_fail(err, HR_EUNPROC, "block: profile count exceeds data");
    s->profiles = calloc(np ? np : 1, sizeof *s->profiles);
    if (!s->profiles) return hr_fail(err, HR_ENOMEM, "out of memory");
    s->profiles_cap = s->nprofiles = (size_t)np;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    uint64_t series = 0;
    for (uint64_t i = 0; i < np; i++) {
        series += buf_get_uvarint(&r);
        if (series >= UINT32_MAX) return hr_fail(err, HR_EUNPROC, "block: bad series id");
        s->profiles[i].series = (uint32_t)series;
    }
    int64_t t = 0;
    for (uint64_t i = 0; i < np; i++) {
        if (i == 0 || s->profiles[i].series != s->profiles[i - 1].series) t = min_t;
        t += buf_get_svarint(&r);
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
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad profile columns");
    s->nsamples = (size_t)first;
    return 0;
}

static int decode_samples(segment_t *s, const uint8_t *p, size_t n, hr_err_t *err) {
    if (s->nsamples > n) return hr_fail(err, HR_EUNPROC, "block: sample count exceeds data");
    size_t ns = s->nsamples ? s->nsamples : 1;
    s->stacks = malloc(ns * sizeof *s->stacks);
    s->values = malloc(ns * sizeof *s->values);
    if (!s->stacks || !s->values) return hr_fail(err, HR_ENOMEM, "out of memory");
    s->samples_cap = ns;
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    for (size_t i = 0; i < s->nprofiles; i++) {
        seg_profile_t *row = &s->profiles[i];
        uint64_t st = 0;
        for (uint32_t j = 0; j < row->nsamples; j++) {
            uint64_t d = buf_get_uvarint(&r);
            /* Strictly ascending within a profile (segment_add sums equal stacks); only the
             * first may be 0, the empty stack of a sample without locations. */
            if (d == 0 && j > 0) return hr_fail(err, HR_EUNPROC, "block: stack ids out of order");
            st += d;
            if (st >= s->sym->nstacks) return hr_fail(err, HR_EUNPROC, "block: bad stack id");
            s->stacks[row->first + j] = (uint32_t)st;
        }
    }
    for (size_t i = 0; i < s->nprofiles; i++) {
        seg_profile_t *row = &s->profiles[i];
        row->total = 0;
        for (uint32_t j = 0; j < row->nsamples; j++) {
            int64_t v = buf_get_svarint(&r);
            s->values[row->first + j] = v;
            row->total += v;
        }
    }
    if (r.bad || buf_reader_left(&r)) return hr_fail(err, HR_EUNPROC, "block: bad sample columns");
    return 0;
}

segment_t *block_decode(const uint8_t *p, size_t n, hr_err_t *err) {
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    const uint8_t *m = buf_get_raw(&r, 8);
    uint32_t version = buf_get_u32le(&r), nsec = buf_get_u32le(&r);
    if (r.bad || memcmp(m, MAGIC, 8) != 0) {
        hr_fail(err, HR_EUNPROC, "block: not a Hearth block (bad magic)");
        return NULL;
    }
    if (version != BLOCK_VERSION || nsec != NSECTIONS) {
        hr_fail(err, HR_EUNPROC, "block: unsupported version %u", version);
        return NULL;
    }
    uint8_t *raw[NSECTIONS] = {0};
    size_t rawlen[NSECTIONS] = {0};
    segment_t *s = NULL;
    for (int i = 0; i < NSECTIONS; i++)
        if (get_section(&r, (uint32_t)(SEC_META + i), &raw[i], &rawlen[i], err)) goto fail;
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
    if (decode_rows(s, raw[2], rawlen[2], np, min_t, err)) goto fail;
    if (s->nsamples != nsm) {
        hr_fail(err, HR_EUNPROC, "block: sample count mismatch");
        goto fail;
    }
    if (decode_samples(s, raw[3], rawlen[3], err)) goto fail;
    s->min_time = np ? min_t : INT64_MAX;
    s->max_time = np ? max_t : INT64_MIN;
    for (int i = 0; i < NSECTIONS; i++) free(raw[i]);
    return s;
fail:
    for (int i = 0; i < NSECTIONS; i++) free(raw[i]);
    segment_free(s);
    return NULL;
}

/* 1 when decoded row i of d is row order[i] of s, samples and all, and the symbol
 * tables have the same sizes. */
static int same_segment(const segment_t *s, const uint32_t *order, const segment_t *d) {
    const symtab_t *a = s->sym, *b = d->sym;
    if (d->nprofiles != s->nprofiles || d->nsamples != s->nsamples || a->nstrings != b->nstrings ||
        a->nfunctions != b->nfunctions || a->nmappings != b->nmappings || a->nlocations != b->nlocations ||
        a->nstacks != b->nstacks)
        return 0;
    for (size_t i = 0; i < s->nprofiles; i++) {
        const seg_profile_t *p = &s->profiles[order[i]], *q = &d->profiles[i];
        if (p->series != q->series || p->time_ns != q->time_ns || p->duration_ns != q->duration_ns ||
            p->nsamples != q->nsamples || p->total != q->total ||
            memcmp(s->stacks + p->first, d->stacks + q->first, p->nsamples * sizeof *s->stacks) ||
            memcmp(s->values + p->first, d->values + q->first, p->nsamples * sizeof *s->values))
            return 0;
    }
    return 1;
}

/* Decodes the image just encoded and compares it with its source. A block the reader
 * refuses must never be written: the cut that writes it then checkpoints the WAL, so
 * the refused block would be the only copy of its data. */
static int verify_image(const segment_t *s, const buf_t *img, hr_err_t *err) {
    hr_err_t derr = {0};
    segment_t *d = block_decode(img->data, img->len, &derr);
    uint32_t *order = NULL;
    int rc = 0;
    if (!d) rc = hr_fail(err, HR_EINTERNAL, "refusing to write a block its reader refuses (%s)", derr.msg);
    else if (segment_sorted_order(s, &order)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    else if (!same_segment(s, order, d)) rc = hr_fail(err, HR_EINTERNAL, "refusing to write a block that decodes differently");
    free(order);
    segment_free(d);
    return rc;
}

int block_write(const char *path, const segment_t *s, int level, size_t *bytes, hr_err_t *err) {
    buf_t b;
    buf_init(&b);
    if (block_encode(s, level, &b, err) || verify_image(s, &b, err)) {
        buf_free(&b);
        return -1;
    }
    int rc = fs_write_atomic(path, b.data, b.len, err);
    if (bytes) *bytes = b.len;
    buf_free(&b);
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
