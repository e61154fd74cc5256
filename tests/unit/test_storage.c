/* test_storage.c - symbol tables, blocks, the WAL and the store. */
#include <pthread.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/block.h"
#include "storage/functab.h"
#include "storage/store.h"
#include "storage/symdict.h"
#include "storage/symtab.h"
#include "storage/wal.h"
#include "common/fsutil.h"
#include "tests/unit/unit.h"

/* Interns the stack "f0;f1;...;f(n-1)" (root first) into t. */
static uint32_t make_stack(symtab_t *t, const char *const *names, size_t n) {
    uint32_t stack = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = symtab_string(t, names[i], strlen(names[i]));
        sym_function_t f = {s, s, symtab_string(t, "file.go", 7), 10};
        sym_line_t line = {symtab_function(t, &f), (int64_t)i + 1};
        sym_mapping_t m = {0x1000, 0x2000, 0, symtab_string(t, "bin", 3), 0};
        uint32_t loc = symtab_location(t, symtab_mapping(t, &m), 0x1000 + i, &line, 1);
        stack = symtab_stack(t, stack, loc);
    }
    return stack;
}

void test_labels_intersect(void) {
    labels_t a, b;
    labels_init(&a), labels_init(&b);
    const char *av[][2] = {{"env", "prod"}, {"service_name", "svc"}, {"worker", "a"}, {"zone", "x"}};
    const char *bv[][2] = {{"env", "prod"}, {"service_name", "svc"}, {"worker", "b"}};
    for (size_t i = 0; i < 4; i++) CHECK(labels_set(&a, av[i][0], av[i][1]) == 0);
    for (size_t i = 0; i < 3; i++) CHECK(labels_set(&b, bv[i][0], bv[i][1]) == 0);
    labels_intersect(&a, &b); /* worker differs, zone is absent from b: both go */
    CHECK(a.n == 2 && !strcmp(labels_get(&a, "env"), "prod") && !strcmp(labels_get(&a, "service_name"), "svc"));
    CHECK(!labels_get(&a, "worker") && !labels_get(&a, "zone"));
    labels_intersect(&a, &a); /* with itself: unchanged */
    CHECK(a.n == 2);
    labels_destroy(&b);
    labels_intersect(&a, &b); /* with the empty set: empty */
    CHECK(a.n == 0);
    labels_destroy(&a);
}

void test_symtab_dedup(void) {
    symtab_t *t = symtab_new();
    const char *a[] = {"main", "work", "leaf"}, *b[] = {"main", "work", "other"};
    uint32_t s1 = make_stack(t, a, 3);
    size_t nstr = t->nstrings, nfn = t->nfunctions, nloc = t->nlocations, nst = t->nstacks;
    CHECK(make_stack(t, a, 3) == s1); /* the same stack again adds nothing */
    CHECK_INT(t->nstrings, nstr);
    CHECK_INT(t->nfunctions, nfn);
    CHECK_INT(t->nlocations, nloc);
    CHECK_INT(t->nstacks, nst);
    uint32_t s2 = make_stack(t, b, 3);
    CHECK(s2 != s1);
    CHECK_INT(t->nstacks, nst + 1); /* shares the main;work prefix */
    CHECK(t->stacks[s2].parent == t->stacks[s1].parent);
    CHECK_INT(symtab_stack_depth(t, s2), 3);
    CHECK_INT(t->nmappings, 2); /* reserved + one */
    symtab_free(t);
}

void test_symtab_roundtrip(void) {
    symtab_t *t = symtab_new();
    const char *a[] = {"main", "work", "leaf"}, *b[] = {"x", "y"};
    make_stack(t, a, 3);
    make_stack(t, b, 2);
    buf_t e;
    buf_init(&e);
    symtab_encode(t, &e);
    hr_err_t err = {0};
    symtab_t *d = symtab_decode(e.data, e.len, &err);
    CHECK(d != NULL);
    if (d) {
        CHECK_INT(d->nstrings, t->nstrings);
        CHECK_INT(d->nstacks, t->nstacks);
        CHECK_INT(d->nlocations, t->nlocations);
        CHECK_STR(symtab_str(d, 3), symtab_str(t, 3));
        buf_t e2;
        buf_init(&e2);
        symtab_encode(d, &e2);
        CHECK(e2.len == e.len && !memcmp(e2.data, e.data, e.len)); /* stable encoding */
        buf_free(&e2);
        symtab_free(d);
    }
    /* A reference past a table's end is caught. */
    e.data[e.len - 1] = 0x7f;
    CHECK(symtab_decode(e.data, e.len, &err) == NULL);
    CHECK(symtab_decode(e.data, e.len / 2, &err) == NULL);
    buf_free(&e);
    symtab_free(t);
}

/* Fingerprints name stacks by content across symtabs (merges recognise a stack seen in
 * another block by it), and a decoded symtab, built without its sets, still interns
 * without duplicating. */
void test_symtab_fingerprints(void) {
    symtab_t *x = symtab_new(), *y = symtab_new();
    const char *a[] = {"main", "work", "leaf"}, *b[] = {"main", "work", "other"}, *pre[] = {"zzz", "q"};
    make_stack(y, pre, 2); /* y's ids differ from x's */
    uint32_t xa = make_stack(x, a, 3), xb = make_stack(x, b, 3), ya = make_stack(y, a, 3);
    CHECK(symtab_fingerprint(x) == 0 && symtab_fingerprint(y) == 0);
    const sym_fp_t *fx = x->fp[SYM_FP_STACKS], *fy = y->fp[SYM_FP_STACKS];
    CHECK(xa != ya && fx[xa].a == fy[ya].a && fx[xa].b == fy[ya].b);
    CHECK(fx[xb].a != fx[xa].a && fx[xb].b != fx[xa].b);
    CHECK(fx[x->stacks[xa].parent].a == fx[x->stacks[xb].parent].a); /* the shared prefix */
    CHECK(fx[0].a == fy[0].a);                                       /* the empty stack */
    uint32_t yb = make_stack(y, b, 3);                               /* incremental: only the new entries */
    CHECK(symtab_fingerprint(y) == 0 && y->nfp[SYM_FP_STACKS] == y->nstacks);
    CHECK(y->fp[SYM_FP_STACKS][yb].a == fx[xb].a && y->fp[SYM_FP_STACKS][yb].b == fx[xb].b);
    buf_t e;
    buf_init(&e);
    symtab_encode(x, &e);
    hr_err_t err = {0};
    symtab_t *d = symtab_decode(e.data, e.len, &err);
    CHECK(d && d->nfp[SYM_FP_STACKS] == 0); /* left to the reader that needs them */
    CHECK(d && symtab_fingerprint_stacks(d) == 0 && d->nfp[SYM_FP_STACKS] == x->nstacks && !d->nfp[SYM_FP_STRINGS]);
    if (d) {
        CHECK(d->fp[SYM_FP_STACKS][xb].a == fx[xb].a);
        size_t n = d->nstacks;
        CHECK(make_stack(d, a, 3) == xa && d->nstacks == n); /* found, not added again */
        CHECK(symtab_string(d, "work", 4) == symtab_string(x, "work", 4));
        symtab_free(d);
    }
    buf_free(&e);
    symtab_free(x);
    symtab_free(y);
}

void test_symtab_import(void) {
    symtab_t *src = symtab_new(), *dst = symtab_new();
    const char *a[] = {"main", "work", "leaf"};
    const char *pre[] = {"zzz"};
    make_stack(dst, pre, 1); /* dst ids differ from src ids */
    uint32_t s = make_stack(src, a, 3);
    symtab_remap_t m;
    CHECK(symtab_remap_init(&m, src) == 0);
    uint32_t d = symtab_import_stack(dst, &m, s);
    CHECK(d != SYM_NONE && d != s);
    CHECK_INT(symtab_stack_depth(dst, d), 3);
    const sym_location_t *l = &dst->locations[dst->stacks[d].location];
    CHECK_STR(symtab_str(dst, dst->functions[dst->lines[l->first_line].function].name), "leaf");
    CHECK(symtab_import_stack(dst, &m, s) == d);
    symtab_remap_destroy(&m);
    symtab_free(src);
    symtab_free(dst);
}

/* A segment of one profile over the stacks named by paths (n frames each), value i+1
 * for path i, its symtab fingerprinted as the block cache leaves it. */
static segment_t *dict_segment(const char **paths[], size_t n, size_t frames) {
    segment_t *s = segment_new();
    uint32_t st[8];
    int64_t v[8];
    for (size_t i = 0; i < n; i++) st[i] = make_stack(s->sym, paths[i], frames), v[i] = (int64_t)i + 1;
    segment_add(s, 1, 1000, 10, st, v, n);
    symtab_fingerprint_stacks(s->sym);
    return s;
}

/* The value of the stack whose leaf function is `leaf` in seg read through sym. */
static int64_t leaf_value(const segment_t *seg, const symtab_t *sym, const char *leaf) {
    for (size_t i = 0; i < seg->nsamples; i++) {
        const sym_location_t *l = &sym->locations[sym->stacks[seg->stacks[i]].location];
        if (!strcmp(symtab_str(sym, sym->functions[sym->lines[l->first_line].function].name), leaf))
            return seg->values[i];
    }
    return -1;
}

