/* pprof_census.c - what unpacking a pprof would allocate, read from the wire alone.
 *
 * protobuf-c unpacks a profile into one struct per sample, location, line, label
 * and string, each its own allocation, so memory follows the element counts, not
 * the byte size: 2M small samples are ~20 MB of protobuf but ~300 MB unpacked. The
 * census walks the message without allocating, counting elements (packed repeated
 * fields element by element), so a profile over --max-samples or over the decode
 * budget is refused before anything is built. */
#include <string.h>

#include "common/buf.h"
#include "ingest/pprof.h"
#include "wire/profile.pb-c.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* Skips one field's value; 0, or -1 on a malformed or unsupported wire type. */
static int skip_value(buf_reader_t *r, uint32_t wt) {
    size_t n;
    switch (wt) {
    case WT_VARINT: buf_get_uvarint(r); break;
    case WT_I64: buf_get_raw(r, 8); break;
    case WT_I32: buf_get_raw(r, 4); break;
    case WT_LEN: buf_get_bytes(r, &n); break;
    default: return -1;
    }
    return r->bad ? -1 : 0;
}

/* Number of values of a repeated varint field: 1 unpacked, or one per varint of a
 * packed run (each ends with a byte under 0x80). */
static size_t varint_count(buf_reader_t *r, uint32_t wt) {
    if (wt == WT_VARINT) return buf_get_uvarint(r), 1;
    size_t n, k = 0;
    const uint8_t *p = buf_get_bytes(r, &n);
    for (size_t i = 0; p && i < n; i++) k += p[i] < 0x80;
    return k;
}

typedef int (*field_fn)(pprof_census_t *c, uint32_t field, uint32_t wt, buf_reader_t *r);

static int walk(const uint8_t *p, size_t n, pprof_census_t *c, field_fn fn) {
    buf_reader_t r;
    buf_reader_init(&r, p, n);
    while (buf_reader_left(&r) && !r.bad) {
        uint64_t key = buf_get_uvarint(&r);
        uint32_t field = (uint32_t)(key >> 3), wt = (uint32_t)(key & 7);
        if (r.bad || field == 0 || fn(c, field, wt, &r)) return -1;
    }
    return r.bad ? -1 : 0;
}

static int sample_field(pprof_census_t *c, uint32_t field, uint32_t wt, buf_reader_t *r) {
    if ((field == 1 || field == 2) && (wt == WT_VARINT || wt == WT_LEN)) {
        size_t k = varint_count(r, wt);
        *(field == 1 ? &c->location_ids : &c->values) += k;
        return r->bad ? -1 : 0;
    }
    if (field == 3) c->labels++;
    return skip_value(r, wt);
}

static int location_field(pprof_census_t *c, uint32_t field, uint32_t wt, buf_reader_t *r) {
    if (field == 4) c->lines++;
    return skip_value(r, wt);
}

/* Calls fn over the fields of the length-delimited value at r. */
static int walk_nested(buf_reader_t *r, uint32_t wt, pprof_census_t *c, field_fn fn) {
    if (wt != WT_LEN) return -1;
    size_t n;
    const uint8_t *p = buf_get_bytes(r, &n);
    return p ? walk(p, n, c, fn) : -1;
}

static int profile_field(pprof_census_t *c, uint32_t field, uint32_t wt, buf_reader_t *r) {
    switch (field) {
    case 2: c->samples++; return walk_nested(r, wt, c, sample_field);
    case 3: c->mappings++; break;
    case 4: c->locations++; return walk_nested(r, wt, c, location_field);
    case 5: c->functions++; break;
    case 6: {
        size_t n;
        if (wt != WT_LEN || !buf_get_bytes(r, &n)) return -1;
        c->strings++;
        c->string_bytes += n;
        return 0;
    }
    }
    return skip_value(r, wt);
}

int pprof_census(const uint8_t *p, size_t n, pprof_census_t *c, hr_err_t *err) {
    memset(c, 0, sizeof *c);
    if (walk(p, n, c, profile_field))
        return hr_fail(err, HR_EUNPROC,
                       "not a pprof profile: the body does not parse as profile.proto "
                       "(gzipped or plain protobuf expected)");
    /* Per element: its struct, the pointer to it, and an allocation's overhead (16 B);
     * the batch then holds a stack id and a value per sample value. */
    enum { OVH = 16 + sizeof(void *) };
    c->bytes = c->samples * (sizeof(Perftools__Profiles__Sample) + OVH + 2 * 16) + (c->location_ids + c->values) * 8 +
               c->labels * (sizeof(Perftools__Profiles__Label) + OVH) +
               c->locations * (sizeof(Perftools__Profiles__Location) + OVH + 16) +
               c->lines * (sizeof(Perftools__Profiles__Line) + OVH) +
               c->functions * (sizeof(Perftools__Profiles__Function) + OVH) +
               c->mappings * (sizeof(Perftools__Profiles__Mapping) + OVH) + c->strings * (OVH + 1) + c->string_bytes +
               c->values * 16 + n;
    return 0;
}
