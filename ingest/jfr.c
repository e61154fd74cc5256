/* jfr.c - see jfr.h.
 *
 * Chunk layout (JDK's jfr/internal/consumer/ChunkHeader): "FLR\0", u16 major, u16
 * minor, then big-endian i64 chunk size, constant pool offset, metadata offset,
 * start ns, duration ns, start ticks, ticks per second, and an i32 feature mask
 * (bit 0: compressed integers). Every event starts with its size and class id.
 * The metadata event holds a string table and an element tree whose `class`
 * elements list `field`s (name, class id, constantPool, dimension); constant pool
 * events chain by a relative offset. Integers are LEB128 (the 9th byte keeps 8
 * bits); strings are tagged (null, empty, pool reference, UTF-8, UTF-16 code
 * units, Latin-1). */
#include "ingest/jfr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/hash.h"
#include "common/vec.h"
#include "wire/gzip.h"
#include "wire/jfr_labels.pb-c.h"

#define HEADER_BYTES 68
#define MAX_DEPTH 32
#define DEFAULT_INTERVAL_NS 10000000LL

/* ---- reading ---- */

typedef struct {
    const uint8_t *p, *end;
    int bad;
    arena_t *ar; /* where UTF-16 strings are decoded to (the chunk's); NULL: they read as empty */
} rd_t;

static uint8_t rd_u8(rd_t *r) {
    if (r->p >= r->end) return r->bad = 1, 0;
    return *r->p++;
}

static uint64_t rd_var(rd_t *r) {
    uint64_t v = 0;
    for (int i = 0; i < 9; i++) {
        uint8_t c = rd_u8(r);
        if (i == 8) return v | (uint64_t)c << 56;
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (c < 0x80) break;
    }
    return v;
}

static void rd_skip(rd_t *r, size_t n) {
    if ((size_t)(r->end - r->p) < n) r->bad = 1, r->p = r->end;
    else r->p += n;
}

static int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return (int64_t)v;
}

typedef struct {
    const char *s; /* not NUL-terminated; NULL for a null or pooled string */
    size_t n;
} str_t;

/* n UTF-16 code units (each a varint) as UTF-8 in r's arena. The JDK writes its
 * metadata so (async-profiler writes UTF-8); a lone surrogate becomes U+FFFD. */
static str_t rd_utf16(rd_t *r, uint64_t n) {
    if (n > (uint64_t)(r->end - r->p)) return r->bad = 1, (str_t){NULL, 0}; /* a unit takes a byte at least */
    char *out = r->ar ? arena_alloc(r->ar, (size_t)n * 3 + 1) : NULL;
    size_t o = 0;
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        uint32_t c = (uint32_t)rd_var(r) & 0xffff;
        if (c >= 0xd800 && c < 0xdc00 && i + 1 < n) { /* a high surrogate: the low one follows */
            uint32_t lo = (uint32_t)rd_var(r) & 0xffff;
            i++;
            c = lo >= 0xdc00 && lo < 0xe000 ? 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00) : 0xfffd;
        } else if (c >= 0xd800 && c < 0xe000) {
            c = 0xfffd;
        }
        if (!out) continue;
        if (c < 0x80) out[o++] = (char)c;
        else if (c < 0x800) out[o++] = (char)(0xc0 | c >> 6), out[o++] = (char)(0x80 | (c & 0x3f));
        else if (c < 0x10000)
            out[o++] = (char)(0xe0 | c >> 12), out[o++] = (char)(0x80 | (c >> 6 & 0x3f)),
            out[o++] = (char)(0x80 | (c & 0x3f));
        else
            out[o++] = (char)(0xf0 | c >> 18), out[o++] = (char)(0x80 | (c >> 12 & 0x3f)),
            out[o++] = (char)(0x80 | (c >> 6 & 0x3f)), out[o++] = (char)(0x80 | (c & 0x3f));
    }
    return out ? (str_t){out, o} : (str_t){"", 0};
}

/* A tagged string. A pooled one (tag 2, a java.lang.String pool entry) reads as NULL. */
static str_t rd_str(rd_t *r) {
    str_t s = {NULL, 0};
    switch (rd_u8(r)) {
    case 0: break;
    case 1: s.s = ""; break;
    case 2: rd_var(r); break;
    case 3:
    case 5: {
        uint64_t n = rd_var(r);
        if (n > (uint64_t)(r->end - r->p)) return r->bad = 1, s;
        s.s = (const char *)r->p, s.n = (size_t)n;
        r->p += n;
        break;
    }
    case 4: s = rd_utf16(r, rd_var(r)); break;
    default: r->bad = 1;
    }
    return s;
}

/* ---- metadata ---- */

enum { K_STRUCT, K_VARINT, K_BYTE, K_FLOAT, K_DOUBLE, K_STRING };

typedef struct {
    char *name;
    uint64_t cls;
    size_t ci; /* index of cls in classes, resolved after parsing */
    int cp, array;
} jfield_t;

typedef struct {
    uint64_t id;
    char *name;
    int kind;
    jfield_t *f;
    size_t nf, fcap;
} jclass_t;

typedef struct {
    jclass_t *c;
    size_t n, cap;
    char **strs; /* the metadata string table */
    size_t nstrs;
} meta_t;

static char *dupn(str_t s) {
    char *d = malloc(s.n + 1);
    if (d) {
        if (s.n) memcpy(d, s.s, s.n);
        d[s.n] = 0;
    }
    return d;
}