/* Partitions adopted into one dictionary share ids by content; a reader's version
 * stays valid (and unchanged) while the dictionary grows; bytes are counted and given
 * back when the last reference goes. */
void test_symdict_shares_stacks(void) {
    const char *a[] = {"main", "a"}, *b[] = {"main", "b"}, *c[] = {"main", "c"};
    const char **p1[] = {a, b}, **p2[] = {c, b};
    _Atomic size_t bytes = 0;
    symdict_t *d = symdict_new(&bytes);
    segment_t *s1 = dict_segment(p1, 2, 2), *s2 = dict_segment(p2, 2, 2);
    CHECK(d && symdict_adopt(d, s1) == 0 && !s1->sym && s1->dict == d);
    const symtab_t *v1 = symdict_acquire(d, s1->dict_stacks, 0);
    CHECK(v1 && v1->nfp[SYM_FP_STACKS] == v1->nstacks);
    size_t n1 = v1 ? v1->nstacks : 0;
    CHECK(symdict_adopt(d, s2) == 0);
    CHECK(symdict_acquire(d, s1->dict_stacks, 0) == v1); /* s1's stacks: the same version, no copy */
    symdict_release(d, v1);
    const symtab_t *v2 = symdict_acquire(d, s2->dict_stacks, 0);
    CHECK(v2 && v2 != v1 && v2->nstacks == n1 + 1); /* only "main;c" is new */
    CHECK(v1 && v1->nstacks == n1);                 /* the old version did not change */
    if (v1 && v2) {
        CHECK_INT(leaf_value(s1, v2, "a"), 1);
        CHECK_INT(leaf_value(s1, v2, "b"), 2);
        CHECK_INT(leaf_value(s2, v2, "c"), 1);
        CHECK_INT(leaf_value(s2, v2, "b"), 2);
        CHECK_INT(leaf_value(s1, v1, "a"), 1); /* old ids read in v1 too */
    }
    CHECK(bytes > 0);
    CHECK_INT(symdict_refs(d), 5); /* the caller's, two segments', two versions' */
    symdict_release(d, v1);
    symdict_release(d, v2);
    segment_free(s1);
    symdict_unref(d);
    segment_free(s2);
    symdict_unref(d);
    symdict_unref(d);
    CHECK_INT(bytes, 0);
}

/* A partition whose samples name an inner stack of another (main, and main;a;x under
 * it) and a deep stack whose ancestors the dictionary lacks: the named stacks map by
 * content, the unnamed inner ones come along as their ancestors, and nothing else. */
void test_symdict_maps_the_stacks_samples_name(void) {
    const char *deep[] = {"main", "a", "x"};
    const char **p1[] = {deep};
    symdict_t *d = symdict_new(NULL);
    segment_t *s1 = dict_segment(p1, 1, 3), *s2 = segment_new();
    uint32_t st[2] = {make_stack(s2->sym, deep, 1), make_stack(s2->sym, deep, 3)}; /* main; main;a;x */
    int64_t v[2] = {5, 7};
    segment_add(s2, 1, 1000, 10, st, v, 2);
    symtab_fingerprint_stacks(s2->sym);
    CHECK(d && symdict_adopt(d, s1) == 0 && symdict_adopt(d, s2) == 0);
    const symtab_t *ver = symdict_acquire(d, s2->dict_stacks, 0);
    CHECK(ver && ver->nstacks == 4); /* the empty stack, main, main;a, main;a;x: one copy */
    CHECK(s1->stacks[0] == s2->stacks[1] && s2->stacks[0] != s2->stacks[1]);
    if (ver) {
        CHECK_INT(leaf_value(s2, ver, "main"), 5);
        CHECK_INT(leaf_value(s2, ver, "x"), 7);
        CHECK_INT(leaf_value(s1, ver, "x"), 1);
        symdict_release(d, ver);
    }
    segment_free(s1);
    symdict_unref(d);
    segment_free(s2);
    symdict_unref(d);
    symdict_unref(d);
}

/* The entry of `name` in series i of t (names not yet re-numbered), or NULL. */
static const char *ft_entry(const functab_t *t, size_t i, const char *name, int64_t *self, int64_t *total) {
    for (size_t e = t->first[i]; e < t->first[i + 1]; e++)
        if (!strcmp(t->names + t->name_off[t->fn[e]], name)) return *self = t->self[e], *total = t->total[e], name;
    return NULL;
}

/* A function table f with its names apart (fingerprints in FUNCS, the names in bytes
 * of their own), decoded as a deferred read has it: fingerprints, no names. */
static segment_t *apart_table(const functab_t *t, buf_t *names, hr_err_t *err) {
    buf_t enc;
    buf_init(&enc);
    functab_encode(t, 1, &enc);
    buf_init(names);
    functab_encode_names(t, names);
    segment_t *f = calloc(1, sizeof *f);
    if (f) f->funcs = functab_decode(enc.data, enc.len, t->series, t->nseries, 1, err);
    buf_free(&enc);
    return f;
}

/* Names stored apart: a dictionary maps a table by its names' fingerprints alone once
 * it has seen them, asks for the names (1) before, and names that do not match their
 * fingerprints are refused. */
void test_functab_names_by_fingerprint(void) {
    const char *a[] = {"main", "work", "leaf"}, *b[] = {"main", "idle"};
    segment_t *m = segment_new();
    uint32_t st[2] = {make_stack(m->sym, a, 3), make_stack(m->sym, b, 2)};
    int64_t v[2] = {5, 1};
    segment_add(m, 1, 1000, 0, st, v, 2);
    hr_err_t err = {0};
    int none = 0;
    functab_t *t = functab_build(m->sym, m, &none, &err);
    _Atomic size_t bytes = 0;
    symdict_t *d = symdict_new(&bytes);
    buf_t names, names2;
    segment_t *f1 = t ? apart_table(t, &names, &err) : NULL, *f2 = t ? apart_table(t, &names2, &err) : NULL;
    CHECK(d && f1 && f1->funcs && f1->funcs->fp && !f1->funcs->names &&
          f1->funcs->nnames == 5);                                    /* "?" too: function 0 */
    CHECK(f1 && f1->funcs && symdict_adopt(d, f1) == 1 && !f1->dict); /* not known yet: names wanted */
    /* Another table's names are refused, and the table keeps waiting for its own. */
    const char *c[] = {"?", "idle", "leaf", "main", "other"}; /* the same count, one name another */
    buf_t wrong;
    buf_init(&wrong);
    buf_put_uvarint(&wrong, 5);
    for (int i = 0; i < 5; i++) buf_put_bytes(&wrong, c[i], strlen(c[i]));
    CHECK(f1 && f1->funcs && functab_decode_names(f1->funcs, wrong.data, wrong.len, &err) == -1 &&
          err.code == HR_EUNPROC && !f1->funcs->names);
    CHECK(f1 && f1->funcs && functab_decode_names(f1->funcs, names.data, names.len, &err) == 0 && f1->funcs->names);
    CHECK(f1 && f1->funcs && symdict_adopt(d, f1) == 0 && f1->dict == d);
    /* The second copy adopts without its names: every fingerprint is known now. */
    CHECK(f2 && f2->funcs && !f2->funcs->names && symdict_adopt(d, f2) == 0 && f2->dict == d);
    int same = f1 && f2 && f1->funcs && f2->funcs && f1->funcs->nentries == f2->funcs->nentries;
    for (size_t e = 0; same && e < f1->funcs->nentries; e++) same = f1->funcs->fn[e] == f2->funcs->fn[e];
    CHECK(same);
    const symtab_t *ver = same ? symdict_acquire(d, 0, f2->dict_strings) : NULL;
    CHECK(ver && !strcmp(symtab_str(ver, f2->funcs->fn[0]), "idle")); /* ascending: idle, leaf, main, work */
    if (ver) symdict_release(d, ver);
    buf_free(&names), buf_free(&names2), buf_free(&wrong);
    segment_free(f1), segment_free(f2);
    functab_free(t);
    segment_free(m);
    for (int i = 0; i < 3; i++) symdict_unref(d); /* the two adoptions' references, and ours */
    CHECK_INT(bytes, 0);
}

/* A function table sums self at the leaf and total once per stack however often a
 * name recurs, per series; it round-trips through its encoding, refuses damaged
 * bytes, is not written over address-only frames, and its names re-number into a
 * dictionary's strings. */
