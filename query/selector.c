/* selector.c - see selector.h. */
#include "query/selector.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "common/vec.h"

typedef struct {
    const char *s, *p;
    hr_err_t *err;
} lexer_t;

static void skip_ws(lexer_t *l) {
    while (isspace((unsigned char)*l->p)) l->p++;
}

static int fail_at(lexer_t *l, const char *what) {
    return hr_fail(l->err, HR_EINVAL, "bad selector at offset %ld: %s (in `%s`)", (long)(l->p - l->s), what, l->s);
}

/* ---- string literals, decoded exactly as PromQL's lexer and strconv.Unquote ----
 *
 * "..." and '...' take Go's escapes; one PromQL does not know (`\d`, `\.`, the
 * other quote) is an error, as it is in Prometheus, so `=~"\d+"` is a 400 and not
 * a regex that silently means something else. `...` (backticks) is raw: no
 * escapes, carriage returns dropped, as Go does. */

typedef struct {
    char *v;
    size_t n, cap;
    int oom;
} strbuf_t;

static void sb_put(strbuf_t *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (b->n + n + 1 > cap) cap *= 2;
        char *t = realloc(b->v, cap);
        if (!t) {
            b->oom = 1;
            return;
        }
        b->v = t, b->cap = cap;
    }
    memcpy(b->v + b->n, p, n);
    b->n += n;
    b->v[b->n] = 0;
}

/* Appends code point c as UTF-8 (c is a valid scalar value). */
static void sb_rune(strbuf_t *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) u[0] = (char)c, n = 1;
    else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), n = 2;
    else if (c < 0x10000)
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 0x3F)), u[2] = (char)(0x80 | (c & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 0x3F)), u[2] = (char)(0x80 | (c >> 6 & 0x3F)),
        u[3] = (char)(0x80 | (c & 0x3F)), n = 4;
    sb_put(b, u, n);
}

static int digit_value(char c, int base) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : 99;
    return d < base ? d : -1;
}

/* The single-character escapes, as in Go. */
static const struct {
    char esc, out;
} SIMPLE_ESCAPES[] = {{'a', '\a'}, {'b', '\b'}, {'f', '\f'}, {'n', '\n'},
                      {'r', '\r'}, {'t', '\t'}, {'v', '\v'}, {'\\', '\\'}};

/* Numeric escapes: the letter, how many digits follow, their base, and whether
 * the value is a byte (\x, octal: a raw byte, as Go) or a code point (\u, \U). */
static const struct {
    char esc;
    int digits, base, is_rune;
} NUMERIC_ESCAPES[] = {{'x', 2, 16, 0}, {'u', 4, 16, 1}, {'U', 8, 16, 1}};

/* Decodes the escape after a backslash at l->p (inside a q-quoted string). */
static int read_escape(lexer_t *l, char q, strbuf_t *b) {
    char c = *l->p;
    if (!c) return fail_at(l, "escape sequence not terminated");
    for (size_t i = 0; i < sizeof SIMPLE_ESCAPES / sizeof *SIMPLE_ESCAPES; i++)
        if (c == SIMPLE_ESCAPES[i].esc) return l->p++, sb_put(b, &SIMPLE_ESCAPES[i].out, 1), 0;
    if (c == q) return l->p++, sb_put(b, &q, 1), 0;
    int digits = 3, base = 8, is_rune = 0; /* \NNN octal */
    if (c < '0' || c > '7') {
        size_t i = 0, n = sizeof NUMERIC_ESCAPES / sizeof *NUMERIC_ESCAPES;
        while (i < n && NUMERIC_ESCAPES[i].esc != c) i++;
        if (i == n)
            return fail_at(l, "unknown escape sequence (PromQL strings know \\a \\b \\f \\n \\r \\t \\v "
                              "\\\\ \\xNN \\NNN \\uNNNN \\UNNNNNNNN and the quote; write a regex's \\d as \\\\d)");
        digits = NUMERIC_ESCAPES[i].digits, base = NUMERIC_ESCAPES[i].base, is_rune = NUMERIC_ESCAPES[i].is_rune;
        l->p++;
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, l->p++) {
        int d = digit_value(*l->p, base);
        if (d < 0) return fail_at(l, *l->p ? "illegal character in escape sequence" : "escape sequence not terminated");
        v = v * (uint32_t)base + (uint32_t)d;
    }
    if ((is_rune && (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000))) || (!is_rune && v > 255))
        return fail_at(l, "escape sequence is an invalid Unicode code point");
    if (is_rune) sb_rune(b, v);
    else sb_put(b, &(char){(char)v}, 1);
    return 0;
}