static const char *attr(const meta_t *m, uint64_t i) { return i < m->nstrs && m->strs[i] ? m->strs[i] : ""; }

static int kind_of(const char *name) {
    static const struct {
        const char *name;
        int kind;
    } prims[] = {{"boolean", K_BYTE}, {"byte", K_BYTE},     {"char", K_VARINT},
                 {"short", K_VARINT}, {"int", K_VARINT},    {"long", K_VARINT},
                 {"float", K_FLOAT},  {"double", K_DOUBLE}, {"java.lang.String", K_STRING}};
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (!strcmp(prims[i].name, name)) return prims[i].kind;
    return K_STRUCT;
}

typedef struct {
    const char *k[8], *v[8];
    size_t n;
} attrs_t;

static const char *attr_get(const attrs_t *a, const char *key) {
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->k[i], key)) return a->v[i];
    return NULL;
}

/* Reads one element and its children; `cls` is the class a field belongs to. */
static int read_element(rd_t *r, meta_t *m, jclass_t *cls, int depth) {
    if (depth > MAX_DEPTH) return -1;
    const char *name = attr(m, rd_var(r));
    uint64_t na = rd_var(r);
    attrs_t a = {.n = 0};
    for (uint64_t i = 0; i < na && !r->bad; i++) {
        const char *k = attr(m, rd_var(r)), *v = attr(m, rd_var(r));
        if (a.n < 8) a.k[a.n] = k, a.v[a.n++] = v;
    }
    jclass_t *child_cls = NULL;
    if (!strcmp(name, "class") && attr_get(&a, "id") && attr_get(&a, "name")) {
        if (VEC_RESERVE(m->c, m->cap, m->n + 1)) return -1;
        jclass_t *c = &m->c[m->n++];
        memset(c, 0, sizeof *c);
        c->id = strtoull(attr_get(&a, "id"), NULL, 10);
        c->name = strdup(attr_get(&a, "name"));
        if (!c->name) return -1;
        c->kind = kind_of(c->name);
        child_cls = c;
    } else if (!strcmp(name, "field") && cls && attr_get(&a, "name") && attr_get(&a, "class")) {
        if (VEC_RESERVE(cls->f, cls->fcap, cls->nf + 1)) return -1;
        jfield_t *f = &cls->f[cls->nf++];
        const char *cp = attr_get(&a, "constantPool"), *dim = attr_get(&a, "dimension");
        *f = (jfield_t){strdup(attr_get(&a, "name")), strtoull(attr_get(&a, "class"), NULL, 10), 0,
                        cp && !strcmp(cp, "true"), dim && strcmp(dim, "0")};
        if (!f->name) return -1;
    }
    uint64_t nc = rd_var(r);
    for (uint64_t i = 0; i < nc && !r->bad; i++) {
        /* Pointers into m->c move when it grows: find the class again by position. */
        size_t ci = child_cls ? (size_t)(child_cls - m->c) : 0;
        if (read_element(r, m, child_cls ? &m->c[ci] : NULL, depth + 1)) return -1;
        if (child_cls) child_cls = &m->c[ci];
    }
    return r->bad ? -1 : 0;
}

static int cmp_class(const void *a, const void *b) {
    uint64_t x = ((const jclass_t *)a)->id, y = ((const jclass_t *)b)->id;
    return (x > y) - (x < y);
}

static size_t class_index(const meta_t *m, uint64_t id) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->c[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n && m->c[lo].id == id ? lo : SIZE_MAX;
}

static size_t class_named(const meta_t *m, const char *name) {
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->c[i].name, name)) return i;
    return SIZE_MAX;
}

static void meta_free(meta_t *m) {
    for (size_t i = 0; i < m->n; i++) {
        for (size_t k = 0; k < m->c[i].nf; k++) free(m->c[i].f[k].name);
        free(m->c[i].f);
        free(m->c[i].name);
    }
    free(m->c);
    for (size_t i = 0; i < m->nstrs; i++) free(m->strs[i]);
    free(m->strs);
    memset(m, 0, sizeof *m);
}

static int read_metadata(rd_t *r, meta_t *m) {
    rd_var(r), rd_var(r), rd_var(r), rd_var(r), rd_var(r); /* size, type, start, duration, id */
    uint64_t n = rd_var(r);
    if (r->bad || n > (uint64_t)(r->end - r->p)) return -1;
    m->strs = calloc(n + 1, sizeof *m->strs);
    if (!m->strs) return -1;
    for (m->nstrs = 0; m->nstrs < n && !r->bad; m->nstrs++) {
        str_t s = rd_str(r);
        if (s.s && !(m->strs[m->nstrs] = dupn(s))) return -1;
    }
    if (r->bad || read_element(r, m, NULL, 0)) return -1;
    if (m->n) qsort(m->c, m->n, sizeof *m->c, cmp_class);
    for (size_t i = 0; i < m->n; i++)
        for (size_t k = 0; k < m->c[i].nf; k++)
            if ((m->c[i].f[k].ci = class_index(m, m->c[i].f[k].cls)) == SIZE_MAX) return -1;
    return 0;
}

/* ---- values: parsed field by field, some fields captured ---- */

typedef struct {
    uint64_t i; /* integer, or constant pool index */
    str_t s;
    int set;
} val_t;

static void skip_value(rd_t *r, const meta_t *m, size_t ci, int depth);

