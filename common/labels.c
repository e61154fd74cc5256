/* labels.c - see labels.h. */
#include "common/labels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

void labels_init(labels_t *l) { memset(l, 0, sizeof *l); }

void labels_destroy(labels_t *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    labels_init(l);
}

/* Index of name, or the insertion point (negated minus one) when absent. */
static long find(const labels_t *l, const char *name) {
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(l->v[mid].name, name);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -(long)lo - 1;
}

int labels_set(labels_t *l, const char *name, const char *value) {
    long i = find(l, name);
    char *v = strdup(value);
    if (!v) return -1;
    if (i >= 0) {
        free(l->v[i].value);
        l->v[i].value = v;
        return 0;
    }
    char *n = strdup(name);
    if (!n || VEC_RESERVE(l->v, l->cap, l->n + 1)) {
        free(n);
        free(v);
        return -1;
    }
    size_t at = (size_t)(-i - 1);
    memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof *l->v);
    l->v[at] = (label_t){n, v};
    l->n++;
    return 0;
}

void labels_del(labels_t *l, const char *name) {
    long i = find(l, name);
    if (i < 0) return;
    free(l->v[i].name);
    free(l->v[i].value);
    memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof *l->v);
    l->n--;
}

const char *labels_get(const labels_t *l, const char *name) {
    long i = find(l, name);
    return i >= 0 ? l->v[i].value : NULL;
}

void labels_intersect(labels_t *a, const labels_t *b) {
    size_t w = 0;
    for (size_t i = 0; i < a->n; i++) {
        const char *v = labels_get(b, a->v[i].name);
        if (v && !strcmp(v, a->v[i].value)) {
            a->v[w++] = a->v[i];
            continue;
        }
        free(a->v[i].name);
        free(a->v[i].value);
    }
    a->n = w;
}

int labels_equal(const labels_t *a, const labels_t *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) /* both sorted: equal sets are equal position by position */
        if (strcmp(a->v[i].name, b->v[i].name) || strcmp(a->v[i].value, b->v[i].value)) return 0;
    return 1;
}

int labels_copy(labels_t *dst, const labels_t *src) {
    for (size_t i = 0; i < src->n; i++)
        if (labels_set(dst, src->v[i].name, src->v[i].value)) return -1;
    return 0;
}

void labels_key(const labels_t *l, buf_t *out) {
    for (size_t i = 0; i < l->n; i++) {
        buf_append(out, l->v[i].name, strlen(l->v[i].name));
        buf_putc(out, 1);
        buf_append(out, l->v[i].value, strlen(l->v[i].value));
        buf_putc(out, 2);
    }
}

int label_name_valid(const char *s) {
    if (!*s) return 0;
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '.'))
            return 0;
    return 1;
}

int utf8_valid(const char *str, size_t n) {
    const uint8_t *s = (const uint8_t *)str, *e = s + n;
    while (s < e) {
        uint8_t c = *s;
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            s++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else return 0;
        if ((size_t)(e - s) < len) return 0;
        for (size_t i = 1; i < len; i++) {
            if ((s[i] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        s += len;
    }
    return 1;
}

int tenant_id_valid(const char *t) {
    size_t n = strlen(t);
    if (n == 0 || n > 128 || t[0] == '.') return 0;
    for (; *t; t++)
        if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') || *t == '-' ||
              *t == '_' || *t == '.'))
            return 0;
    return 1;
}