/* A "..." '...' or `...` literal at l->p; malloc'd, NULL with l->err set. */
static char *read_quoted(lexer_t *l) {
    char q = *l->p++;
    strbuf_t b = {0};
    sb_put(&b, "", 0);
    while (*l->p && *l->p != q && !b.oom) {
        const char *run = l->p;
        if (q == '`') {
            if (*l->p++ != '\r') sb_put(&b, run, 1);
        } else if (*l->p == '\\') {
            l->p++;
            if (read_escape(l, q, &b)) return free(b.v), NULL;
        } else if (*l->p == '\n') {
            free(b.v);
            fail_at(l, "unterminated quoted string");
            return NULL;
        } else {
            sb_put(&b, l->p++, 1);
        }
    }
    if (b.oom) return free(b.v), hr_fail(l->err, HR_ENOMEM, "out of memory"), NULL;
    if (*l->p != q) {
        free(b.v);
        fail_at(l, "unterminated string");
        return NULL;
    }
    l->p++;
    return b.v;
}

static char *read_bare(lexer_t *l) {
    const char *b = l->p;
    while (*l->p && *l->p != ',' && *l->p != '}') l->p++;
    const char *e = l->p;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    return strndup(b, (size_t)(e - b));
}

static int add_matcher(selector_t *sel, char *name, char *value, match_op_t op, hr_err_t *err) {
    if (VEC_RESERVE(sel->m, sel->cap, sel->n + 1)) {
        free(name);
        free(value);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    matcher_t *m = &sel->m[sel->n++];
    memset(m, 0, sizeof *m);
    m->name = name;
    m->value = value;
    m->op = op;
    if (op == MATCH_RE || op == MATCH_NRE) {
        hr_err_t why = {0};
        if (!(m->re = hr_regex_compile(value, &why)))
            return hr_fail(err, why.code, "bad regular expression for label %s: %s", name, why.msg);
    }
    return 0;
}

static int parse_matcher(lexer_t *l, selector_t *sel) {
    skip_ws(l);
    const char *nb = l->p;
    while (isalnum((unsigned char)*l->p) || *l->p == '_' || *l->p == '.') l->p++;
    if (l->p == nb) return fail_at(l, "expected a label name");
    char *name = strndup(nb, (size_t)(l->p - nb));
    skip_ws(l);
    match_op_t op;
    if (!strncmp(l->p, "=~", 2)) op = MATCH_RE, l->p += 2;
    else if (!strncmp(l->p, "!~", 2)) op = MATCH_NRE, l->p += 2;
    else if (!strncmp(l->p, "!=", 2)) op = MATCH_NEQ, l->p += 2;
    else if (*l->p == '=') op = MATCH_EQ, l->p++;
    else {
        free(name);
        return fail_at(l, "expected one of = != =~ !~");
    }
    skip_ws(l);
    char *value = strchr("\"'`", *l->p) && *l->p ? read_quoted(l) : read_bare(l);
    if (!value || !name) {
        free(name);
        free(value);
        return l->err && l->err->code ? -1 : hr_fail(l->err, HR_ENOMEM, "out of memory");
    }
    return add_matcher(sel, name, value, op, l->err);
}

/* A legacy Pyroscope name `app.cpu`: service_name plus a short type name. The type
 * is the short name's usual id until catalog_resolve_type picks the one the app
 * actually stores (`app.cpu` is wall:cpu:... for the Node agent). */
static int legacy_type(selector_t *sel, const char *name, hr_err_t *err) {
    const char *dot = strrchr(name, '.');
    const char *type = dot ? ptype_short_default(dot + 1) : NULL;
    if (!type)
        return hr_fail(err, HR_EINVAL,
                       "unknown profile type `%s`: use a type id such as "
                       "process_cpu:cpu:nanoseconds:cpu:nanoseconds, or app.cpu (short names: cpu, "
                       "wall, itimer, alloc_objects, alloc_space, inuse_objects, inuse_space, heap, "
                       "goroutines, mutex_count, mutex_duration, block_count, block_duration)",
                       name);
    if (!(sel->short_type = strdup(dot + 1)) || (*type && !(sel->profile_type = strdup(type))))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return add_matcher(sel, strdup("service_name"), strndup(name, (size_t)(dot - name)), MATCH_EQ, err);
}

int selector_parse(const char *s, selector_t *sel, hr_err_t *err) {
    memset(sel, 0, sizeof *sel);
    if (!s) s = "";
    lexer_t l = {s, s, err};
    skip_ws(&l);
    const char *tb = l.p;
    while (*l.p && *l.p != '{' && !isspace((unsigned char)*l.p)) l.p++;
    if (l.p > tb) {
        char *t = strndup(tb, (size_t)(l.p - tb));
        if (!t) return hr_fail(err, HR_ENOMEM, "out of memory");
        ptype_parts_t parts;
        int rc = 0;
        if (strchr(t, ':')) {
            if (ptype_split(t, &parts))
                rc = hr_fail(err, HR_EINVAL,
                             "bad profile type `%s`: want "
                             "name:sample_type:sample_unit:period_type:period_unit",
                             t);
            else sel->profile_type = t, t = NULL;
        } else {
            rc = legacy_type(sel, t, err);
        }
        free(t);
        if (rc) return -1;
    }
    skip_ws(&l);
    if (!*l.p) return 0;
    if (*l.p != '{') return fail_at(&l, "expected '{'");
    l.p++;
    skip_ws(&l);
    while (*l.p != '}') {
        if (parse_matcher(&l, sel)) return -1;
        skip_ws(&l);
        if (*l.p == ',') {
            l.p++;
            skip_ws(&l);
            continue;
        }
        if (*l.p != '}') return fail_at(&l, "expected ',' or '}'");
    }
    l.p++;
    skip_ws(&l);
    if (*l.p) return fail_at(&l, "unexpected text after '}'");
    return 0;
}

int selector_add_eq(selector_t *sel, const char *name, const char *value, hr_err_t *err) {
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n), free(v);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    return add_matcher(sel, n, v, MATCH_EQ, err);
}

