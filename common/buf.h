/* buf.h - a growable byte buffer and the varint codecs built on it.
 *
 * Every on-disk encoding (WAL records, block columns, symbol tables) is written into
 * a buf_t and read back through a buf_reader_t, so bounds checks live in one place:
 * a reader that runs past its end sets `bad` and returns zeros from then on, and the
 * caller checks `bad` once at the end instead of after every field. */
#ifndef HEARTH_BUF_H
#define HEARTH_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
    int oom; /* set when an allocation failed; later appends are no-ops */
} buf_t;

void buf_init(buf_t *b);
void buf_free(buf_t *b);
/* Ensures room for n more bytes; returns 0, or -1 (and sets oom) on failure. */
int buf_reserve(buf_t *b, size_t n);
void buf_append(buf_t *b, const void *p, size_t n);
void buf_putc(buf_t *b, uint8_t c);
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in decimal, as printf's %lld writes it (answers print many numbers: no format parsing). */
void buf_put_i64(buf_t *b, int64_t v);
/* Inline with a room check, as the readers below: a block's columns are written as
 * millions of these, and a call into buf_reserve for each showed in a cut's profile. */
static inline void buf_put_uvarint(buf_t *b, uint64_t v) {
    if (b->oom || (b->cap - b->len < 10 && buf_reserve(b, 10) != 0)) return;
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}
static inline void buf_put_svarint(buf_t *b, int64_t v) { /* zigzag */
    buf_put_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
void buf_put_u32le(buf_t *b, uint32_t v);
void buf_put_u64le(buf_t *b, uint64_t v);
/* A length-prefixed byte string. */
void buf_put_bytes(buf_t *b, const void *p, size_t n);
/* Hands the bytes to the caller (who frees them) and leaves b empty. */
uint8_t *buf_steal(buf_t *b, size_t *len);

typedef struct {
    const uint8_t *p, *end;
    int bad;
} buf_reader_t;

void buf_reader_init(buf_reader_t *r, const void *p, size_t n);
/* Reads a varint; a truncated or over-long one sets r->bad, empties r and reads 0. */
uint64_t buf_get_uvarint_slow(buf_reader_t *r);
/* Inline for the one-byte case, which most of a block's columns are (small deltas
 * and counts): decoding a cold fleet query's partitions is mostly these calls. */
static inline uint64_t buf_get_uvarint(buf_reader_t *r) {
    if (r->p < r->end && *r->p < 0x80) return *r->p++;
    return buf_get_uvarint_slow(r);
}
static inline int64_t buf_get_svarint(buf_reader_t *r) {
    uint64_t u = buf_get_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}
uint32_t buf_get_u32le(buf_reader_t *r);
uint64_t buf_get_u64le(buf_reader_t *r);
/* The little-endian u64 at p, which the caller checked is in bounds (bulk reads of a
 * buf_get_raw span). */
static inline uint64_t buf_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}
/* Returns a pointer into the reader's memory (borrowed) and its length. */
const uint8_t *buf_get_bytes(buf_reader_t *r, size_t *n);
const uint8_t *buf_get_raw(buf_reader_t *r, size_t n);
size_t buf_reader_left(const buf_reader_t *r);

/* The greatest common divisor of g and |v| (g when v is 0): a column's value unit, by
 * which its values are stored divided so their varints stay small. */
static inline uint64_t buf_gcd(uint64_t g, int64_t v) {
    uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
    if (g && a % g == 0) return g; /* the common case (a multiple of the period): one division */
    while (a) {
        uint64_t t = g % a;
        g = a, a = t;
    }
    return g;
}

#endif