void test_functab_sums_per_series(void) {
    const char *rec[] = {"main", "a", "a"}, *b[] = {"main", "b"};
    segment_t *m = segment_new();
    uint32_t st[2] = {make_stack(m->sym, rec, 3), make_stack(m->sym, b, 2)};
    int64_t v1[2] = {3, 2}, v2[1] = {7};
    segment_add(m, 4, 1000, 0, st, v1, 2);
    segment_add(m, 9, 1000, 0, st + 1, v2, 1);
    hr_err_t err = {0};
    int none = 1;
    functab_t *t = functab_build(m->sym, m, &none, &err);
    CHECK(t && !none && t->nseries == 2 && t->series[0] == 4 && t->series[1] == 9);
    int64_t self = -1, total = -1;
    CHECK(t && ft_entry(t, 0, "a", &self, &total) && self == 3 && total == 3); /* not 6: once per stack */
    CHECK(t && ft_entry(t, 0, "main", &self, &total) && self == 0 && total == 5);
    CHECK(t && ft_entry(t, 1, "b", &self, &total) && self == 7 && total == 7);
    CHECK(t && !ft_entry(t, 1, "a", &self, &total) && t->all[0] == 5 && t->all[1] == 7);
    buf_t enc;
    buf_init(&enc);
    if (t) functab_encode(t, 0, &enc);
    functab_t *back = functab_decode(enc.data, enc.len, t ? t->series : NULL, 2, 0, &err);
    CHECK(back && t && functab_equal(t, back));
    CHECK(!functab_decode(enc.data, enc.len - 1, t ? t->series : NULL, 2, 0, &err) && err.code == HR_EUNPROC);
    CHECK(!functab_decode(enc.data, enc.len, t ? t->series : NULL, 3, 0, &err)); /* another series count */
    if (enc.len > 2) enc.data[1] ^= 0x7f;                                        /* a name's length */
    CHECK(!functab_decode(enc.data, enc.len, t ? t->series : NULL, 2, 0, &err));
    /* Names re-numbered into a dictionary: ids are its strings. */
    _Atomic size_t bytes = 0;
    symdict_t *d = symdict_new(&bytes);
    segment_t *f = calloc(1, sizeof *f);
    if (f) f->funcs = back, back = NULL;
    CHECK(d && f && symdict_adopt(d, f) == 0 && !f->funcs->names && f->dict == d);
    const symtab_t *v = d && f ? symdict_acquire(d, 0, f->dict_strings) : NULL;
    CHECK(v && !strcmp(symtab_str(v, f->funcs->fn[f->funcs->first[1]]), "b"));
    if (v) symdict_release(d, v);
    segment_free(f);
    symdict_unref(d);
    symdict_unref(d);
    CHECK_INT(bytes, 0);
    /* Values that cancel (negative values are allowed for counters): a name whose running
     * sum returns to 0 and grows again is still one entry. */
    segment_t *neg = segment_new();
    const char *p1[] = {"main", "f", "a"}, *p2[] = {"main", "f", "b"}, *p3[] = {"main", "f", "c"};
    uint32_t ns[3] = {make_stack(neg->sym, p1, 3), make_stack(neg->sym, p2, 3), make_stack(neg->sym, p3, 3)};
    int64_t nv[3] = {1, -1, 1};
    segment_add(neg, 3, 1000, 0, ns, nv, 3);
    functab_t *nt = functab_build(neg->sym, neg, &none, &err);
    CHECK(nt && nt->nentries == 5 && ft_entry(nt, 0, "main", &self, &total) && total == 1 && self == 0);
    functab_free(nt);
    segment_free(neg);
    /* An address-only frame: no table (the symbolizer names it at query time). */
    sym_mapping_t mp = {0x1000, 0x2000, 0, 0, 0};
    uint32_t loc = symtab_location(m->sym, symtab_mapping(m->sym, &mp), 0x1234, NULL, 0);
    symtab_stack(m->sym, 0, loc);
    CHECK(!functab_build(m->sym, m, &none, &err) && none);
    buf_free(&enc);
    functab_free(back);
    functab_free(t);
    segment_free(m);
}

/* Writes s as a one-partition block file at path (a mkstemp template). 0 or -1. */
static int block_file(const segment_t *s, char *path) {
    buf_t img;
    buf_init(&img);
    hr_err_t err = {0};
    int fd = block_encode(s, NULL, NULL, 3, &img, &err) == 0 ? mkstemp(path) : -1;
    int rc = fd >= 0 && write(fd, img.data, img.len) == (ssize_t)img.len ? 0 : -1;
    if (fd >= 0) close(fd);
    buf_free(&img);
    return rc;
}

/* A partition stores the fingerprints of the stacks its rows name: read with
 * BLOCK_VIEW_DEFER_SYMBOLS it leaves its symbols packed, a dictionary that knows
 * every stack adopts it without them, one that lacks a stack asks for them (1), and
 * every way gives the ids a whole read gives. */
void test_block_stack_fingerprints_defer_symbols(void) {
    const char *a[] = {"main", "a", "x"}, *b[] = {"main", "b"};
    segment_t *s = segment_new();
    uint32_t st[] = {0, make_stack(s->sym, a, 1), make_stack(s->sym, a, 3), make_stack(s->sym, b, 2)};
    int64_t v[] = {1, 2, 3, 4};
    segment_add(s, 1, 1000, 10, st, v, 4); /* the empty stack, main, main;a;x, main;b */
    segment_add(s, 2, 2000, 10, st + 2, v, 1);
    char path[] = "/tmp/hearth-unit-stackfp-XXXXXX";
    hr_err_t err = {0};
    block_index_t *ix = block_file(s, path) == 0 ? block_index_read(path, &err) : NULL;
    CHECK(ix && ix->parts[0].stacks);
    for (int view = 0; ix && view < 2; view++) {
        block_src_t src;
        CHECK(block_src_file(&src, path, &err) == 0);
        segment_t *whole = block_read_part_src(&src, ix, 0, view, NULL, &err);
        segment_t *lazy = block_read_part_src(&src, ix, 0, view | BLOCK_VIEW_DEFER_SYMBOLS, NULL, &err);
        segment_t *again = block_read_part_src(&src, ix, 0, view | BLOCK_VIEW_DEFER_SYMBOLS, NULL, &err);
        CHECK(whole && whole->sym && !whole->stack_fp);
        CHECK(lazy && !lazy->sym && lazy->nstack_fp == 3); /* main, main;a;x, main;b */
        if (!whole || !lazy || !again) {
            segment_free(whole), segment_free(lazy), segment_free(again);
            break;
        }
        sym_fp_t *fp = NULL;
        CHECK(symtab_stack_fps(whole->sym, &fp) == 0);
        CHECK_INT(lazy->nsamples, whole->nsamples);
        for (size_t i = 0; fp && i < lazy->nsamples; i++) { /* local ids name the same stacks */
            uint32_t k = lazy->stacks[i];
            CHECK(k <= lazy->nstack_fp && lazy->stack_src[k] == whole->stacks[i]);
            CHECK(k == 0 ||
                  (lazy->stack_fp[k].a == fp[whole->stacks[i]].a && lazy->stack_fp[k].b == fp[whole->stacks[i]].b));
        }
        free(fp);
        symdict_t *d = symdict_new(NULL);
        CHECK(symdict_adopt(d, lazy) == 1 && !lazy->dict); /* all new: the symbols are needed */
        segment_t *syms = block_read_part_src(&src, ix, 0, BLOCK_VIEW_SYMBOLS, NULL, &err);
        CHECK(syms && syms->sym && syms->nprofiles == 0);
        CHECK(syms && block_part_symbols(lazy, syms, &err) == 0 && lazy->sym);
        CHECK(symdict_adopt(d, lazy) == 0 && !lazy->sym && !lazy->stack_fp && lazy->dict == d);
        CHECK(symdict_adopt(d, again) == 0 && !again->sym && again->dict == d); /* known: never decoded */
        CHECK(symtab_fingerprint_stacks(whole->sym) == 0 && symdict_adopt(d, whole) == 0);
        for (size_t i = 0; i < lazy->nsamples; i++)
            CHECK(lazy->stacks[i] == again->stacks[i] && lazy->stacks[i] == whole->stacks[i]);
        const symtab_t *ver = symdict_acquire(d, whole->dict_stacks, 0);
        CHECK(ver && ver->nstacks == 5); /* the empty stack, main, main;a, main;a;x, main;b */
        if (ver) {
            int64_t x = 0, b4 = 0; /* read through the dictionary; the empty stack has no leaf */
            for (size_t i = 0; i < again->nsamples; i++) {
                uint32_t id = again->stacks[i];
                const sym_location_t *l = id ? &ver->locations[ver->stacks[id].location] : NULL;
                const char *leaf = l ? symtab_str(ver, ver->functions[ver->lines[l->first_line].function].name) : "";
                x += !strcmp(leaf, "x") ? again->values[i] : 0;
                b4 += !strcmp(leaf, "b") ? again->values[i] : 0;
            }
            CHECK_INT(x, 4); /* main;a;x: 3 in one row and 1 in the other */
            CHECK_INT(b4, 4);
            symdict_release(d, ver);
        }
        segment_free(whole), segment_free(lazy), segment_free(again);
        for (int k = 0; k < 4; k++) symdict_unref(d);
    }
    block_index_free(ix);
    unlink(path);
    segment_free(s);
}