void selector_truncate(selector_t *sel, size_t n) {
    for (; sel->n > n; sel->n--) {
        matcher_t *m = &sel->m[sel->n - 1];
        hr_regex_free(m->re);
        free(m->name);
        free(m->value);
    }
}

void selector_destroy(selector_t *sel) {
    selector_truncate(sel, 0);
    free(sel->m);
    free(sel->profile_type);
    free(sel->short_type);
    memset(sel, 0, sizeof *sel);
}

static int match_one(const matcher_t *m, const char *v) {
    if (!v) v = ""; /* an absent label matches as the empty string, as in PromQL */
    switch (m->op) {
    case MATCH_EQ: return strcmp(v, m->value) == 0;
    case MATCH_NEQ: return strcmp(v, m->value) != 0;
    case MATCH_RE: return hr_regex_match(m->re, v, strlen(v));
    case MATCH_NRE: return !hr_regex_match(m->re, v, strlen(v));
    }
    return 0;
}

const char *selector_label(const char *ptype, const labels_t *labels, const char *name, char *buf, size_t n) {
    if (!strcmp(name, "__profile_type__")) return ptype;
    if (!strcmp(name, "__name__")) {
        snprintf(buf, n, "%.*s", (int)strcspn(ptype, ":"), ptype);
        return buf;
    }
    return labels ? labels_get(labels, name) : NULL;
}

int selector_matches(const selector_t *sel, const char *ptype, const labels_t *labels) {
    if (sel->profile_type && strcmp(sel->profile_type, ptype)) return 0;
    char buf[128];
    for (size_t i = 0; i < sel->n; i++)
        if (!match_one(&sel->m[i], selector_label(ptype, labels, sel->m[i].name, buf, sizeof buf))) return 0;
    return 1;
}
