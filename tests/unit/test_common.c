/* test_common.c - varints, time parsing, JSON escaping, arenas, the u64 map, id sorting. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/hash.h"
#include "common/jsonw.h"
#include "common/sort.h"
#include "common/timeparse.h"
#include "tests/unit/unit.h"

void test_varint_roundtrip(void) {
    static const int64_t vals[] = {0, 1, -1, 63, -64, 64, 127, 128, 300, -300, INT64_MAX, INT64_MIN, 1LL << 40};
    buf_t b;
    buf_init(&b);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        buf_put_svarint(&b, vals[i]);
        buf_put_uvarint(&b, (uint64_t)vals[i]);
    }
    buf_put_bytes(&b, "abc", 3);
    buf_reader_t r;
    buf_reader_init(&r, b.data, b.len);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        CHECK_INT(buf_get_svarint(&r), vals[i]);
        CHECK(buf_get_uvarint(&r) == (uint64_t)vals[i]);
    }
    size_t n;
    const uint8_t *s = buf_get_bytes(&r, &n);
    CHECK(n == 3 && !memcmp(s, "abc", 3));
    CHECK(!r.bad && buf_reader_left(&r) == 0);
    buf_get_uvarint(&r); /* reading past the end marks the reader bad */
    CHECK(r.bad);
    buf_free(&b);
}

/* buf_put_i64 writes what %lld writes; buf_printf formats past the buffer's room. */
void test_buf_decimal(void) {
    static const int64_t vals[] = {0, 1, -1, 9, 10, -10, 99, 100, 123456789, -987654321, INT64_MAX, INT64_MIN};
    buf_t a, b;
    buf_init(&a), buf_init(&b);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        buf_put_i64(&a, vals[i]);
        buf_putc(&a, ',');
        buf_printf(&b, "%lld,", (long long)vals[i]);
    }
    for (int i = 0; i < 300; i++) buf_printf(&a, "%s", "0123456789"), buf_append(&b, "0123456789", 10);
    buf_putc(&a, 0), buf_putc(&b, 0);
    CHECK(!a.oom && !b.oom);
    CHECK_STR((const char *)a.data, (const char *)b.data);
    buf_free(&a), buf_free(&b);
}

void test_timeparse(void) {
    int64_t now = 1700000000LL * 1000000000, t;
    CHECK(time_parse("1700000000", now, &t) == 0 && t == now);
    CHECK(time_parse("1700000000000", now, &t) == 0 && t == now);
    CHECK(time_parse("1700000000000000", now, &t) == 0 && t == now);
    CHECK(time_parse("1700000000000000000", now, &t) == 0 && t == now);
    CHECK(time_parse("now", now, &t) == 0 && t == now);
    CHECK(time_parse("now-1h", now, &t) == 0 && t == now - 3600LL * 1000000000);
    CHECK(time_parse("now-30s", now, &t) == 0 && t == now - 30LL * 1000000000);
    CHECK(time_parse("2023-11-14T22:13:20Z", now, &t) == 0 && t == now);
    CHECK(time_parse("2023-11-14T23:13:20+01:00", now, &t) == 0 && t == now);
    CHECK(time_parse("2023-11-14T22:13:20.5Z", now, &t) == 0 && t == now + 500000000);
    CHECK(time_parse("20231114", now, &t) == 0 && t == 1699920000LL * 1000000000);
    CHECK(time_parse("yesterday", now, &t) == -1);
    CHECK(time_parse("now-1x", now, &t) == -1);
    CHECK(time_parse("", now, &t) == -1);
    int64_t d;
    CHECK(duration_parse("7d", &d) == 0 && d == 7 * 86400LL * 1000000000);
    CHECK(duration_parse("250ms", &d) == 0 && d == 250000000);
    CHECK(duration_parse("-1s", &d) == -1);
    CHECK(duration_parse("1h30m", &d) == 0 && d == 5400LL * 1000000000);
    CHECK(duration_parse("1.5s", &d) == 0 && d == 1500000000);
    CHECK(duration_parse("7", &d) == -1); /* a bare number has no unit */
    CHECK(duration_parse("7dd", &d) == -1);
    CHECK(duration_parse("10s5", &d) == -1);
}

void test_jsonw(void) {
    buf_t b;
    buf_init(&b);
    jsonw_str(&b, "a\"b\\c\n\x01é");
    buf_putc(&b, 0);
    CHECK_STR((const char *)b.data, "\"a\\\"b\\\\c\\n\\u0001é\"");
    buf_free(&b);
}