static segment_t *sample_segment(void) {
    segment_t *s = segment_new();
    const char *a[] = {"main", "a"}, *b[] = {"main", "b"};
    uint32_t sa = make_stack(s->sym, a, 2), sb = make_stack(s->sym, b, 2);
    uint32_t st1[] = {sb, sa, sa};
    int64_t v1[] = {5, 3, 4};
    segment_add(s, 2, 2000, 10, st1, v1, 3);
    uint32_t st2[] = {sa};
    int64_t v2[] = {-7};
    segment_add(s, 1, 1000, 10, st2, v2, 1);
    segment_add(s, 2, 1500, 10, st2, v2, 0); /* empty profile */
    return s;
}

/* Encodes s as a block image and decodes it back (NULL, with a failed check, if it
 * does not decode). */
static segment_t *roundtrip(const segment_t *s) {
    buf_t b;
    buf_init(&b);
    hr_err_t err = {0};
    CHECK(block_encode(s, NULL, NULL, 3, &b, &err) == 0);
    segment_t *d = block_decode(b.data, b.len, &err);
    CHECK(d != NULL);
    buf_free(&b);
    return d;
}

void test_block_roundtrip(void) {
    segment_t *s = sample_segment();
    CHECK_INT(s->profiles[0].nsamples, 2); /* sa summed: 3+4 */
    CHECK_INT(s->profiles[0].total, 12);
    segment_t *d = roundtrip(s);
    if (d) {
        CHECK_INT(d->nprofiles, 3);
        CHECK_INT(d->nsamples, 3);
        /* Rows come back sorted by (series, time). */
        CHECK_INT(d->profiles[0].series, 1);
        CHECK_INT(d->profiles[0].time_ns, 1000);
        CHECK_INT(d->profiles[0].total, -7);
        CHECK_INT(d->profiles[1].time_ns, 1500);
        CHECK_INT(d->profiles[1].nsamples, 0);
        CHECK_INT(d->profiles[2].time_ns, 2000);
        CHECK_INT(d->profiles[2].total, 12);
        CHECK_INT(d->min_time, 1000);
        CHECK_INT(d->max_time, 2000);
        CHECK_INT(d->sym->nstacks, s->sym->nstacks);
        segment_free(d);
    }
    segment_free(s);
}

void test_block_corruption(void) {
    segment_t *s = sample_segment();
    buf_t b;
    buf_init(&b);
    hr_err_t err = {0};
    block_encode(s, NULL, NULL, 3, &b, &err);
    for (size_t i = 0; i < b.len; i += 7) { /* flip a byte anywhere: always detected */
        b.data[i] ^= 0x55;
        segment_t *d = block_decode(b.data, b.len, &err);
        CHECK(d == NULL);
        segment_free(d);
        b.data[i] ^= 0x55;
    }
    CHECK(block_decode(b.data, b.len - 1, &err) == NULL);
    buf_free(&b);
    segment_free(s);
}

/* Span samples (span ids kept per sample): folded by (stack, span), span 0 and zero
 * sums dropped; written in the partition's SPANS section and read back in the rows
 * view only; a flipped byte in them is detected; compaction keeps them. */
void test_block_span_samples(void) {
    segment_t *s = segment_new();
    const char *a[] = {"main", "a"}, *b[] = {"main", "b"};
    uint32_t sa = make_stack(s->sym, a, 2), sb = make_stack(s->sym, b, 2);
    uint32_t st[] = {sa, sb, sa};
    int64_t v[] = {5, 3, 4};
    segment_add(s, 1, 1000, 10, st, v, 3);
    /* span beef's trace is known from its second sample only: the folded sample keeps it */
    span_sample_t sp[] = {{0xbeef, sa, 5, 0, 0},
                          {0xcafe, sb, 3, 0, 0},
                          {0xbeef, sa, 4, 0x4bf9, 0x4736},
                          {0, sa, 1, 0, 0},
                          {0xd00d, sb, 0, 0, 0}};
    CHECK(segment_add_spans(s, sp, 5) == 0);
    CHECK_INT(s->profiles[0].nspans, 2);   /* (sa, beef) summed to 9; span 0 and the zero sum dropped */
    segment_add(s, 2, 1100, 10, st, v, 1); /* a row without spans */
    uint64_t span;
    CHECK(span_id_parse("00000c0ffee00000", &span) == 0 && span == 0xc0ffee00000ULL);
    CHECK(span_id_parse("0000000000000000", &span) != 0 && span_id_parse("1ffffffffffffffff", &span) != 0);
    CHECK(span_id_parse("12 ", &span) != 0 && span_id_parse("", &span) != 0 && span_id_parse("-1", &span) != 0);
    uint64_t hi, lo;
    CHECK(trace_id_parse("4bf92f3577b34da6A3CE929D0E0E4736", &hi, &lo) == 0 && hi == 0x4bf92f3577b34da6ULL &&
          lo == 0xa3ce929d0e0e4736ULL);
    CHECK(trace_id_parse("0000000000000000"
                         "0000000000000000",
                         &hi, &lo) != 0);
    CHECK(trace_id_parse("4bf92f3577b34da6a3ce929d0e0e473", &hi, &lo) != 0 && trace_id_parse(NULL, &hi, &lo) != 0);
    CHECK(trace_id_parse("4bf92f3577b34da6a3ce929d0e0e473g", &hi, &lo) != 0);
    segment_t *d = roundtrip(s);
    if (d) {
        CHECK_INT(d->nspans, 2);
        CHECK_INT(d->profiles[0].nspans, 2);
        CHECK_INT(d->profiles[1].nspans, 0);
        const span_sample_t *x = &d->spans[d->profiles[0].span_first];
        CHECK(x[0].span == 0xbeef && x[0].value == 9 && x[1].span == 0xcafe && x[1].value == 3);
        CHECK(x[0].trace_hi == 0x4bf9 && x[0].trace_lo == 0x4736 && !span_has_trace(&x[1]));
        const segment_t *both[] = {s, d};
        hr_err_t err = {0};
        segment_t *c = segment_merge(both, 2, &err);
        CHECK(c && c->nspans == 4 && c->profiles[2].nspans == 2);
        segment_free(c);
        segment_free(d);
    }
    buf_t img;
    buf_init(&img);
    hr_err_t err = {0};
    CHECK(block_encode(s, NULL, NULL, 3, &img, &err) == 0);
    block_index_t *ix = NULL;
    char path[] = "/tmp/hearth-unit-spans-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, img.data, img.len) == (ssize_t)img.len);
    close(fd);
    CHECK((ix = block_index_read(path, &err)) != NULL);
    if (ix) {
        CHECK(ix->parts[0].spans && ix->parts[0].traces && ix->parts[0].merged);
        segment_t *m = block_read_part(path, ix, 0, BLOCK_VIEW_MERGED, &err);
        CHECK(m && m->nspans == 0 && m->nprofiles == 2);
        segment_free(m);
        block_index_free(ix);
    }
    unlink(path);
    for (size_t i = 0; i < img.len; i += 5) { /* every byte, the SPANS section's included, is checked */
        img.data[i] ^= 0x55;
        segment_t *bad = block_decode(img.data, img.len, &err);
        CHECK(bad == NULL);
        segment_free(bad);
        img.data[i] ^= 0x55;
    }
    buf_free(&img);
    segment_free(s);
}

/* A sample without locations is the empty stack, id 0 (Go's threadcreate profile
 * has them): it must survive a block round trip, and a block the reader would refuse
 * must never be written. */