static void skip_field(rd_t *r, const meta_t *m, const jfield_t *f, int depth) {
    uint64_t n = f->array ? rd_var(r) : 1;
    const jclass_t *c = &m->c[f->ci];
    /* Every element read below consumes input, so work stays linear in the input:
     * a struct without fields has nothing to read, and no count may exceed what is left. */
    if (!f->cp && c->kind == K_STRUCT && c->nf == 0) return;
    if (n > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return;
    }
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        if (f->cp) rd_var(r);
        else skip_value(r, m, f->ci, depth + 1);
    }
}

static void skip_value(rd_t *r, const meta_t *m, size_t ci, int depth) {
    const jclass_t *c = &m->c[ci];
    if (depth > MAX_DEPTH) {
        r->bad = 1;
        return;
    }
    switch (c->kind) {
    case K_VARINT: rd_var(r); return;
    case K_BYTE: rd_skip(r, 1); return;
    case K_FLOAT: rd_skip(r, 4); return;
    case K_DOUBLE: rd_skip(r, 8); return;
    case K_STRING: rd_str(r); return;
    }
    for (size_t k = 0; k < c->nf && !r->bad; k++) skip_field(r, m, &c->f[k], depth);
}

/* Reads a struct of class ci; fields named in want[0..nw) that are scalars, pool
 * references or strings land in out[] (unset otherwise). */
static void read_struct(rd_t *r, const meta_t *m, size_t ci, const char *const *want, size_t nw, val_t *out) {
    const jclass_t *c = &m->c[ci];
    memset(out, 0, nw * sizeof *out);
    for (size_t k = 0; k < c->nf && !r->bad; k++) {
        const jfield_t *f = &c->f[k];
        size_t w = 0;
        while (w < nw && strcmp(want[w], f->name)) w++;
        int kind = m->c[f->ci].kind;
        if (w == nw || f->array || (!f->cp && kind == K_STRUCT)) {
            skip_field(r, m, f, 0);
            continue;
        }
        out[w].set = 1;
        if (f->cp || kind == K_VARINT) out[w].i = rd_var(r);
        else if (kind == K_STRING) out[w].s = rd_str(r);
        else if (kind == K_BYTE) out[w].i = rd_u8(r);
        else skip_field(r, m, f, 0), out[w].set = 0;
    }
}

/* ---- constant pools ---- */

/* Pool indices -> positions (common/hash.h's u64map_t): UINT32_MAX when absent. */
static uint32_t map_get(const u64map_t *m, uint64_t k) {
    const uint64_t *v = u64map_get(m, k);
    return v ? (uint32_t)*v : UINT32_MAX;
}

static int map_put(u64map_t *m, uint64_t k, uint32_t v) {
    uint64_t *slot = u64map_put(m, k, NULL);
    if (!slot) return -1;
    *slot = v;
    return 0;
}

typedef struct {
    uint64_t method;
    int64_t line;
} frame_t;

/* A thread's state as samples name it (jdk.types.ThreadState): Pyroscope counts a
 * sampled thread as on CPU unless it sleeps, and a wall-clock sample as CPU too when
 * its thread runs. */
enum { T_OTHER, T_RUNNABLE, T_SLEEPING };

typedef struct {
    u64map_t sym, cls, meth, stack; /* pool index -> position below */
    str_t *syms;
    size_t nsyms, syms_cap;
    uint64_t *cls_name; /* class -> symbol index */
    size_t ncls, cls_cap;
    uint64_t (*meth_v)[2]; /* method -> {class index, name symbol index} */
    size_t nmeth, meth_cap;
    size_t *stack_first; /* stack -> first frame (frames[first .. next first)) */
    size_t nstacks, stacks_cap;
    frame_t *frames;
    size_t nframes, frames_cap;
    u64map_t state; /* thread state pool index -> T_* */
    arena_t *ar;    /* the chunk's decoded UTF-16 strings (rd_t.ar) */
} pools_t;

static void pools_free(pools_t *p) {
    u64map_free(&p->sym), u64map_free(&p->cls), u64map_free(&p->meth), u64map_free(&p->stack), u64map_free(&p->state);
    free(p->syms), free(p->cls_name), free(p->meth_v), free(p->stack_first), free(p->frames);
    arena_free(p->ar);
    memset(p, 0, sizeof *p);
}

typedef struct {
    size_t symbol, klass, method, stacktrace, frame, state; /* class indices, SIZE_MAX if absent */
} known_t;

static int read_stacktrace(rd_t *r, const meta_t *m, const known_t *kn, pools_t *p, uint64_t idx) {
    const jclass_t *c = &m->c[kn->stacktrace];
    if (VEC_RESERVE(p->stack_first, p->stacks_cap, p->nstacks + 2) || map_put(&p->stack, idx, (uint32_t)p->nstacks))
        return -1;
    p->stack_first[p->nstacks++] = p->nframes;
    for (size_t k = 0; k < c->nf && !r->bad; k++) {
        const jfield_t *f = &c->f[k];
        if (strcmp(f->name, "frames") || !f->array || f->cp || f->ci != kn->frame) {
            skip_field(r, m, f, 0);
            continue;
        }
        uint64_t n = rd_var(r);
        if (n > (uint64_t)(r->end - r->p) || m->c[kn->frame].nf == 0) return -1; /* see skip_field */
        static const char *const want[] = {"method", "lineNumber"};
        for (uint64_t i = 0; i < n && !r->bad; i++) {
            val_t v[2];
            read_struct(r, m, kn->frame, want, 2, v);
            if (VEC_RESERVE(p->frames, p->frames_cap, p->nframes + 1)) return -1;
            p->frames[p->nframes++] = (frame_t){v[0].i, (int64_t)(int32_t)(uint32_t)v[1].i};
        }
    }
    p->stack_first[p->nstacks] = p->nframes; /* the sentinel the next stack overwrites */
    return 0;
}

