/* test_symbolize.c - the resolver (DWARF, Go pclntab), the persisted cache and the
 * rewrite of a merge's symtab, against the shared test binaries
 * (../shared/testdata/symbolize, SOURCES.md gives the answers). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/cache.h"
#include "symbolize/elf.h"
#include "symbolize/pclntab.h"
#include "symbolize/symbolizer.h"
#include "tests/unit/unit.h"

#define PARCA_ID "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"
#define MAIN_GO "/home/brancz/src/github.com/polarsignals/pprof-labels-example/main.go"

static void path_of(const char *rel, char *out, size_t n) { snprintf(out, n, "%s/symbolize/%s", U.testdata, rel); }

static void check_frame(const frames_t *f, size_t i, const char *name, const char *file, int64_t line) {
    CHECK(i < f->n);
    if (i >= f->n) return;
    CHECK_STR(f->v[i].name, name);
    CHECK_STR(f->v[i].file, file);
    CHECK_INT(f->v[i].line, line);
}

void test_symbolize_dwarf_inlines(void) {
    char p[1024];
    path_of(PARCA_ID ".debuginfo", p, sizeof p);
    hr_err_t err = {0};
    elfobj_t *o = elfobj_open(p, &err);
    CHECK(o != NULL);
    if (!o) return;
    frames_t f = {0};
    /* An executable: the mapping (0x400000, offset 0) leaves the address as it is. */
    CHECK_INT(elfobj_normalize(o, 0x463784, 0x400000, 0x464000, 0), 0x463784);
    CHECK_INT(elfobj_resolve(o, 0x463784, &f), 3);
    check_frame(&f, 0, "main.iterate", MAIN_GO, 27);
    check_frame(&f, 1, "main.iteratePerTenant", MAIN_GO, 23);
    check_frame(&f, 2, "main.main", MAIN_GO, 10);
    frames_clear(&f);
    CHECK_INT(elfobj_resolve(o, 0x10, &f), 0); /* below the text: nothing */
    frames_destroy(&f);
    elfobj_close(o);
    /* Not ELF: an error value, not a crash. */
    path_of("SOURCES.md", p, sizeof p);
    CHECK(elfobj_open(p, &err) == NULL && err.code == HR_EUNPROC);
}

void test_symbolize_pclntab(void) {
    char p[1024];
    path_of("go-example-app-stripped.debuginfo", p, sizeof p);
    hr_err_t err = {0};
    elfobj_t *o = elfobj_open(p, &err);
    CHECK(o != NULL);
    if (!o) return;
    frames_t f = {0};
    CHECK_INT(elfobj_resolve(o, 0x6491de, &f), 1);
    check_frame(&f, 0, "github.com/polarsignals/pprof-example-app-go/fib.Fibonacci",
                "github.com/polarsignals/pprof-example-app-go/fib/fib.go", 13);
    frames_clear(&f);
    CHECK_INT(elfobj_resolve(o, 0x4d460e, &f), 1);
    check_frame(&f, 0, "math/big.(*Int).Add", "math/big/int.go", 116);
    frames_destroy(&f);
    elfobj_close(o);
    /* The table itself, cut at every length up to its header and the first functions:
     * refused or answering, never reading past the cut (ASan watches). */
    size_t n;
    unsigned char *elf = unit_read("symbolize/go-example-app-stripped.debuginfo", &n);
    const size_t off = 0x30a0; /* .gopclntab's file offset (readelf -S) */
    int opened = 0;
    for (size_t cut = 0; cut < 4096 && off + cut <= n; cut += 7) {
        unsigned char *copy = malloc(cut ? cut : 1);
        memcpy(copy, elf + off, cut);
        pclntab_t *t = pclntab_open(copy, cut, &err);
        if (t) {
            opened++;
            frames_t g = {0};
            pclntab_resolve(t, 0x6491de, &g);
            pclntab_resolve(t, 0x401000, &g);
            frames_destroy(&g);
            pclntab_free(t);
        }
        free(copy);
    }
    CHECK_INT(opened, 0); /* the function table is longer than 4 KiB: every cut is refused */
    free(elf);
}