void test_block_empty_stack_and_verify(void) {
    segment_t *s = segment_new();
    const char *a[] = {"main", "a"};
    uint32_t sa = make_stack(s->sym, a, 2);
    uint32_t st[] = {sa, 0, 0};
    int64_t v[] = {2, 3, 4};
    segment_add(s, 1, 1000, 10, st, v, 3);
    segment_t *d = roundtrip(s);
    if (d) {
        CHECK_INT(d->profiles[0].nsamples, 2);
        CHECK_INT(d->stacks[0], 0);
        CHECK_INT(d->values[0], 7);
        CHECK_INT(d->profiles[0].total, 9);
        segment_free(d);
    }
    hr_err_t err = {0};
    char dir[512], path[600];
    unit_tmpdir("blkverify", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ok.blk", dir);
    CHECK(block_write(path, s, NULL, NULL, 3, NULL, &err) == 0);
    CHECK(access(path, F_OK) == 0);
    s->stacks[1] = (uint32_t)s->sym->nstacks + 5; /* an id the reader refuses */
    snprintf(path, sizeof path, "%s/bad.blk", dir);
    CHECK(block_write(path, s, NULL, NULL, 3, NULL, &err) == -1);
    CHECK_INT(err.code, HR_EINTERNAL);
    CHECK(access(path, F_OK) != 0);
    segment_free(s);
}

/* Value units: a row whose values share a divisor (a CPU profile's nanoseconds, all
 * multiples of its period) is stored divided by it and multiplied back on read, exactly,
 * for negative values and values at the ends of int64 too; the block is smaller than
 * the same rows with values that share nothing. */
void test_block_value_units(void) {
    segment_t *s = segment_new(), *t = segment_new();
    const char *f[] = {"main", "a", "b", "c", "d", "e", "f", "g"};
    enum { N = 64 };
    uint32_t st[N];
    int64_t v[N], w[N];
    for (int i = 0; i < N; i++) {
        const char *frames[] = {f[0], f[1 + i % 7], f[1 + (i / 7) % 7], f[1 + (i / 3) % 7]};
        st[i] = make_stack(s->sym, frames, 4);
        make_stack(t->sym, frames, 4);
        v[i] = (int64_t)(i % 2 ? 1 : -1) * (i + 1) * 10000000; /* multiples of 10 ms */
        w[i] = v[i] + 1;
    }
    segment_add(s, 1, 1000, 10, st, v, N);
    segment_add(t, 1, 1000, 10, st, w, N);
    uint32_t ends[] = {st[0], st[1]};
    int64_t big[] = {INT64_MAX, INT64_MIN + 1};
    segment_add(s, 2, 1000, 10, ends, big, 2);
    segment_add(t, 2, 1000, 10, ends, big, 2);
    segment_t *d = roundtrip(s);
    if (d) {
        CHECK_INT(d->nsamples, s->nsamples);
        int same = 1;
        for (size_t r = 0; r < d->nprofiles; r++) {
            const seg_profile_t *a = &d->profiles[r];
            const seg_profile_t *b = &s->profiles[a->series == 1 ? 0 : 1];
            for (uint32_t j = 0; j < a->nsamples; j++) same &= d->values[a->first + j] == s->values[b->first + j];
        }
        CHECK(same);
        segment_free(d);
    }
    buf_t bs, bt;
    buf_init(&bs);
    buf_init(&bt);
    hr_err_t err = {0};
    CHECK(block_encode(s, NULL, NULL, 3, &bs, &err) == 0);
    CHECK(block_encode(t, NULL, NULL, 3, &bt, &err) == 0);
    CHECK(bs.len + 64 < bt.len); /* one byte or more per sample saved */
    buf_free(&bs);
    buf_free(&bt);
    segment_free(s);
    segment_free(t);
}

static const char *odd_even_key(void *ctx, uint32_t series) {
    (void)ctx;
    return series % 2 ? "odd" : "even";
}

/* Version 2: series 1 and 2 land in partitions of their own, each with only its own
 * symbols; the footer lists them and holds every profile's total. */
void test_block_partitions(void) {
    segment_t *s = sample_segment(); /* series 2: main;a and main;b; series 1: main;a */
    const char *c[] = {"main", "c"};
    uint32_t sc = make_stack(s->sym, c, 2);
    int64_t v = 9;
    segment_add(s, 1, 1200, 10, &sc, &v, 1);
    char dir[512], path[600];
    unit_tmpdir("blkparts", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.blk", dir);
    hr_err_t err = {0};
    CHECK(block_write(path, s, odd_even_key, NULL, 3, NULL, &err) == 0);
    block_index_t *ix = block_index_read(path, &err);
    CHECK(ix != NULL);
    if (!ix) return segment_free(s);
    CHECK_INT(ix->version, 2);
    CHECK_INT(ix->nparts, 2);
    CHECK_STR(ix->parts[0].key, "even");
    CHECK_INT(ix->parts[0].nseries, 1);
    CHECK(block_part_has(&ix->parts[0], 2) && !block_part_has(&ix->parts[0], 1));
    CHECK_INT(ix->totals->nprofiles, 4);
    int64_t sum = 0;
    for (size_t i = 0; i < ix->totals->nprofiles; i++) sum += ix->totals->profiles[i].total;
    CHECK_INT(sum, 12 - 7 + 9);
    segment_t *odd = block_read_part(path, ix, 1, BLOCK_VIEW_ROWS, &err);
    CHECK(odd != NULL);
    if (odd) {
        CHECK_INT(odd->nprofiles, 2); /* series 1 at 1000 and 1200 */
        CHECK_INT(odd->profiles[0].total + odd->profiles[1].total, -7 + 9);
        CHECK_INT(odd->sym->nstacks, 4); /* empty, main, main;a, main;c: not main;b */
        segment_free(odd);
    }
    CHECK(ix->parts[0].merged && ix->parts[1].merged);
    segment_t *m = block_read_part(path, ix, 0, BLOCK_VIEW_MERGED, &err); /* series 2: two rows summed */
    CHECK(m != NULL);
    if (m) {
        CHECK_INT(m->nprofiles, 1);
        CHECK_INT(m->profiles[0].series, 2);
        CHECK_INT(m->profiles[0].total, 12);
        CHECK_INT(m->profiles[0].nsamples, 2); /* main;a 7, main;b 5 */
        CHECK_INT(m->profiles[0].time_ns, 1500);
        segment_free(m);
    }
    block_index_free(ix);
    segment_t *all = block_read(path, &err);
    CHECK(all && all->nprofiles == 4 && all->nsamples == 4);
    segment_free(all);
    segment_free(s);
}

/* The partition-at-a-time writer (compaction's): each add is one partition on disk;
 * a writer dropped before commit leaves no file; the result reads as block_write's. */
void test_block_writer(void) {
    segment_t *s = sample_segment(); /* series 2: main;a and main;b; series 1: main;a */
    char dir[512], path[600];
    unit_tmpdir("blkwriter", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.blk", dir);
    hr_err_t err = {0};
    block_writer_t *w = block_writer_new(path, 3, 0, &err);
    CHECK(w != NULL);
    if (!w) return segment_free(s);
    CHECK(block_writer_add(w, "all", s, &err) == 0);
    block_writer_free(w); /* not committed */
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) != 0);

    segment_t *empty = segment_new();
    w = block_writer_new(path, 3, 0, &err);
    block_summary_t sum = {0};
    CHECK(w && block_writer_add(w, "a", s, &err) == 0 && block_writer_add(w, "b", empty, &err) == 0);
    CHECK(w && block_writer_commit(w, &sum, NULL, &err) == 0);
    block_writer_free(w);
    CHECK_INT(sum.profiles, s->nprofiles);
    CHECK_INT(sum.samples, s->nsamples);
    CHECK_INT(sum.min_time, s->min_time);
    CHECK_INT(sum.max_time, s->max_time);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == sum.bytes);
    block_index_t *ix = block_index_read(path, &err);
    CHECK(ix && ix->nparts == 1 && !strcmp(ix->parts[0].key, "a")); /* an empty add is no partition */
    block_index_free(ix);
    segment_t *back = block_read(path, &err);
    CHECK(back && back->nprofiles == s->nprofiles && back->nsamples == s->nsamples);
    segment_free(back);

    segment_free(empty);
    segment_free(s);
}

/* Summary partitions: pre-merged rows alone, standing for the partitions of their key
 * whose ranges they hold; a summary that does not sum exactly those rows is refused. */
void test_block_summaries(void) {
    segment_t *s = sample_segment(); /* rows: series 2 @2000, series 1 @1000, series 2 @1500 (empty) */
    hr_err_t err = {0};
    uint32_t early[] = {1, 2}, late[] = {0};
    segment_t *d1 = segment_select(s, early, 2, &err), *d2 = segment_select(s, late, 1, &err);
    CHECK(d1 && d2);
    char dir[512], path[600];
    unit_tmpdir("blksummary", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/s.blk", dir);
    block_writer_t *w = block_writer_new(path, 3, 0, &err);
    CHECK(w && block_writer_add(w, "k", d1, &err) == 0 && block_writer_add(w, "k", d2, &err) == 0);
    CHECK(w && block_writer_add_summary(w, "k", s, &err) == 0);
    CHECK(w && block_writer_commit(w, NULL, NULL, &err) == 0);
    block_writer_free(w);
    block_index_t *ix = block_index_read(path, &err);
    CHECK(ix && ix->nparts == 3);
    if (ix && ix->nparts == 3) {
        const block_part_t *sp = &ix->parts[2];
        CHECK(sp->summary && sp->merged && sp->nprofiles == 0 && sp->min_time == 1000 && sp->max_time == 2000);
        CHECK(sp->ncovers == 0 && !ix->parts[0].summary && !ix->parts[1].summary);
        for (int i = 0; i < 2; i++) CHECK(ix->parts[i].ncovers == 1 && ix->parts[i].covers[0] == 2);
        segment_t *m = block_read_part(path, ix, 2, BLOCK_VIEW_MERGED, &err);
        CHECK(m && m->nprofiles == 2);
        if (m && m->nprofiles == 2) {
            CHECK_INT(m->profiles[0].series, 1);
            CHECK_INT(m->profiles[0].total, -7);
            CHECK_INT(m->profiles[1].total, 12);
        }
        segment_free(m);
        segment_t *rows = block_read_part(path, ix, 2, BLOCK_VIEW_ROWS, &err);
        CHECK(rows && rows->nprofiles == 0);
        segment_free(rows);
    }
    block_index_free(ix);
    segment_t *all = block_read(path, &err); /* hearth check's read: the summary is verified, not counted */
    CHECK(all && all->nprofiles == 3 && all->nsamples == s->nsamples);
    segment_free(all);
    /* A summary of rows this block does not hold is refused, and no file is left. */
    snprintf(path, sizeof path, "%s/bad.blk", dir);
    w = block_writer_new(path, 3, 0, &err);
    CHECK(w && block_writer_add(w, "k", d1, &err) == 0 && block_writer_add_summary(w, "k", s, &err) == 0);
    err = (hr_err_t){0};
    CHECK(w && block_writer_commit(w, NULL, NULL, &err) == -1 && err.code == HR_EINTERNAL);
    block_writer_free(w);
    CHECK(access(path, F_OK) != 0);
    segment_free(d1);
    segment_free(d2);
    segment_free(s);
}

typedef struct {
    int n;
    char seen[16][16];
} wal_seen_t;

static int collect_record(void *ctx, const uint8_t *p, size_t n) {
    wal_seen_t *w = ctx;
    if (w->n < 16 && n < 16) memcpy(w->seen[w->n], p, n), w->seen[w->n][n] = 0;
    w->n++;
    return 0;
}

void test_wal_replay(void) {
    char dir[512];
    unit_tmpdir("wal1", dir, sizeof dir);
    hr_err_t err = {0};
    wal_t *w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    wal_scan_t ws;
    wal_seen_t seen = {0};
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0 && ws.records == 0);
    CHECK(wal_append(w, "one", 3, &err) == 0);
    CHECK(wal_append(w, "two", 3, &err) == 0);
    uint32_t closed;
    CHECK(wal_rotate(w, &closed, &err) == 0 && closed == 1);
    CHECK(wal_append(w, "three", 5, &err) == 0);
    wal_close(w);
    w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
    CHECK_INT(ws.records, 3);
    CHECK_STR(seen.seen[2], "three");
    wal_close(w);
    /* After a checkpoint at segment 1 only segment 2 replays. */
    w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    memset(&seen, 0, sizeof seen);
    CHECK(wal_replay(w, 1, collect_record, &seen, &ws, &err) == 0);
    CHECK_INT(ws.records, 1);
    CHECK_STR(seen.seen[0], "three");
    wal_close(w);
}