static int read_pool_entry(rd_t *r, const meta_t *m, const known_t *kn, pools_t *p, size_t ci, uint64_t idx) {
    val_t v[2];
    if (ci == kn->symbol) {
        static const char *const want[] = {"string"};
        read_struct(r, m, ci, want, 1, v);
        if (VEC_RESERVE(p->syms, p->syms_cap, p->nsyms + 1) || map_put(&p->sym, idx, (uint32_t)p->nsyms)) return -1;
        p->syms[p->nsyms++] = v[0].s.s ? v[0].s : (str_t){"", 0};
    } else if (ci == kn->klass) {
        static const char *const want[] = {"name"};
        read_struct(r, m, ci, want, 1, v);
        if (VEC_RESERVE(p->cls_name, p->cls_cap, p->ncls + 1) || map_put(&p->cls, idx, (uint32_t)p->ncls)) return -1;
        p->cls_name[p->ncls++] = v[0].set ? v[0].i : UINT64_MAX;
    } else if (ci == kn->method) {
        static const char *const want[] = {"type", "name"};
        read_struct(r, m, ci, want, 2, v);
        if (VEC_RESERVE(p->meth_v, p->meth_cap, p->nmeth + 1) || map_put(&p->meth, idx, (uint32_t)p->nmeth)) return -1;
        p->meth_v[p->nmeth][0] = v[0].set ? v[0].i : UINT64_MAX;
        p->meth_v[p->nmeth++][1] = v[1].set ? v[1].i : UINT64_MAX;
    } else if (ci == kn->stacktrace) {
        return read_stacktrace(r, m, kn, p, idx);
    } else if (ci == kn->state) {
        static const char *const want[] = {"name"};
        read_struct(r, m, ci, want, 1, v);
        str_t n = v[0].s;
        uint32_t t = n.s && n.n == 14 && !memcmp(n.s, "STATE_RUNNABLE", 14)   ? T_RUNNABLE
                     : n.s && n.n == 14 && !memcmp(n.s, "STATE_SLEEPING", 14) ? T_SLEEPING
                                                                              : T_OTHER;
        if (map_put(&p->state, idx, t)) return -1;
    } else {
        skip_value(r, m, ci, 0);
    }
    return 0;
}

/* Reads the chain of constant pool events starting at off (chunk-relative). */
static int read_pools(const uint8_t *chunk, size_t size, int64_t off, const meta_t *m, const known_t *kn, pools_t *p) {
    for (int guard = 0; guard < 100000; guard++) {
        if (off < HEADER_BYTES || (uint64_t)off >= size) return -1;
        rd_t r = {chunk + off, chunk + size, 0, p->ar};
        rd_var(&r), rd_var(&r), rd_var(&r), rd_var(&r); /* size, type, start, duration */
        int64_t delta = (int64_t)rd_var(&r);
        rd_u8(&r); /* flush */
        uint64_t npools = rd_var(&r);
        for (uint64_t i = 0; i < npools && !r.bad; i++) {
            size_t ci = class_index(m, rd_var(&r));
            uint64_t n = rd_var(&r);
            if (ci == SIZE_MAX) return -1;
            for (uint64_t k = 0; k < n && !r.bad; k++)
                if (read_pool_entry(&r, m, kn, p, ci, rd_var(&r))) return -1;
        }
        if (r.bad) return -1;
        if (delta == 0) return 0;
        if (delta < -off || delta >= (int64_t)size - off) return -1; /* outside the chunk */
        off += delta;
    }
    return -1;
}

/* ---- stacks into the batch symtab ---- */

static int digit_at(const char *s, size_t n, size_t i) { return i < n && s[i] >= '0' && s[i] <= '9'; }

/* Appends s to out, with lambda and generated-accessor numbers replaced by `_`. */
static void normalize(buf_t *out, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (n - i >= 9 && !memcmp(s + i, "$$Lambda$", 9) && digit_at(s, n, i + 9)) {
            buf_append(out, "$$Lambda_", 9);
            i += 9;
            while (digit_at(s, n, i)) i++;
            if (i + 2 < n && (s[i] == '/' || s[i] == '.') && s[i + 1] == '0' && s[i + 2] == 'x') {
                i += 3;
                while (i < n && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) i++;
            }
            continue;
        }
        if (n - i >= 8 && !memcmp(s + i, "Accessor", 8) && digit_at(s, n, i + 8)) {
            buf_append(out, "Accessor_", 9);
            i += 8;
            while (digit_at(s, n, i)) i++;
            continue;
        }
        buf_putc(out, (uint8_t)s[i++]);
    }
}

typedef struct {
    batch_t *b;
    pools_t *p;
    u64map_t done; /* JFR stack index -> symtab stack id */
    buf_t name;
} stacks_t;

static str_t symbol(const pools_t *p, uint64_t idx) {
    uint32_t i = idx == UINT64_MAX ? UINT32_MAX : map_get(&p->sym, idx);
    return i == UINT32_MAX ? (str_t){"", 0} : p->syms[i];
}

