/* buf.c - see buf.h. */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf_t *b) { memset(b, 0, sizeof *b); }

void buf_free(buf_t *b) {
    free(b->data);
    buf_init(b);
}

int buf_reserve(buf_t *b, size_t n) {
    if (b->oom) return -1;
    if (b->cap - b->len >= n) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void buf_append(buf_t *b, const void *p, size_t n) {
    if (n == 0 || buf_reserve(b, n) != 0) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void buf_putc(buf_t *b, uint8_t c) {
    if (buf_reserve(b, 1) != 0) return;
    b->data[b->len++] = c;
}

void buf_printf(buf_t *b, const char *fmt, ...) {
    if (b->oom) return;
    /* Straight into the spare room; formatted again only when it did not fit. */
    size_t room = b->cap - b->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? (char *)b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= room) {
        if (buf_reserve(b, (size_t)n + 1) != 0) return;
        va_start(ap, fmt);
        vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void buf_put_i64(buf_t *b, int64_t v) {
    char tmp[20];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do tmp[n++] = (char)('0' + u % 10);
    while (u /= 10);
    if (buf_reserve(b, n + 1) != 0) return;
    if (v < 0) b->data[b->len++] = '-';
    while (n) b->data[b->len++] = (uint8_t)tmp[--n];
}

void buf_put_u32le(buf_t *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_append(b, x, 4);
}

void buf_put_u64le(buf_t *b, uint64_t v) {
    buf_put_u32le(b, (uint32_t)v);
    buf_put_u32le(b, (uint32_t)(v >> 32));
}

void buf_put_bytes(buf_t *b, const void *p, size_t n) {
    buf_put_uvarint(b, n);
    buf_append(b, p, n);
}

uint8_t *buf_steal(buf_t *b, size_t *len) {
    uint8_t *d = b->data;
    if (len) *len = b->len;
    buf_init(b);
    return d;
}

void buf_reader_init(buf_reader_t *r, const void *p, size_t n) {
    r->p = p;
    r->end = p ? r->p + n : r->p; /* NULL + 0 is undefined behaviour in C */
    r->bad = 0;
}

size_t buf_reader_left(const buf_reader_t *r) { return (size_t)(r->end - r->p); }

uint64_t buf_get_uvarint_slow(buf_reader_t *r) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return v;
    }
    r->bad = 1;
    r->p = r->end;
    return 0;
}

const uint8_t *buf_get_raw(buf_reader_t *r, size_t n) {
    if (r->bad || buf_reader_left(r) < n) {
        r->bad = 1;
        r->p = r->end;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

uint32_t buf_get_u32le(buf_reader_t *r) {
    const uint8_t *x = buf_get_raw(r, 4);
    if (!x) return 0;
    return (uint32_t)x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
}

uint64_t buf_get_u64le(buf_reader_t *r) {
    uint64_t lo = buf_get_u32le(r);
    return lo | (uint64_t)buf_get_u32le(r) << 32;
}

const uint8_t *buf_get_bytes(buf_reader_t *r, size_t *n) {
    uint64_t len = buf_get_uvarint(r);
    if (r->bad || len > buf_reader_left(r)) {
        r->bad = 1;
        r->p = r->end;
        *n = 0;
        return NULL;
    }
    *n = (size_t)len;
    return buf_get_raw(r, (size_t)len);
}