/* A callback that cannot apply a record for a passing reason stops the replay: nothing
 * is truncated or skipped, and the next replay delivers every record. */
static int stop_at_two(void *ctx, const uint8_t *p, size_t n) {
    wal_seen_t *seen = ctx;
    if (n == 3 && !memcmp(p, "two", 3)) return WAL_REPLAY_STOP;
    return collect_record(seen, p, n);
}

void test_wal_replay_stop(void) {
    char dir[512];
    unit_tmpdir("walstop", dir, sizeof dir);
    hr_err_t err = {0};
    wal_t *w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    wal_scan_t ws;
    wal_seen_t seen = {0};
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
    CHECK(wal_append(w, "one", 3, &err) == 0 && wal_append(w, "two", 3, &err) == 0);
    CHECK(wal_append(w, "three", 5, &err) == 0);
    wal_close(w);
    w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    CHECK(wal_replay(w, 0, stop_at_two, &seen, &ws, &err) == -1 && err.code == HR_ENOMEM);
    CHECK_INT(ws.records, 1);
    CHECK_INT(ws.skipped, 0);
    wal_close(w);
    w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    memset(&seen, 0, sizeof seen);
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
    CHECK_INT(ws.records, 3);
    CHECK_STR(seen.seen[2], "three");
    wal_close(w);
}

void test_wal_torn_tail(void) {
    char dir[512], path[600];
    unit_tmpdir("wal2", dir, sizeof dir);
    hr_err_t err = {0};
    wal_t *w = wal_open(dir, WAL_FSYNC_NONE, &err);
    wal_scan_t ws;
    wal_seen_t seen = {0};
    wal_replay(w, 0, collect_record, &seen, &ws, &err);
    wal_append(w, "intact", 6, &err);
    wal_append(w, "torn-record", 11, &err);
    wal_close(w);
    snprintf(path, sizeof path, "%s/00000001.wal", dir);
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size - 4) == 0); /* a crash mid-write */
    w = wal_open(dir, WAL_FSYNC_NONE, &err);
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
    CHECK_INT(ws.records, 1);
    CHECK_STR(seen.seen[0], "intact");
    CHECK(wal_append(w, "after", 5, &err) == 0); /* appends follow the intact prefix */
    wal_close(w);
    w = wal_open(dir, WAL_FSYNC_NONE, &err);
    memset(&seen, 0, sizeof seen);
    wal_replay(w, 0, collect_record, &seen, &ws, &err);
    CHECK_INT(ws.records, 2);
    CHECK_STR(seen.seen[1], "after");
    wal_close(w);
}

/* Under WAL_FSYNC_ALWAYS a segment holds zeros ahead of its records. A crash image
 * (the segment as it stands before a clean close) replays every record and counts no
 * torn tail, keeps the zeros as room for the next records, and a clean close leaves
 * the records alone; a torn record in front of the zeros is still a torn tail. */
void test_wal_zeros_ahead(void) {
    char dir[512], crash[512], path[600], cpath[600];
    unit_tmpdir("wal4", dir, sizeof dir);
    unit_tmpdir("wal4crash", crash, sizeof crash);
    snprintf(path, sizeof path, "%s/00000001.wal", dir);
    snprintf(cpath, sizeof cpath, "%s/00000001.wal", crash);
    hr_err_t err = {0};
    wal_scan_t ws;
    wal_seen_t seen = {0};
    wal_t *w = wal_open(dir, WAL_FSYNC_ALWAYS, &err);
    wal_replay(w, 0, collect_record, &seen, &ws, &err);
    const char *recs[] = {"first", "second", "third"};
    for (int i = 0; i < 3; i++) CHECK(wal_append(w, recs[i], strlen(recs[i]), &err) == 0);
    uint64_t records = wal_segment_bytes(w);
    uint8_t *img = NULL;
    size_t n = 0;
    CHECK(fs_read_file(path, 1 << 24, &img, &n, &err) == 0 && n > records); /* zeros follow */
    size_t nonzero = 0;
    for (size_t i = records; img && i < n; i++) nonzero += img[i] != 0;
    CHECK_INT(nonzero, 0);
    CHECK(img && fs_write_atomic(cpath, img, n, &err) == 0);
    wal_close(w);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == records); /* a clean close drops them */
    CHECK(wal_verify(crash, &ws, &err) == 0 && ws.records == 3 && ws.torn_bytes == 0);
    w = wal_open(crash, WAL_FSYNC_ALWAYS, &err);
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0 && ws.records == 3 && ws.torn_bytes == 0);
    CHECK(stat(cpath, &st) == 0 && (size_t)st.st_size == n); /* the room stays */
    CHECK(wal_append(w, "fourth", 6, &err) == 0 && wal_segment_bytes(w) > records);
    wal_close(w);
    memset(&seen, 0, sizeof seen);
    w = wal_open(crash, WAL_FSYNC_ALWAYS, &err);
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0 && ws.records == 4);
    CHECK_STR(seen.seen[3], "fourth");
    wal_close(w);
    /* A record torn in front of the zeros: truncated, as any torn tail. */
    if (img && n > records + 8) memcpy(img + records, "HWAL\x40\0\0\0", 8);
    CHECK(img && fs_write_atomic(cpath, img, n, &err) == 0);
    w = wal_open(crash, WAL_FSYNC_ALWAYS, &err);
    CHECK(wal_replay(w, 0, NULL, NULL, &ws, &err) == 0 && ws.records == 3 && ws.torn_bytes == n - records);
    CHECK(stat(cpath, &st) == 0 && (uint64_t)st.st_size == records);
    wal_close(w);
    free(img);
}

/* One flipped byte inside a segment loses exactly the record it hit: replay skips
 * that record, keeps every later one and counts the corruption; only damage with
 * nothing intact after it is a torn tail. Flips land in headers and payloads. */