/* The arena hands out zeroed, aligned memory from chunks, gives a large allocation a chunk
 * of its own without losing the chunk being filled, and frees it all at once (ASan and
 * valgrind check the last part). */
void test_arena_zeroed_aligned_and_large(void) {
    arena_t *a = arena_new();
    CHECK(a != NULL);
    if (!a) return;
    unsigned char *first = arena_alloc(a, 3);
    int zero = 1, aligned = 1;
    for (size_t i = 0; i < 5000; i++) {
        size_t n = 1 + (i * 37) % 300;
        unsigned char *p = arena_alloc(a, n);
        CHECK(p != NULL);
        if (!p) break;
        for (size_t j = 0; j < n; j++) zero &= p[j] == 0;
        aligned &= (uintptr_t)p % _Alignof(max_align_t) == 0;
        memset(p, 0xab, n);
    }
    CHECK(zero);
    CHECK(aligned);
    unsigned char *big = arena_alloc(a, 3u << 20); /* past any chunk */
    CHECK(big != NULL && big[0] == 0 && big[(3u << 20) - 1] == 0);
    char *s = arena_strdup(a, "checkout");
    CHECK_STR(s, "checkout");
    CHECK(first[0] == 0 && first[2] == 0); /* no later allocation overlapped it */
    CHECK(!arena_oom(a));
    arena_free(a);
}

/* The map keeps every key, 0 and UINT64_MAX among them, through growth; a put of a
 * key present returns its value, not a new one; absent keys read NULL. */
void test_u64map_any_key(void) {
    u64map_t m;
    u64map_init(&m);
    CHECK(!u64map_get(&m, 0) && !u64map_get(&m, UINT64_MAX));
    int added = 0, ok = 1;
    for (uint64_t k = 0; k < 5000 && ok; k++) {
        uint64_t key = k * 0x10001 + (k & 1 ? UINT64_MAX - 20000 * 0x10001 : 0);
        uint64_t *v = u64map_put(&m, key, &added);
        ok = v && added;
        if (v) *v = k;
    }
    CHECK(ok);
    uint64_t *top = u64map_put(&m, UINT64_MAX, &added);
    CHECK(top && added);
    if (top) *top = 77;
    CHECK(u64map_put(&m, UINT64_MAX, &added) == top && !added);
    for (uint64_t k = 0; k < 5000 && ok; k++) {
        uint64_t key = k * 0x10001 + (k & 1 ? UINT64_MAX - 20000 * 0x10001 : 0);
        const uint64_t *v = u64map_get(&m, key);
        ok = v && *v == k;
    }
    CHECK(ok);
    CHECK(u64map_get(&m, 3) == NULL && u64map_get(&m, UINT64_MAX) && *u64map_get(&m, UINT64_MAX) == 77);
    CHECK_INT(u64map_count(&m), 5001);
    uint64_t *zero = u64map_put(&m, 0, &added);
    CHECK(zero && !added && *zero == 0);
    u64map_free(&m);
    CHECK(!u64map_get(&m, 0) && u64map_count(&m) == 0);
}

/* sort_u32 against qsort: sizes around the radix cut-off, ids sharing high bytes (the
 * skipped passes), full-range ids, duplicates. */
static int cmp_u32_test(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void test_sort_u32(void) {
    static const size_t sizes[] = {0, 1, 2, 63, 64, 65, 1000, 70000};
    static const uint32_t masks[] = {0xff, 0xffff, 0xffffff, 0xffffffff, 0x00ff00ff};
    uint64_t x = 88172645463325252ULL; /* xorshift: fixed, so a failure repeats */
    int ok = 1;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t mi = 0; mi < sizeof masks / sizeof *masks; mi++) {
            size_t n = sizes[si];
            uint32_t *v = malloc((n ? n : 1) * sizeof *v), *w = malloc((n ? n : 1) * sizeof *w);
            CHECK(v && w);
            if (!v || !w) return;
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                v[i] = w[i] = (uint32_t)x & masks[mi];
            }
            sort_u32(v, n);
            qsort(w, n, sizeof *w, cmp_u32_test);
            for (size_t i = 0; i < n && ok; i++) ok = v[i] == w[i];
            free(v);
            free(w);
        }
    sort_u32(NULL, 0); /* an empty set (no ids touched) may come as NULL */
    CHECK(ok);
}