static uint32_t frame_location(stacks_t *s, const frame_t *f) {
    const pools_t *p = s->p;
    uint32_t mi = map_get(&p->meth, f->method);
    str_t cls = {"", 0}, meth = {"unknown", 7};
    if (mi != UINT32_MAX) {
        uint32_t ci = p->meth_v[mi][0] == UINT64_MAX ? UINT32_MAX : map_get(&p->cls, p->meth_v[mi][0]);
        if (ci != UINT32_MAX) cls = symbol(p, p->cls_name[ci]);
        meth = symbol(p, p->meth_v[mi][1]);
    }
    s->name.len = 0;
    normalize(&s->name, cls.s, cls.n);
    buf_putc(&s->name, '.');
    buf_append(&s->name, meth.s, meth.n);
    if (s->name.oom) return SYM_NONE;
    symtab_t *t = s->b->sym;
    uint32_t name = symtab_string(t, (const char *)s->name.data, s->name.len);
    if (name == SYM_NONE) return SYM_NONE;
    sym_function_t fn = {name, name, 0, 0};
    sym_line_t line = {symtab_function(t, &fn), f->line > 0 ? f->line : 0};
    if (line.function == SYM_NONE) return SYM_NONE;
    return symtab_location(t, 0, 0, &line, 1);
}

/* The symtab stack of a JFR stack trace (frames[0] is the leaf); 0 if unknown. */
static uint32_t stack_of(stacks_t *s, uint64_t idx) {
    uint32_t have = map_get(&s->done, idx);
    if (have != UINT32_MAX) return have;
    uint32_t si = map_get(&s->p->stack, idx), stack = 0;
    if (si != UINT32_MAX) {
        for (size_t i = s->p->stack_first[si + 1]; i > s->p->stack_first[si] && stack != SYM_NONE; i--) {
            uint32_t loc = frame_location(s, &s->p->frames[i - 1]);
            stack = loc == SYM_NONE ? SYM_NONE : symtab_stack(s->b->sym, stack, loc);
        }
    }
    if (stack == SYM_NONE || map_put(&s->done, idx, stack)) return SYM_NONE;
    return stack;
}

/* ---- events ---- */

enum {
    P_CPU,
    P_TLAB_OBJ,
    P_TLAB_BYTES,
    P_OUT_OBJ,
    P_OUT_BYTES,
    P_LOCK_COUNT,
    P_LOCK_NS,
    P_PARK_COUNT,
    P_PARK_NS,
    P_WALL,
    P_COUNT
};

/* As Pyroscope's JFR converter names them: a thread entering a contended monitor is
 * a mutex contention, a parked thread (LockSupport.park: j.u.c locks, queues) is
 * blocked, like Go's block profile. */
static const char *const TYPES[P_COUNT] = {
    "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    "memory:alloc_in_new_tlab_objects:count:space:bytes",
    "memory:alloc_in_new_tlab_bytes:bytes:space:bytes",
    "memory:alloc_outside_tlab_objects:count:space:bytes",
    "memory:alloc_outside_tlab_bytes:bytes:space:bytes",
    "mutex:contentions:count:mutex:count",
    "mutex:delay:nanoseconds:mutex:count",
    "block:contentions:count:block:count",
    "block:delay:nanoseconds:block:count",
    "wall:wall:nanoseconds:wall:nanoseconds",
};

/* ---- context labels (the upload's LabelsSnapshot) ---- */

/* One context id's series: the base labels plus the context's, and its profiles. */
typedef struct {
    int64_t id;
    labels_t labels;
    batch_profile_t *prof[P_COUNT]; /* created on first use */
} jctx_t;

typedef struct {
    int64_t key;
    const char *value;
} jstr_t;

static int cmp_ctx(const void *a, const void *b) {
    int64_t x = ((const jctx_t *)a)->id, y = ((const jctx_t *)b)->id;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b) {
    int64_t x = ((const jstr_t *)a)->key, y = ((const jstr_t *)b)->key;
    return (x > y) - (x < y);
}

static const char *snapshot_string(const jstr_t *strs, size_t n, int64_t key) {
    jstr_t k = {key, NULL};
    const jstr_t *f = n ? bsearch(&k, strs, n, sizeof *strs, cmp_str) : NULL;
    return f ? f->value : NULL;
}

/* One context's labels onto its copy of the base labels. */
static int context_labels(const Jfr__Context *ctx, const jstr_t *strs, size_t nstrs, jctx_t *out, hr_err_t *err) {
    char name[128];
    for (size_t k = 0; ctx && k < ctx->n_labels; k++) {
        const char *key = snapshot_string(strs, nstrs, ctx->labels[k]->key),
                   *val = snapshot_string(strs, nstrs, ctx->labels[k]->value);
        if (!key || !val)
            return hr_fail(err, HR_EUNPROC, "JFR labels: context %lld names a string the snapshot lacks",
                           (long long)out->id);
        if (ingest_label_add(&out->labels, name, sizeof name, key, val, err)) {
            err->code = HR_EUNPROC;
            return -1;
        }
    }
    return 0;
}