void test_symbolize_cache_persists(void) {
    char dir[512], p[600];
    unit_tmpdir("symcache", dir, sizeof dir);
    snprintf(p, sizeof p, "%s/" PARCA_ID, dir);
    hr_err_t err = {0};
    symcache_t *c = symcache_open(p, &err);
    CHECK(c != NULL);
    if (!c) return;
    frames_t f = {0}, empty = {0};
    frames_push(&f, "main.iterate", NULL, "main.go", 27);
    frames_push(&f, "main.main", "main.main", "main.go", 10);
    CHECK_INT(symcache_put(c, 0x63784, &f), 0);
    CHECK_INT(symcache_put(c, 0x10, &empty), 0);
    symcache_close(c);
    /* A torn record at the end is cut when the file is opened again. */
    int fd = open(p, O_WRONLY | O_APPEND);
    CHECK(write(fd, "\x40\x00\x00\x00garbage", 11) == 11);
    close(fd);
    c = symcache_open(p, &err);
    CHECK(c != NULL);
    if (!c) return frames_destroy(&f);
    CHECK_INT(symcache_count(c), 2);
    frames_t g = {0};
    CHECK_INT(symcache_get(c, 0x63784, &g), 1);
    CHECK_INT(g.n, 2);
    check_frame(&g, 0, "main.iterate", "main.go", 27);
    check_frame(&g, 1, "main.main", "main.go", 10);
    CHECK_STR(g.v[0].system_name, "main.iterate");
    frames_clear(&g);
    CHECK_INT(symcache_get(c, 0x10, &g), 1); /* cached as covering nothing */
    CHECK_INT(g.n, 0);
    CHECK_INT(symcache_get(c, 0x11, &g), 0);
    symcache_close(c);
    /* The torn tail is gone from the file: header + two records. */
    FILE *fp = fopen(p, "rb");
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fclose(fp);
    CHECK(size > 8 && size < 120);
    frames_destroy(&f);
    frames_destroy(&g);
}

/* A merge-like symtab: one mapping with PARCA_ID, one address-only location, one stack. */
static symtab_t *address_only(uint32_t *loc) {
    symtab_t *t = symtab_new();
    sym_mapping_t m = {.start = 0x400000,
                       .limit = 0x464000,
                       .filename = symtab_string(t, "/main", 5),
                       .build_id = symtab_string(t, PARCA_ID, strlen(PARCA_ID))};
    uint32_t mid = symtab_mapping(t, &m);
    *loc = symtab_location(t, mid, 0x463784, NULL, 0);
    symtab_stack(t, 0, *loc);
    return t;
}

void test_symbolize_rewrite(void) {
    char data[512], local[1024];
    unit_tmpdir("symdata", data, sizeof data);
    snprintf(local, sizeof local, "%s/symbolize", U.testdata);
    hr_err_t err = {0};
    debuginfo_config_t dc = {.data_dir = data, .local_dir = local, .debuginfod_urls = "", .negative_ttl_ns = 1};
    debuginfo_t *d = debuginfo_new(&dc, &err);
    symbolizer_t *s = d ? symbolizer_new(d, data, &err) : NULL;
    CHECK(s != NULL);
    if (!s) return debuginfo_free(d);
    for (int round = 0; round < 2; round++) {
        uint32_t loc;
        symtab_t *t = address_only(&loc);
        symbolize_stats_t st;
        CHECK_INT(symbolizer_rewrite(s, t, 0, &st, &err), 0);
        CHECK_INT(st.resolved, 1);
        CHECK_INT(st.cached, round); /* the second symtab is answered from the cache */
        const sym_location_t *l = &t->locations[loc];
        CHECK_INT(l->nlines, 3);
        CHECK_STR(symtab_str(t, t->functions[t->lines[l->first_line].function].name), "main.iterate");
        CHECK_INT(t->lines[l->first_line + 2].line, 10);
        /* The location is findable by its new content: interning it again gives the same id. */
        CHECK_INT(symtab_location(t, l->mapping, 0x463784, t->lines + l->first_line, 3), loc);
        symtab_free(t);
    }
    /* Deadline passed before anything new could be resolved: the address keeps its name. */
    symbolizer_invalidate(s, PARCA_ID);
    uint32_t loc;
    symtab_t *t = address_only(&loc);
    symbolize_stats_t st;
    CHECK_INT(symbolizer_rewrite(s, t, 1, &st, &err), 0);
    CHECK_INT(st.late, 1);
    CHECK_STR(symtab_str(t, t->functions[t->lines[t->locations[loc].first_line].function].name), "main!0x463784");
    symtab_free(t);
    symbolizer_free(s);
    debuginfo_free(d);
}