void test_wal_corrupt_middle(void) {
    char dir[512], path[600];
    unit_tmpdir("wal3", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/00000001.wal", dir);
    hr_err_t err = {0};
    wal_scan_t ws;
    wal_t *w = wal_open(dir, WAL_FSYNC_NONE, &err);
    wal_replay(w, 0, NULL, NULL, &ws, &err);
    char rec[32];
    for (int i = 0; i < 10; i++) {
        snprintf(rec, sizeof rec, "rec-%02d", i); /* 6 bytes + 16 of header */
        CHECK(wal_append(w, rec, strlen(rec), &err) == 0);
    }
    wal_close(w);
    struct stat st;
    stat(path, &st);
    CHECK_INT(st.st_size, 220);
    for (long off = 0; off < 220; off += 5) {
        int fd = open(path, O_RDWR);
        uint8_t b;
        CHECK(pread(fd, &b, 1, off) == 1);
        b ^= 0x40;
        CHECK(pwrite(fd, &b, 1, off) == 1);
        wal_seen_t seen = {0};
        CHECK(wal_verify(dir, &ws, &err) == 0);
        int last = off >= 198; /* the damaged record is the last one: a torn tail */
        CHECK_INT(ws.records, 9);
        CHECK_INT(ws.corrupt, last ? 0 : 1);
        w = wal_open(dir, WAL_FSYNC_NONE, &err);
        CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
        CHECK_INT(ws.records, 9);
        CHECK_INT(seen.n, 9);
        snprintf(rec, sizeof rec, "rec-%02d", last ? 8 : 9);
        CHECK_STR(seen.seen[8], rec);
        wal_close(w);
        b ^= 0x40;
        CHECK(pwrite(fd, &b, 1, off) == 1);
        if (last) CHECK(ftruncate(fd, 220) == 0); /* replay truncated the torn tail: restore it */
        close(fd);
    }
    /* Segments with the framing before the magic still replay, and appends then go
     * to a fresh segment. */
    unit_tmpdir("wal4", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/00000001.wal", dir);
    FILE *f = fopen(path, "wb");
    const uint8_t v1[] = {3, 0, 0, 0, 0xf1, 0x86, 0x6c, 0x7a, 'o', 'n', 'e'}; /* crc32("one") */
    fwrite(v1, 1, sizeof v1, f);
    fclose(f);
    w = wal_open(dir, WAL_FSYNC_NONE, &err);
    wal_seen_t seen = {0};
    CHECK(wal_replay(w, 0, collect_record, &seen, &ws, &err) == 0);
    CHECK_INT(ws.records, 1);
    CHECK_STR(seen.seen[0], "one");
    CHECK(wal_append(w, "two", 3, &err) == 0);
    wal_close(w);
    snprintf(path, sizeof path, "%s/00000002.wal", dir);
    CHECK(access(path, F_OK) == 0);
}

static int count_segments(void *ctx, const segment_t *seg) {
    int64_t *total = ctx;
    for (size_t i = 0; i < seg->nprofiles; i++) total[0] += seg->profiles[i].total, total[1]++;
    return 0;
}

/* A small store's settings over dir: 1 MiB heads and block cache, hour blocks, no fsync,
 * no retention, no compaction. Tests set what they are about. */
static store_config_t small_store(const char *dir) {
    return (store_config_t){.data_dir = dir,
                            .fsync = WAL_FSYNC_NONE,
                            .head_max_bytes = 1 << 20,
                            .block_duration_ns = 3600LL * 1000000000,
                            .zstd_level = 3,
                            .block_cache_bytes = 1 << 20};
}

/* Opens cfg's store and replays its WAL, without applying the records. */
static store_t *open_store(const store_config_t *cfg) {
    hr_err_t err = {0};
    wal_scan_t ws;
    store_t *s = store_open(cfg, &err);
    CHECK(s && store_replay(s, NULL, NULL, &ws, &err) == 0);
    return s;
}

void test_store_cut_and_reopen(void) {
    char dir[512];
    unit_tmpdir("store1", dir, sizeof dir);
    store_config_t cfg = small_store(dir);
    hr_err_t err = {0};
    store_t *s = store_open(&cfg, &err);
    CHECK(s != NULL);
    wal_scan_t ws;
    CHECK(store_replay(s, NULL, NULL, &ws, &err) == 0 && ws.records == 0);
    batch_t b;
    batch_init(&b);
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "svc");
    batch_profile_t *p = batch_profile(&b, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &l, 5000, 10);
    const char *a[] = {"main", "a"};
    batch_sample(p, make_stack(b.sym, a, 2), 42);
    CHECK(store_ingest(s, "anonymous", "rec", 3, &b, NULL, &err) == 0);
    int64_t got[2] = {0, 0};
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err);
    CHECK(got[0] == 42 && got[1] == 1);
    CHECK(store_cut(s, &err) == 0);
    store_stats_t st;
    store_stats(s, &st);
    CHECK_INT(st.blocks, 1);
    CHECK_INT(st.head_profiles, 0);
    memset(got, 0, sizeof got);
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err);
    CHECK(got[0] == 42 && got[1] == 1); /* same answer from the block */
    memset(got, 0, sizeof got);
    store_scan(s, "other-tenant", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err);
    CHECK(got[1] == 0);
    store_close(s);
    s = store_open(&cfg, &err); /* blocks and series survive a reopen; the WAL is empty */
    CHECK(store_replay(s, NULL, NULL, &ws, &err) == 0 && ws.records == 0);
    memset(got, 0, sizeof got);
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err);
    CHECK(got[0] == 42 && got[1] == 1);
    CHECK_INT(index_series_total(store_index(s)), 1);
    store_close(s);
    labels_destroy(&l);
    batch_destroy(&b);
}

/* One upload of `value` at t into s: store_ingest's result (no CHECK: threads call it). */
static int ingest_value(store_t *s, int64_t t, int64_t value) {
    batch_t b;
    batch_init(&b);
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "svc");
    batch_profile_t *p = batch_profile(&b, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &l, t, 10);
    const char *a[] = {"main", "a"};
    batch_sample(p, make_stack(b.sym, a, 2), value);
    hr_err_t err = {0};
    int rc = store_ingest(s, "anonymous", "rec", 3, &b, NULL, &err);
    labels_destroy(&l);
    batch_destroy(&b);
    return rc;
}

static void ingest_one(store_t *s, int64_t t, int64_t value) { CHECK(ingest_value(s, t, value) == 0); }

/* A cut freezes the heads and stores them while ingest goes on into new ones. One
 * that fails keeps its frozen heads, still queried, for the next cut, which stores
 * them and no more; the WAL checkpoint then covers exactly them. */
void test_failed_cut_keeps_its_frozen_heads(void) {
    char dir[512], path[600];
    unit_tmpdir("frozen", dir, sizeof dir);
    store_config_t cfg = small_store(dir);
    hr_err_t err = {0};
    store_t *s = open_store(&cfg);
    ingest_one(s, 5000, 40);
    snprintf(path, sizeof path, "%s/blocks/anonymous", dir); /* a file where the block's folder goes */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK(store_cut(s, &err) == -1);
    ingest_one(s, 6000, 2); /* into a new head, beside the frozen one */
    int64_t got[2] = {0, 0};
    CHECK(store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err) == 0);
    CHECK(got[0] == 42 && got[1] == 2);
    store_stats_t st;
    store_stats(s, &st);
    CHECK(st.blocks == 0 && st.head_profiles == 2);
    CHECK(store_maybe_cut(s, &err) == -1); /* due while a frozen head waits: tried again, fails again */
    CHECK(unlink(path) == 0);
    CHECK(store_maybe_cut(s, &err) == 1);
    store_stats(s, &st);
    CHECK(st.blocks == 1 && st.head_profiles == 1); /* the frozen head alone became the block */
    memset(got, 0, sizeof got);
    CHECK(store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = 10000}, count_segments, got, &err) == 0);
    CHECK(got[0] == 42 && got[1] == 2);
    store_close(s);
    s = store_open(&cfg, &err);
    wal_scan_t ws;
    CHECK(s && store_replay(s, NULL, NULL, &ws, &err) == 0 && ws.records == 1); /* the second upload only */
    store_close(s);
}

typedef struct {
    store_t *s;
    _Atomic int done, failed; /* the threads' failures, checked by the test's own thread */
    int64_t mismatches, scans;
} race_t;

static void *ingest_many(void *arg) {
    race_t *r = arg;
    for (int i = 0; i < 3000; i++) r->failed |= ingest_value(r->s, 1000 + i, 1) != 0;
    r->done = 1;
    return NULL;
}

static void *cut_often(void *arg) {
    race_t *r = arg;
    hr_err_t err = {0};
    while (!r->done) r->failed |= store_cut(r->s, &err) != 0;
    return NULL;
}

typedef struct {
    int64_t got[2][2];
    size_t pass;
} passes_t;

static void on_pass(void *ctx, size_t k) { ((passes_t *)ctx)->pass = k; }

static int count_pass(void *ctx, const segment_t *seg) {
    passes_t *p = ctx;
    return count_segments(p->got[p->pass], seg);
}

/* Ingest, cuts and two-pass scans at once: a scan's passes see the same profiles
 * (ingest appends to the heads meanwhile, and cuts freeze and swap them), and in the
 * end every upload is counted once. TSan's run of this is the lock check. */
void test_ingest_cut_and_scan_at_once(void) {
    char dir[512];
    unit_tmpdir("race", dir, sizeof dir);
    store_config_t cfg = small_store(dir);
    hr_err_t err = {0};
    race_t r = {.s = open_store(&cfg)};
    pthread_t ti, tc;
    CHECK(pthread_create(&ti, NULL, ingest_many, &r) == 0 && pthread_create(&tc, NULL, cut_often, &r) == 0);
    store_filter_t f[2] = {{.from = 0, .until = 10000}, {.from = 0, .until = 10000}};
    while (!r.done) {
        passes_t p = {0};
        CHECK(store_scan_passes(r.s, "anonymous", f, 2, on_pass, count_pass, &p, &err) == 0);
        r.mismatches += p.got[0][1] != p.got[1][1];
        r.scans++;
    }
    pthread_join(ti, NULL);
    pthread_join(tc, NULL);
    CHECK(store_cut(r.s, &err) == 0);
    int64_t got[2] = {0, 0};
    CHECK(store_scan(r.s, "anonymous", &f[0], count_segments, got, &err) == 0);
    CHECK(got[0] == 3000 && got[1] == 3000 && r.mismatches == 0 && r.scans > 0 && !r.failed);
    store_close(r.s);
}