/* The contexts of the upload's LabelsSnapshot (gzip allowed), sorted by id. */
static int contexts_load(const jfr_opts_t *o, jctx_t **out, size_t *nout, hr_err_t *err) {
    uint8_t *raw = NULL;
    const uint8_t *p = o->labels;
    size_t n = o->labels_len;
    if (gz_is_gzip(p, n)) {
        if (gz_inflate(p, n, o->max_decompressed, &raw, &n, err)) return -1;
        p = raw;
    }
    Jfr__LabelsSnapshot *ls = jfr__labels_snapshot__unpack(NULL, n, p);
    free(raw);
    if (!ls) return hr_fail(err, HR_EUNPROC, "JFR labels: the `labels` part is not a LabelsSnapshot protobuf");
    jstr_t *strs = calloc(ls->n_strings + 1, sizeof *strs);
    jctx_t *c = calloc(ls->n_contexts + 1, sizeof *c);
    int rc = strs && c ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < ls->n_strings; i++)
        strs[i] = (jstr_t){ls->strings[i]->key, ls->strings[i]->value};
    if (rc == 0 && ls->n_strings) qsort(strs, ls->n_strings, sizeof *strs, cmp_str);
    size_t nc = 0;
    for (; rc == 0 && nc < ls->n_contexts; nc++) {
        c[nc].id = ls->contexts[nc]->key;
        if (labels_copy(&c[nc].labels, o->base)) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        rc = context_labels(ls->contexts[nc]->value, strs, ls->n_strings, &c[nc], err);
    }
    if (rc == 0 && nc) qsort(c, nc, sizeof *c, cmp_ctx);
    free(strs);
    jfr__labels_snapshot__free_unpacked(ls, NULL);
    if (rc) {
        for (size_t i = 0; i < nc; i++) labels_destroy(&c[i].labels);
        free(c);
        return -1;
    }
    *out = c, *nout = nc;
    return 0;
}

/* What ties an event to a request: its context id (the LabelsSnapshot's) and its span
 * (async-profiler's fields; 0 for none). */
typedef struct {
    uint64_t stack, ctx, span;
} jevent_t;

/* A sampled thread (jdk.ExecutionSample, or profiler.WallClockSample standing for
 * `samples` samples), valued once the chunk's settings are known. */
typedef struct {
    jevent_t e;
    uint32_t samples; /* 0: an execution sample */
    uint8_t state;    /* T_* */
} timed_t;

typedef struct {
    const jfr_opts_t *o;
    batch_t *b;
    batch_profile_t *prof[P_COUNT]; /* events without a known context; created on first use */
    jctx_t *ctx;                    /* the LabelsSnapshot's contexts, sorted by id */
    size_t nctx;
    int64_t time_ns, duration_ns;
    int64_t interval_ns; /* of jdk.ExecutionSample; 0 until a setting says */
    int wall_mode;       /* the recording's `event` setting is "wall" (async-profiler's wall mode) */
    timed_t *timed;      /* the chunk's sampled threads */
    size_t ntimed, timed_cap;
    size_t samples;
} conv_t;

/* The snapshot's context ctx; NULL for 0 or one it does not list (the event then
 * counts under the base labels, as Pyroscope counts it without labels). */
static jctx_t *context_of(conv_t *c, uint64_t ctx) {
    jctx_t k = {.id = (int64_t)ctx};
    return ctx && c->nctx ? bsearch(&k, c->ctx, c->nctx, sizeof *c->ctx, cmp_ctx) : NULL;
}

static int add(conv_t *c, stacks_t *s, int which, const jevent_t *e, int64_t value, hr_err_t *err) {
    if (!value) return 0;
    uint32_t st = stack_of(s, e->stack);
    if (st == SYM_NONE) return hr_fail(err, HR_ENOMEM, "out of memory");
    if (!st) return 0; /* an event without a stack trace */
    jctx_t *x = context_of(c, e->ctx);
    batch_profile_t **p = x ? &x->prof[which] : &c->prof[which];
    const labels_t *l = x ? &x->labels : c->o->base;
    if (!*p && !(*p = batch_profile(c->b, TYPES[which], l, c->time_ns, c->duration_ns)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    if (c->o->max_samples && ++c->samples > c->o->max_samples)
        return hr_fail(err, HR_ETOOBIG, "the recording has more than %zu samples (--max-samples)", c->o->max_samples);
    int rc = e->span ? batch_span_sample(*p, st, value, e->span, NULL) : batch_sample(*p, st, value);
    return rc ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
}

/* "10ms", "20 ms", "10000000" (ns, as async-profiler writes it) -> ns; 0 if none. */
static int64_t parse_interval(str_t v) {
    char tmp[32];
    if (!v.s || !v.n || v.n >= sizeof tmp) return 0;
    memcpy(tmp, v.s, v.n);
    tmp[v.n] = 0;
    char *end;
    double x = strtod(tmp, &end);
    while (*end == ' ') end++;
    double mul = !*end || !strcmp(end, "ns") ? 1
                 : !strcmp(end, "us")        ? 1e3
                 : !strcmp(end, "ms")        ? 1e6
                 : !strcmp(end, "s")         ? 1e9
                                             : 0;
    return x > 0 && x * mul < 1e15 ? (int64_t)(x * mul) : 0;
}

typedef struct {
    size_t exec, tlab, outside, monitor, park, setting, wall;
} event_classes_t;

static int is_event(const event_classes_t *ec, size_t ci) {
    return ci != SIZE_MAX && (ci == ec->exec || ci == ec->tlab || ci == ec->outside || ci == ec->monitor ||
                              ci == ec->park || ci == ec->setting || ci == ec->wall);
}

static int str_is(str_t s, const char *lit) { return s.s && s.n == strlen(lit) && !memcmp(s.s, lit, s.n); }

/* An ActiveSetting: the sampling interval of execution samples, and async-profiler's
 * `event` (wall mode makes every execution sample a wall-clock sample too). */
static void apply_setting(conv_t *c, const meta_t *m, const event_classes_t *ec, uint64_t id, str_t name, str_t value) {
    if (ec->exec != SIZE_MAX && id == m->c[ec->exec].id && (str_is(name, "interval") || str_is(name, "period")))
        c->interval_ns = parse_interval(value);
    if (str_is(name, "event")) c->wall_mode = str_is(value, "wall");
}

static int add_timed(conv_t *c, const jevent_t *e, uint32_t samples, uint8_t state, hr_err_t *err) {
    if (VEC_RESERVE(c->timed, c->timed_cap, c->ntimed + 1)) return hr_fail(err, HR_ENOMEM, "out of memory");
    c->timed[c->ntimed++] = (timed_t){*e, samples, state};
    return 0;
}

/* The chunk's sampled threads, valued by its interval, as Pyroscope's converter does:
 * an execution sample is CPU unless its thread sleeps, and wall-clock too in wall
 * mode; a wall-clock sample is wall-clock, and CPU too in wall mode when its thread
 * runs. */
static int add_timed_all(conv_t *c, stacks_t *s, hr_err_t *err) {
    int64_t interval = c->interval_ns > 0 ? c->interval_ns : DEFAULT_INTERVAL_NS;
    for (size_t i = 0; i < c->ntimed; i++) {
        const timed_t *t = &c->timed[i];
        int64_t v = t->samples ? (int64_t)t->samples * interval : interval;
        int cpu = t->samples ? c->wall_mode && t->state == T_RUNNABLE : t->state != T_SLEEPING;
        int wall = t->samples || c->wall_mode;
        if ((cpu && add(c, s, P_CPU, &t->e, v, err)) || (wall && add(c, s, P_WALL, &t->e, v, err))) return -1;
    }
    return 0;
}

static int read_events(const uint8_t *chunk, size_t size, int64_t tps, const meta_t *m, const event_classes_t *ec,
                       const pools_t *p, conv_t *c, stacks_t *s, hr_err_t *err) {
    static const char *const want[] = {"stackTrace", "tlabSize",  "allocationSize", "duration", "id",   "name",
                                       "value",      "contextId", "spanId",         "samples",  "state"};
    enum { W_STACK, W_TLAB, W_ALLOC, W_DUR, W_ID, W_NAME, W_VALUE, W_CTX, W_SPAN, W_SAMPLES, W_STATE, W_N };
    size_t off = HEADER_BYTES;
    while (off < size) {
        rd_t r = {chunk + off, chunk + size, 0, p->ar};
        uint64_t esize = rd_var(&r);
        if (r.bad || esize == 0 || esize > size - off)
            return hr_fail(err, HR_EUNPROC, "invalid JFR: bad event size at offset %zu", off);
        r.end = chunk + off + esize;
        size_t ci = class_index(m, rd_var(&r));
        off += esize;
        if (!is_event(ec, ci)) continue; /* metadata (0), constant pools (1) and events Hearth does not keep */
        val_t v[W_N];
        read_struct(&r, m, ci, want, W_N, v);
        if (r.bad) return hr_fail(err, HR_EUNPROC, "invalid JFR: truncated %s event", m->c[ci].name);
        jevent_t e = {v[W_STACK].i, v[W_CTX].i, v[W_SPAN].i};
        uint32_t st = v[W_STATE].set ? map_get(&p->state, v[W_STATE].i) : T_RUNNABLE;
        uint8_t state = st == UINT32_MAX ? T_OTHER : (uint8_t)st;
        int rc = 0;
        if (ci == ec->setting) {
            apply_setting(c, m, ec, v[W_ID].i, v[W_NAME].s, v[W_VALUE].s);
        } else if (ci == ec->exec) {
            rc = add_timed(c, &e, 0, state, err);
        } else if (ci == ec->wall) {
            /* a wall-clock event without a sample count (0) stands for nothing, as in Pyroscope */
            if (v[W_SAMPLES].i)
                rc =
                    add_timed(c, &e, (uint32_t)(v[W_SAMPLES].i > UINT32_MAX ? UINT32_MAX : v[W_SAMPLES].i), state, err);
        } else if (ci == ec->tlab) {
            rc = add(c, s, P_TLAB_OBJ, &e, 1, err) || add(c, s, P_TLAB_BYTES, &e, (int64_t)v[W_TLAB].i, err);
        } else if (ci == ec->outside) {
            rc = add(c, s, P_OUT_OBJ, &e, 1, err) || add(c, s, P_OUT_BYTES, &e, (int64_t)v[W_ALLOC].i, err);
        } else {
            double ns = tps > 0 ? (double)v[W_DUR].i * 1e9 / (double)tps : (double)v[W_DUR].i;
            if (!(ns >= 0 && ns < 9e18)) ns = 0; /* a corrupt duration: count the event, not its time */
            int count = ci == ec->park ? P_PARK_COUNT : P_LOCK_COUNT, delay = ci == ec->park ? P_PARK_NS : P_LOCK_NS;
            rc = add(c, s, count, &e, 1, err) || add(c, s, delay, &e, (int64_t)ns, err);
        }
        if (rc) return -1;
    }
    return 0;
}

/* One chunk: metadata, pools, then its events. */
static int read_chunk(const uint8_t *chunk, size_t size, conv_t *c, hr_err_t *err) {
    meta_t m = {0};
    pools_t p = {0};
    int64_t cp_off = be64(chunk + 16), meta_off = be64(chunk + 24), tps = be64(chunk + 56);
    int rc = -1;
    if (!(chunk[67] & 1)) {
        hr_fail(err, HR_EUNPROC, "JFR chunks without compressed integers (JDK 8 recordings) are not supported");
        goto out;
    }
    int meta_ok = meta_off >= HEADER_BYTES && (uint64_t)meta_off < size; /* checked before forming the pointer */
    if (!(p.ar = arena_new())) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto out;
    }
    rd_t r = {meta_ok ? chunk + meta_off : chunk + size, chunk + size, 0, p.ar};
    if (!meta_ok || read_metadata(&r, &m)) {
        hr_fail(err, HR_EUNPROC, "invalid JFR: unreadable metadata");
        goto out;
    }
    known_t kn = {class_named(&m, "jdk.types.Symbol"),     class_named(&m, "java.lang.Class"),
                  class_named(&m, "jdk.types.Method"),     class_named(&m, "jdk.types.StackTrace"),
                  class_named(&m, "jdk.types.StackFrame"), class_named(&m, "jdk.types.ThreadState")};
    if (read_pools(chunk, size, cp_off, &m, &kn, &p)) {
        if (!err->code) hr_fail(err, HR_EUNPROC, "invalid JFR: unreadable constant pool");
        goto out;
    }
    event_classes_t ec = {class_named(&m, "jdk.ExecutionSample"),
                          class_named(&m, "jdk.ObjectAllocationInNewTLAB"),
                          class_named(&m, "jdk.ObjectAllocationOutsideTLAB"),
                          class_named(&m, "jdk.JavaMonitorEnter"),
                          class_named(&m, "jdk.ThreadPark"),
                          class_named(&m, "jdk.ActiveSetting"),
                          class_named(&m, "profiler.WallClockSample")};
    stacks_t s = {.b = c->b, .p = &p};
    buf_init(&s.name);
    c->ntimed = 0;
    rc = read_events(chunk, size, tps, &m, &ec, &p, c, &s, err);
    /* Sampled threads are valued once every setting of the chunk has been seen. */
    if (rc == 0) rc = add_timed_all(c, &s, err);
    u64map_free(&s.done);
    buf_free(&s.name);
out:
    meta_free(&m);
    pools_free(&p);
    return rc;
}

int jfr_decode(const uint8_t *body, size_t n, const jfr_opts_t *o, batch_t *b, hr_err_t *err) {
    uint8_t *raw = NULL;
    if (gz_is_gzip(body, n)) {
        if (gz_inflate(body, n, o->max_decompressed, &raw, &n, err)) return -1;
        body = raw;
    }
    conv_t c = {.o = o, .b = b, .time_ns = o->time_ns, .duration_ns = o->duration_ns};
    int rc = o->labels && o->labels_len ? contexts_load(o, &c.ctx, &c.nctx, err) : 0;
    size_t off = 0, chunks = 0;
    int64_t total_ns = 0;
    while (rc == 0 && off < n) {
        const uint8_t *ch = body + off;
        if (n - off < HEADER_BYTES || memcmp(ch, "FLR\0", 4)) {
            if (chunks) rc = hr_fail(err, HR_EUNPROC, "invalid JFR: garbage after chunk %zu", chunks);
            else rc = hr_fail(err, HR_EUNPROC, "not a JFR recording (it does not start with FLR)");
            break;
        }
        int64_t size = be64(ch + 8);
        if (size < HEADER_BYTES || (uint64_t)size > n - off) {
            rc = hr_fail(err, HR_EUNPROC, "invalid JFR: chunk %zu claims %lld bytes, %zu are there", chunks,
                         (long long)size, n - off);
            break;
        }
        if (!c.time_ns) c.time_ns = be64(ch + 32);
        int64_t d = be64(ch + 40);
        if (d > 0 && d <= INT64_MAX - total_ns) total_ns += d; /* garbage durations do not overflow */
        if (!o->duration_ns) c.duration_ns = total_ns;
        c.interval_ns = 0;
        c.wall_mode = 0;
        rc = read_chunk(ch, (size_t)size, &c, err);
        off += (size_t)size;
        chunks++;
    }
    if (rc == 0 && !chunks) rc = hr_fail(err, HR_EUNPROC, "empty JFR recording");
    for (int i = 0; rc == 0 && i < P_COUNT; i++) { /* created during the first chunk: the whole span */
        if (c.prof[i]) c.prof[i]->duration_ns = c.duration_ns;
        for (size_t k = 0; k < c.nctx; k++)
            if (c.ctx[k].prof[i]) c.ctx[k].prof[i]->duration_ns = c.duration_ns;
    }
    for (size_t k = 0; k < c.nctx; k++) labels_destroy(&c.ctx[k].labels);
    free(c.ctx);
    free(c.timed);
    free(raw);
    return rc;
}

int jfr_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    ingest_series_t s;
    int rc = ingest_series_read(r, lim, &s, err);
    jfr_opts_t o = {.base = &s.labels,
                    .time_ns = r->has_from ? r->from_ns : 0,
                    .duration_ns = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0,
                    .max_decompressed = lim->max_decompressed,
                    .max_samples = lim->max_samples,
                    .labels = r->aux_body,
                    .labels_len = r->aux_len};
    if (rc == 0) rc = jfr_decode(r->body, r->body_len, &o, b, err);
    labels_destroy(&s.labels);
    return rc;
}

ingest_sniff_t jfr_sniff(const ingest_peek_t *pk) {
    return pk->nhead == 4 && !memcmp(pk->head, "FLR\0", 4) ? SNIFF_SURE : SNIFF_NO;
}