void test_retention(void) {
    char dir[512];
    unit_tmpdir("retention", dir, sizeof dir);
    const int64_t H = 3600LL * 1000000000, now = 1000 * H;
    store_config_t cfg = small_store(dir);
    cfg.retention_ns = 24 * H;
    hr_err_t err = {0};
    store_t *s = open_store(&cfg);
    ingest_one(s, now - 48 * H, 5); /* two days old */
    CHECK(store_cut(s, &err) == 0);
    ingest_one(s, now - H, 7);
    CHECK(store_cut(s, &err) == 0);
    CHECK_INT(store_apply_retention(s, now, &err), 1);
    CHECK_INT(store_apply_retention(s, now, &err), 0); /* idempotent */
    int64_t got[2] = {0, 0};
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = now}, count_segments, got, &err);
    CHECK(got[0] == 7 && got[1] == 1);
    store_close(s);
    s = open_store(&cfg); /* the catalog agrees after a reopen */
    memset(got, 0, sizeof got);
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = now}, count_segments, got, &err);
    CHECK(got[0] == 7 && got[1] == 1);
    store_stats_t st;
    store_stats(s, &st);
    CHECK_INT(st.blocks, 1);
    store_close(s);
    char path[700];
    snprintf(path, sizeof path, "%s/blocks/anonymous/00000001.blk", dir);
    CHECK(access(path, F_OK) != 0); /* the old block's file is gone */
}

/* Sums value by the leaf function name of each sample, for comparing segments
 * whose stack ids differ. */
static int64_t leaf_total(const segment_t *s, const char *leaf) {
    int64_t sum = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        const sym_stack_t *st = &s->sym->stacks[s->stacks[i]];
        const sym_location_t *loc = &s->sym->locations[st->location];
        const sym_function_t *f = &s->sym->functions[s->sym->lines[loc->first_line].function];
        if (!strcmp(symtab_str(s->sym, f->name), leaf)) sum += s->values[i];
    }
    return sum;
}

void test_segment_merge(void) {
    segment_t *a = sample_segment(), *b = sample_segment();
    const char *c[] = {"main", "c"};
    uint32_t sc = make_stack(b->sym, c, 2);
    int64_t v = 11;
    segment_add(b, 3, 3000, 10, &sc, &v, 1);
    hr_err_t err = {0};
    const segment_t *in[] = {a, b};
    segment_t *m = segment_merge(in, 2, &err);
    CHECK(m != NULL);
    if (m) {
        CHECK_INT(m->nprofiles, a->nprofiles + b->nprofiles);
        CHECK_INT(m->nsamples, a->nsamples + b->nsamples);
        CHECK_INT(m->min_time, 1000);
        CHECK_INT(m->max_time, 3000);
        CHECK_INT(leaf_total(m, "a"), 2 * leaf_total(a, "a"));
        CHECK_INT(leaf_total(m, "b"), 2 * leaf_total(a, "b"));
        CHECK_INT(leaf_total(m, "c"), 11);
        CHECK_INT(m->sym->nstrings, b->sym->nstrings); /* a's symbols were all in b: stored once */
        CHECK_INT(m->sym->nstacks, b->sym->nstacks);
        for (size_t i = 0; i < m->nprofiles; i++) { /* every row kept, totals intact */
            const seg_profile_t *p = &m->profiles[i],
                                *q = i < a->nprofiles ? &a->profiles[i] : &b->profiles[i - a->nprofiles];
            CHECK(p->series == q->series && p->time_ns == q->time_ns && p->total == q->total &&
                  p->nsamples == q->nsamples);
        }
    }
    segment_free(m);
    segment_free(a);
    segment_free(b);
}

void test_store_compaction(void) {
    char dir[512];
    unit_tmpdir("compaction", dir, sizeof dir);
    const int64_t H = 3600LL * 1000000000, day0 = 1000 * 24 * H;
    store_config_t cfg = small_store(dir);
    cfg.compact_min_blocks = 2, cfg.compact_max_bytes = 1 << 20;
    hr_err_t err = {0};
    store_t *s = open_store(&cfg);
    int64_t times[] = {day0 + H, day0 + 2 * H, day0 + 3 * H, day0 + 25 * H}; /* the last is the next day */
    for (int i = 0; i < 4; i++) {
        ingest_one(s, times[i], i + 1);
        CHECK(store_cut(s, &err) == 0);
    }
    CHECK_INT(store_compact(s, &err), 1);
    CHECK_INT(store_compact(s, &err), 0); /* one day's blocks merged; the other day stays apart */
    store_stats_t st;
    store_stats(s, &st);
    CHECK_INT(st.blocks, 2);
    CHECK_INT(st.compacted_blocks, 3);
    int64_t sums[2] = {0, 0};
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = day0 + 48 * H}, count_segments, sums, &err);
    CHECK(sums[0] == 1 + 2 + 3 + 4 && sums[1] == 4);
    store_close(s);
    s = open_store(&cfg); /* the catalog agrees after a reopen; the old files are gone */
    memset(sums, 0, sizeof sums);
    store_scan(s, "anonymous", &(store_filter_t){.from = 0, .until = day0 + 48 * H}, count_segments, sums, &err);
    CHECK(sums[0] == 10 && sums[1] == 4);
    store_stats(s, &st);
    CHECK_INT(st.blocks, 2);
    store_close(s);
    for (int id = 1; id <= 3; id++) {
        char path[700];
        snprintf(path, sizeof path, "%s/blocks/anonymous/%08d.blk", dir, id);
        CHECK(access(path, F_OK) != 0);
    }
}

/* A read of a window inside a partition holds exactly the rows in it, each as written
 * (their samples decoded, the others' stepped over), and no span samples; a whole read
 * gives every row back. */
void test_block_window_reads(void) {
    enum { NST = 300, SERIES = 3, ROWS = 48 }; /* 8 hours of 10-minute profiles per series */
    const int64_t HOUR = 3600000000000LL, T0 = 1700000000LL / 3600 * 3600 * 1000000000LL;
    segment_t *s = segment_new();
    uint32_t st[NST];
    int64_t v[NST];
    for (int k = 0; k < NST; k++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", k);
        const char *names[] = {"main", name};
        st[k] = make_stack(s->sym, names, 2);
    }
    for (int r = 0; r < ROWS; r++)
        for (uint32_t series = 0; series < SERIES; series++) {
            int n = NST - (r * 7 + (int)series * 13) % 200;                         /* rows of different lengths */
            for (int k = 0; k < n; k++) v[k] = (k % 7 + 1 + r) * (k % 3 ? 1 : 200); /* varints of 1-3 bytes */
            CHECK(segment_add(s, series, T0 + r * HOUR / 6 + series, 10, st, v, (size_t)n) == 0);
        }
    char dir[512], path[600];
    unit_tmpdir("blkwindow", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.blk", dir);
    hr_err_t err = {0};
    size_t bytes = 0;
    CHECK(block_write(path, s, NULL, NULL, 3, &bytes, &err) == 0);
    block_index_t *ix = block_index_read(path, &err);
    block_src_t src;
    CHECK(ix && ix->nparts == 1 && block_src_file(&src, path, &err) == 0);
    block_window_t win = {T0 + 5 * HOUR + 600000000000LL, T0 + 6 * HOUR - 1}; /* 05:10 to 06:00 */
    CHECK(ix && block_window_narrows(&ix->parts[0], &win));
    segment_t *part = ix ? block_read_part_src(&src, ix, 0, BLOCK_VIEW_ROWS, &win, &err) : NULL;
    CHECK(part && part->nprofiles == SERIES * 5 && part->nspans == 0);
    size_t found = 0;
    for (size_t i = 0; part && i < s->nprofiles; i++) {
        const seg_profile_t *a = &s->profiles[i];
        if (a->time_ns < win.from || a->time_ns > win.until) continue;
        for (size_t j = 0; j < part->nprofiles; j++) {
            const seg_profile_t *b = &part->profiles[j];
            if (b->series != a->series || b->time_ns != a->time_ns) continue;
            found += b->total == a->total && b->nsamples == a->nsamples &&
                     !memcmp(&s->values[a->first], &part->values[b->first], a->nsamples * sizeof *s->values) &&
                     !memcmp(&s->stacks[a->first], &part->stacks[b->first], a->nsamples * sizeof *s->stacks);
        }
    }
    CHECK_INT(found, SERIES * 5);
    segment_free(part);
    block_window_t all = {T0 - 1, T0 + 9 * HOUR};
    CHECK(ix && !block_window_narrows(&ix->parts[0], &all));
    part = ix ? block_read_part_src(&src, ix, 0, BLOCK_VIEW_ROWS, &all, &err) : NULL;
    CHECK(part && part->nprofiles == s->nprofiles && part->nsamples == s->nsamples);
    segment_free(part);
    block_index_free(ix);
    segment_free(s);
}
