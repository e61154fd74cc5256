/* main.c - allocation-failure and I/O-fault injection over ingest, cut, compaction
 * and query, SQLite's way (the I/O faults: see "I/O faults" below).
 *
 * For each path below and N = 1, 2, 3, ... the Nth allocation Hearth's own code
 * makes during the operation fails (inject.h), until the operation completes
 * without reaching the Nth. Each time:
 *   - nothing crashes (the binary is built with ASan and UBSan, asserts on);
 *   - the operation returns its documented error, -1 with HR_ENOMEM, or copes and
 *     answers exactly what a run without failures answers;
 *   - the store still holds exactly what it held before: the same answers, also
 *     after closing and reopening it (WAL replay);
 *   - a retry succeeds and answers what a run without failures answers;
 *   - nothing leaks (LeakSanitizer, checked after each path).
 * A path with more allocations than STEPS is stepped through in a stride, and says
 * so. argv[1] is the shared testdata directory; argv[2], when given, runs only the
 * paths whose names contain it. Ends with "N passed, N failed" (paths). */
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "ingest/request.h"
#include "query/catalog.h"
#include "query/heatmap.h"
#include "query/merge.h"
#include "query/render.h"
#include "query/selector.h"
#include "query/tree.h"
#include "storage/store.h"
#include "symbolize/symbolizer.h"
#include "tests/oom/faultvfs.h"
#include "tests/oom/inject.h"
#include "tests/oom/otlp_body.h"
#include "tests/unit/unit.h"

unit_t U;

#define S 1000000000LL
#define T0 (1699920000LL + 3600) /* 2023-11-14 01:00 UTC: every upload within one day, so they compact */
#define STEPS 1500               /* at most this many N per path; more allocations are strided */

/* ---- the data: real profiles, uploaded as the server uploads them ---- */

typedef struct {
    const char *file, *name;
    ingest_format_t format;
    int64_t at_s;
    unsigned char *body;
    size_t len;
} upload_t;

static upload_t UPLOADS[] = {
    {"pprof/go-runtime-cpu-01.pb.gz", "web{env=prod}", INGEST_PPROF, T0, NULL, 0},
    {"pprof/go-runtime-cpu-00.pb.gz", "api{env=prod}", INGEST_PPROF, T0 + 60, NULL, 0},
    {"pprof/go-runtime-heap.pb.gz", "api{env=prod}", INGEST_PPROF, T0 + 120, NULL, 0},
    /* The CPU profile again, as an OTLP request (otlp_body.h): the body names the series. */
    {"pprof/go-runtime-cpu-00.pb.gz", "", INGEST_OTLP_PROTO, T0 + 180, NULL, 0},
};

/* An address-only profile (symbolize/SOURCES.md): uploaded by the symbolization path only. */
static upload_t NATIVE = {"symbolize/parca-main.cpu.pb.gz", "native", INGEST_PPROF, T0, NULL, 0};

static ingest_request_t request_of(const upload_t *u) {
    return (ingest_request_t){.tenant = "anonymous",
                              .name = u->name,
                              .format = u->format,
                              .has_from = 1,
                              .from_ns = u->at_s * S,
                              .received_ns = u->at_s * S,
                              .sample_rate = 100,
                              .body = u->body,
                              .body_len = u->len};
}

static const ingest_limits_t LIMITS = {64 << 20, 0, 64, NULL, 2048};

/* Decodes and stores one upload, logged in the WAL as the server logs it. */
static int upload(store_t *s, const upload_t *u, hr_err_t *err) {
    ingest_request_t r = request_of(u);
    buf_t rec;
    buf_init(&rec);
    ingest_request_encode(&r, &rec);
    batch_t b;
    int rc = rec.oom || batch_init(&b) ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
    if (rc == 0) {
        rc = ingest_to_batch(&r, &LIMITS, &b, err);
        if (rc == 0) rc = store_ingest(s, r.tenant, rec.data, rec.len, &b, NULL, err);
        batch_destroy(&b);
    }
    buf_free(&rec);
    return rc;
}

/* WAL replay, as server/main.c does it. */
static int replay_one(void *ctx, const uint8_t *p, size_t n) {
    store_t *s = ctx;
    ingest_request_t r;
    hr_err_t err = {0};
    batch_t b;
    if (ingest_request_decode(p, n, &r, &err) || batch_init(&b)) return -1;
    int rc = ingest_to_batch(&r, &LIMITS, &b, &err);
    if (rc == 0) rc = store_apply(s, r.tenant, &b, &err);
    batch_destroy(&b);
    return rc;
}

/* ---- the store under test ---- */

typedef struct {
    char dir[512];
    store_config_t cfg;
    store_t *s;
    /* what an operation made, for its answer; freed by release() */
    merge_result_t m;
    buf_t out;
    merge_result_t base; /* a merge the render paths start from, made when the store is built */
    debuginfo_t *di;     /* the symbolization path's sources and symbolizer */
    symbolizer_t *sym;
} subject_t;

static store_t *open_store(subject_t *x) {
    hr_err_t err = {0};
    wal_scan_t ws;
    store_t *s = store_open(&x->cfg, &err);
    if (s && store_replay(s, replay_one, s, &ws, &err)) {
        store_close(s);
        s = NULL;
    }
    if (!s) fprintf(stderr, "oom: cannot open %s: %s\n", x->dir, err.msg);
    return s;
}

static void subject_init(subject_t *x, const char *name) {
    static int seq;
    char rel[64];
    snprintf(rel, sizeof rel, "%s-%d", name, seq++);
    memset(x, 0, sizeof *x);
    unit_tmpdir(rel, x->dir, sizeof x->dir);
    /* A cache of 0 bytes: every query decodes the partitions it reads, under test too. */
    x->cfg = (store_config_t){.data_dir = x->dir,
                              .fsync = WAL_FSYNC_NONE,
                              .head_max_bytes = 64 << 20,
                              .block_duration_ns = 3600 * S,
                              .zstd_level = 3,
                              .block_cache_bytes = 0,
                              .retention_ns = 0,
                              .compact_min_blocks = 2,
                              .compact_max_bytes = 64 << 20};
    x->s = open_store(x);
    buf_init(&x->out);
}

static void subject_reopen(subject_t *x) {
    store_close(x->s);
    x->s = open_store(x);
}

static void subject_destroy(subject_t *x) {
    symbolizer_free(x->sym);
    debuginfo_free(x->di);
    merge_result_destroy(&x->base);
    store_close(x->s);
    unit_rmtree(x->dir);
}

static void must(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "oom: setting up failed: %s\n", what);
    exit(2);
}

/* What the store holds, as queries see it: per profile type the merged stacks
 * (folded) and the profile list. Ranged, so the types are those with a profile: an
 * ingest that fails after creating its series leaves them known without data, as
 * retention leaves series (store.h). */
static void store_answer(store_t *s, buf_t *out) {
    hr_err_t err = {0};
    catalog_query_t q = {"anonymous", NULL, 1, 0, (T0 + 86400) * S, 0};
    catalog_types_t types = {0};
    must(catalog_profile_types(s, &q, 1, &types, &err) == 0, err.msg);
    for (size_t i = 0; i < types.n; i++) {
        selector_t sel;
        must(selector_parse(types.v[i].id, &sel, &err) == 0, err.msg);
        merge_query_t mq = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = (T0 + 86400) * S, .want_stacks = 1};
        merge_result_t m;
        tree_t t = {0};
        must(merge_run(s, &mq, &m, &err) == 0 && tree_build(&t, &m, &err) == 0, err.msg);
        buf_printf(out, "%s: %llu profiles, total %.0f\n", types.v[i].id, (unsigned long long)m.profiles, m.total);
        must(render_folded(&t, out) == 0, "render_folded");
        catalog_query_t pq = {"anonymous", &sel, 0, 0, (T0 + 86400) * S, 0};
        catalog_profile_t *list;
        size_t n;
        must(catalog_profiles(s, &pq, &list, &n, &err) == 0, err.msg);
        for (size_t k = 0; k < n; k++)
            buf_printf(out, "profile %u@%lld: %lld\n", list[k].series, (long long)list[k].time_ns,
                       (long long)list[k].total);
        free(list);
        tree_destroy(&t);
        merge_result_destroy(&m);
        selector_destroy(&sel);
    }
    free(types.v);
    must(!out->oom, "store_answer");
    buf_putc(out, 0);
}

/* ---- the paths ---- */

typedef struct {
    const char *name;
    int changes_store;                        /* a fresh store for every N; the store's answers are compared */
    void (*build)(subject_t *x);              /* fills the store the operation starts from */
    int (*op)(subject_t *x, hr_err_t *err);   /* 0, or -1 with err */
    void (*answer)(subject_t *x, buf_t *out); /* what the operation answered; NULL: only the store counts */
} path_t;

static void build_one(subject_t *x) {
    hr_err_t err = {0};
    must(upload(x->s, &UPLOADS[0], &err) == 0, err.msg);
}

/* Two blocks and a head: web, then api's cpu, cut apart; api's heap in the head. */
static void build_blocks_and_head(subject_t *x) {
    hr_err_t err = {0};
    for (size_t i = 0; i < 3; i++) {
        must(upload(x->s, &UPLOADS[i], &err) == 0, err.msg);
        if (i < 2) must(store_cut(x->s, &err) == 0, err.msg);
    }
}

/* Three blocks, due for compaction. */
static void build_three_blocks(subject_t *x) {
    hr_err_t err = {0};
    for (size_t i = 0; i < 3; i++) must(upload(x->s, &UPLOADS[i], &err) == 0 && store_cut(x->s, &err) == 0, err.msg);
}

/* A head holding every upload, over one block. */
static void build_for_cut(subject_t *x) {
    hr_err_t err = {0};
    must(upload(x->s, &UPLOADS[0], &err) == 0 && store_cut(x->s, &err) == 0, err.msg);
    for (size_t i = 1; i < 3; i++) must(upload(x->s, &UPLOADS[i], &err) == 0, err.msg);
}

static int op_ingest_cpu(subject_t *x, hr_err_t *err) { return upload(x->s, &UPLOADS[1], err); }
static int op_ingest_heap(subject_t *x, hr_err_t *err) { return upload(x->s, &UPLOADS[2], err); }
static int op_ingest_otlp(subject_t *x, hr_err_t *err) { return upload(x->s, &UPLOADS[3], err); }
static int op_cut(subject_t *x, hr_err_t *err) { return store_cut(x->s, err); }

static int op_compact(subject_t *x, hr_err_t *err) {
    int rc = store_compact(x->s, err);
    if (rc == 0) return hr_fail(err, HR_OK, "store_compact did not compact a due run"), -1;
    return rc == 1 ? 0 : -1;
}

/* Discovery: series selection, label values, types and the profile list. */
static int op_catalog(subject_t *x, hr_err_t *err) {
    selector_t sel; /* destroyed also after a failure (selector.h) */
    if (selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{env=\"prod\"}", &sel, err))
        return selector_destroy(&sel), -1;
    catalog_query_t q = {"anonymous", &sel, 1, 0, (T0 + 86400) * S, 0};
    catalog_strings_t vals = {0};
    catalog_types_t types = {0};
    catalog_profile_t *list = NULL;
    size_t n = 0;
    int rc = catalog_label_values(x->s, &q, 1, "service_name", &vals, err);
    if (rc == 0) rc = catalog_profile_types(x->s, &q, 1, &types, err);
    if (rc == 0) rc = catalog_profiles(x->s, &q, &list, &n, err);
    for (size_t i = 0; rc == 0 && i < vals.n; i++) buf_printf(&x->out, "service_name=%s\n", vals.v[i]);
    for (size_t i = 0; rc == 0 && i < types.n; i++) buf_printf(&x->out, "type %s\n", types.v[i].id);
    for (size_t i = 0; rc == 0 && i < n; i++)
        buf_printf(&x->out, "profile %u@%lld: %lld\n", list[i].series, (long long)list[i].time_ns,
                   (long long)list[i].total);
    if (rc == 0 && x->out.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory"); /* buf.c is Hearth's too */
    free(vals.v);
    free(types.v);
    free(list);
    selector_destroy(&sel);
    return rc;
}

static int merge_type(subject_t *x, const char *type, hr_err_t *err) {
    selector_t sel;
    if (selector_parse(type, &sel, err)) return selector_destroy(&sel), -1;
    merge_query_t q = {
        .tenant = "anonymous", .sel = &sel, .from = T0 * S, .until = (T0 + 3600) * S, .step = 30 * S, .want_stacks = 1};
    int rc = merge_run(x->s, &q, &x->m, err);
    selector_destroy(&sel);
    return rc;
}

static int op_merge_cpu(subject_t *x, hr_err_t *err) {
    return merge_type(x, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", err);
}

/* pprof's focus/ignore/hide: a keep mask per segment, then the frames rewritten. */
static int op_merge_filtered(subject_t *x, hr_err_t *err) {
    selector_t sel;
    if (selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds", &sel, err)) return selector_destroy(&sel), -1;
    hr_regex_t *focus = hr_regex_compile("main|runtime", err), *ignore = NULL, *hide = NULL;
    if (focus) ignore = hr_regex_compile("no such function", err);
    if (ignore) hide = hr_regex_compile("^runtime\\.", err);
    stackfilter_t f = {focus, ignore, hide};
    merge_query_t q = {.tenant = "anonymous",
                       .sel = &sel,
                       .from = T0 * S,
                       .until = (T0 + 3600) * S,
                       .step = 30 * S,
                       .want_stacks = 1,
                       .filter = &f};
    int rc = hide ? merge_run(x->s, &q, &x->m, err) : -1;
    hr_regex_free(focus);
    hr_regex_free(ignore);
    hr_regex_free(hide);
    selector_destroy(&sel);
    return rc;
}

/* A gauge: averaged per series, so the merge counts profiles first. */
static int op_merge_heap(subject_t *x, hr_err_t *err) {
    return merge_type(x, "memory:inuse_space:bytes:space:bytes", err);
}

/* SelectHeatmap's builder: groups by service, profiles per cell, exemplars labelled. */
static int op_heatmap(subject_t *x, hr_err_t *err) {
    selector_t sel;
    if (selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds", &sel, err)) return selector_destroy(&sel), -1;
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = T0 * S, .until = (T0 + 3600) * S, .step = 60 * S};
    char *names[] = {"service_name"};
    heatmap_t h;
    int rc = heatmap_run(x->s, &q, &sel, names, 1, 0, HEATMAP_PROFILES, 1, &h, err);
    for (size_t g = 0; rc == 0 && g < h.g.n; g++)
        for (size_t k = 0; k < h.s[g].n; k++)
            for (int b = 0; b < HEATMAP_BUCKETS; b++) {
                const heatmap_slot_t *sl = &h.s[g].slots[k];
                if (!sl->counts[b]) continue;
                const exemplar_t *e = &sl->ex[b];
                buf_printf(&x->out, "%s %lld [%d] %d: %lld@%lld", h.g.v[g].vals[0], (long long)sl->end_ns, b,
                           sl->counts[b], (long long)e->p.total, (long long)e->p.time_ns);
                for (size_t i = 0; i < e->labels.n; i++)
                    buf_printf(&x->out, " %s=%s", e->labels.v[i].name, e->labels.v[i].value);
                buf_putc(&x->out, '\n');
            }
    if (rc == 0 && x->out.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    heatmap_destroy(&h);
    selector_destroy(&sel);
    return rc;
}

/* The merge, its timeline and its stacks. */
static void answer_merge(subject_t *x, buf_t *out) {
    const merge_result_t *m = &x->m;
    buf_printf(out, "%llu profiles, total %.0f, %lld..%lld\n", (unsigned long long)m->profiles, m->total,
               (long long)m->first_ns, (long long)m->end_ns);
    for (size_t i = 0; i < m->nbuckets; i++) buf_printf(out, "%.3f ", m->timeline[i]);
    tree_t t = {0};
    hr_err_t err = {0};
    must(tree_build(&t, &x->m, &err) == 0 && render_folded(&t, out) == 0, "answer_merge");
    tree_destroy(&t);
}

/* The address-only profile and a symbolizer over the shared debug files. */
static void build_native(subject_t *x) {
    hr_err_t err = {0};
    char local[1024];
    snprintf(local, sizeof local, "%s/symbolize", U.testdata);
    must(upload(x->s, &NATIVE, &err) == 0, err.msg);
    debuginfo_config_t dc = {.data_dir = x->dir, .local_dir = local, .debuginfod_urls = "", .negative_ttl_ns = S};
    must((x->di = debuginfo_new(&dc, &err)) && (x->sym = symbolizer_new(x->di, x->dir, &err)), err.msg);
}

/* A merge that symbolizes, from the debug file each time: the cache is dropped first. */
static int op_merge_symbolized(subject_t *x, hr_err_t *err) {
    symbolizer_invalidate(x->sym, "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085");
    selector_t sel;
    if (selector_parse("process_cpu:samples:count:cpu:nanoseconds", &sel, err)) return selector_destroy(&sel), -1;
    merge_query_t q = {.tenant = "anonymous",
                       .sel = &sel,
                       .from = T0 * S,
                       .until = (T0 + 3600) * S,
                       .want_stacks = 1,
                       .symbolizer = x->sym};
    int rc = merge_run(x->s, &q, &x->m, err);
    selector_destroy(&sel);
    return rc;
}

/* The store of the query paths, and the cpu merge the renderers read. */
static void build_for_render(subject_t *x) {
    build_blocks_and_head(x);
    hr_err_t err = {0};
    must(op_merge_cpu(x, &err) == 0, err.msg);
    x->base = x->m;
    memset(&x->m, 0, sizeof x->m);
}

static int render_as(subject_t *x, const char *format, render_kind_t kind, hr_err_t *err) {
    render_args_t a = {
        .m = &x->base, .right = kind == RENDER_DIFF ? &x->base : NULL, .max_nodes = RENDER_DEFAULT_MAX_NODES};
    return query_render(render_find(format, kind), &a, &x->out, err);
}

static int op_flamegraph(subject_t *x, hr_err_t *err) { return render_as(x, "flamegraph", RENDER_MERGE, err); }
static int op_pprof(subject_t *x, hr_err_t *err) { return render_as(x, "pprof", RENDER_MERGE, err); }
static int op_top(subject_t *x, hr_err_t *err) { return render_as(x, "top", RENDER_MERGE, err); }
static int op_diff(subject_t *x, hr_err_t *err) { return render_as(x, "diff", RENDER_DIFF, err); }

static void answer_out(subject_t *x, buf_t *out) { buf_append(out, x->out.data, x->out.len); }

static const path_t PATHS[] = {
    {"ingest pprof cpu", 1, build_one, op_ingest_cpu, NULL},
    {"ingest pprof heap", 1, build_one, op_ingest_heap, NULL},
    {"ingest otlp", 1, build_one, op_ingest_otlp, NULL},
    {"cut", 1, build_for_cut, op_cut, NULL},
    {"compact", 1, build_three_blocks, op_compact, NULL},
    {"catalog", 0, build_blocks_and_head, op_catalog, answer_out},
    {"merge cpu", 0, build_blocks_and_head, op_merge_cpu, answer_merge},
    {"merge heap (gauge)", 0, build_blocks_and_head, op_merge_heap, answer_merge},
    {"merge symbolized", 0, build_native, op_merge_symbolized, answer_merge},
    {"merge cpu focus/ignore/hide", 0, build_blocks_and_head, op_merge_filtered, answer_merge},
    {"heatmap", 0, build_blocks_and_head, op_heatmap, answer_out},
    {"render flamegraph", 0, build_for_render, op_flamegraph, answer_out},
    {"render pprof", 0, build_for_render, op_pprof, answer_out},
    {"render top", 0, build_for_render, op_top, answer_out},
    {"render diff", 0, build_for_render, op_diff, answer_out},
};

static const char *cur_path;
static long cur_n;

/* ---- I/O faults ----
 *
 * The store-changing paths again, with the nth open, write, pwrite, fsync, ftruncate,
 * rename or unlink of Hearth's own code failing, once and then persistently (a disk
 * that stays broken). Each time:
 *   - nothing crashes; a failure is -1 with HR_EIO;
 *   - the store answers what it held before or what the reference holds after (an
 *     upload refused late may be stored: at least once), and exactly the reference
 *     when the operation said it succeeded (no acknowledged upload lost); the same
 *     after a reopen (WAL replay), and `hearth check` finds nothing wrong;
 *   - with the disk healthy again, the operation succeeds and the store answers as the
 *     reference does. */

#define IO_STEPS 120 /* at most this many n per kind and mode; more calls are strided */

/* A reopen: WAL replay and the catalog, as a restart does. */
static int op_reopen(subject_t *x, hr_err_t *err) {
    store_close(x->s);
    wal_scan_t ws;
    x->s = store_open(&x->cfg, err);
    if (x->s && store_replay(x->s, replay_one, x->s, &ws, err)) store_close(x->s), x->s = NULL;
    return x->s ? 0 : -1;
}

/* The debug file the upload path stores, read once. */
static unsigned char *DEBUG_FILE;
static size_t DEBUG_LEN;
#define DEBUG_ID "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085"

static void build_debuginfo(subject_t *x) {
    hr_err_t err = {0};
    debuginfo_config_t dc = {.data_dir = x->dir, .local_dir = "", .debuginfod_urls = "", .negative_ttl_ns = S};
    must((x->di = debuginfo_new(&dc, &err)) != NULL, err.msg);
}

static int op_debug_upload(subject_t *x, hr_err_t *err) {
    return debuginfo_store(x->di, DEBUG_ID, DEBUGINFO_BINARY, "anonymous", DEBUG_FILE, DEBUG_LEN, err);
}

typedef struct {
    const char *name;
    void (*build)(subject_t *x);
    int (*op)(subject_t *x, hr_err_t *err);
    int retry_if_done; /* a retry of an operation that completed anyway changes nothing */
} io_path_t;

static const io_path_t IO_PATHS[] = {
    {"io ingest", build_one, op_ingest_cpu, 0},
    {"io cut", build_for_cut, op_cut, 0},
    {"io compact", build_three_blocks, op_compact, 0},
    {"io replay", build_for_cut, op_reopen, 1},
    {"io debug upload", build_debuginfo, op_debug_upload, 1},
};

static void io_subject(subject_t *x, const io_path_t *p) {
    subject_init(x, "io");
    x->cfg.fsync = WAL_FSYNC_ALWAYS; /* every sync of an acknowledgement is under test */
    subject_reopen(x);
    must(x->s != NULL, "store_open");
    p->build(x);
}

/* `hearth check DIR` on x's data dir (its report to /dev/null): 0 when it found nothing wrong. */
static int check_clean(const subject_t *x) {
    fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    char *argv[] = {"check", (char *)x->dir, NULL};
    int rc = cli_check(2, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved), close(null);
    return rc == 0;
}

/* What x holds: the store's answers, and the stored debug files' names and sizes. */
static void state_of(subject_t *x, buf_t *out) {
    store_answer(x->s, out);
    out->len--; /* store_answer's NUL */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/debuginfo", x->dir);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0) buf_printf(out, "debuginfo %s %lld\n", e->d_name, (long long)st.st_size);
    }
    if (d) closedir(d);
    buf_putc(out, 0);
}

/* 1 when x holds one of the allowed states (before, after; either may be NULL). */
static int store_is(subject_t *x, const buf_t *a, const buf_t *b) {
    if (!x->s) return 0;
    buf_t got;
    buf_init(&got);
    state_of(x, &got);
    int ok = (a && !strcmp((char *)got.data, (char *)a->data)) || (b && !strcmp((char *)got.data, (char *)b->data));
    buf_free(&got);
    return ok;
}

static long io_refused; /* runs whose operation failed, for the summary: 0 would mean nothing was injected */

/* One n of one kind and mode; 1 when the nth call was reached. */
static int io_once(const io_path_t *p, io_kind_t k, int persistent, long n, const buf_t *before, const buf_t *ref) {
    subject_t x;
    io_subject(&x, p);
    hr_err_t err = {0};
    cur_n = n;
    io_arm(k, n, persistent);
    int rc = p->op(&x, &err);
    io_disarm();
    int fired = io_fired();
    io_refused += rc != 0;
    const char *mode = persistent ? "persistently" : "once";
    if (fired && rc && err.code != HR_EIO)
        fprintf(stderr, "io: %s, %s %ld failing %s: code %d (%s), want HR_EIO\n", p->name, IO_KIND_NAMES[k], n, mode,
                err.code, err.msg);
    CHECK(!rc || !fired || err.code == HR_EIO);
    CHECK(fired || rc == 0);
    /* Acknowledged: exactly the reference; refused: either state. */
    const buf_t *may = rc == 0 ? NULL : before;
    if (x.s && !store_is(&x, ref, may))
        fprintf(stderr, "io: %s, %s %ld failing %s: the store's answers are neither before nor after\n", p->name,
                IO_KIND_NAMES[k], n, mode);
    CHECK(x.s == NULL || store_is(&x, ref, may));
    subject_reopen(&x);
    int kept = store_is(&x, ref, may);
    if (!kept)
        fprintf(stderr, "io: %s, %s %ld failing %s: after a reopen the store's answers are %s\n", p->name,
                IO_KIND_NAMES[k], n, mode, x.s ? "neither before nor after" : "gone (it did not open)");
    CHECK(kept);
    int clean = x.s && check_clean(&x);
    if (!clean)
        fprintf(stderr, "io: %s, %s %ld failing %s: hearth check is not clean\n", p->name, IO_KIND_NAMES[k], n, mode);
    CHECK(clean);
    if (x.s && rc) { /* the disk is healthy again: the operation completes */
        int done = store_is(&x, ref, NULL);
        err = (hr_err_t){0};
        int again = done && !p->retry_if_done ? 0 : p->op(&x, &err);
        if (again)
            fprintf(stderr, "io: %s, %s %ld failing %s: the retry failed: %s\n", p->name, IO_KIND_NAMES[k], n, mode,
                    err.msg);
        CHECK(again == 0 && store_is(&x, ref, NULL));
    }
    subject_destroy(&x);
    return fired;
}

static void run_io_path(const io_path_t *p) {
    cur_path = p->name;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    subject_t x;
    io_subject(&x, p);
    buf_t before, ref;
    buf_init(&before), buf_init(&ref);
    state_of(&x, &before);
    long calls[IO_KINDS];
    hr_err_t err = {0};
    for (int k = 0; k < IO_KINDS; k++) { /* how many calls of each kind the operation makes */
        if (k) subject_destroy(&x), io_subject(&x, p);
        io_arm((io_kind_t)k, 0, 0);
        must(p->op(&x, &err) == 0, err.msg[0] ? err.msg : p->name);
        calls[k] = io_disarm();
    }
    state_of(&x, &ref);
    subject_destroy(&x);
    int failed = U.failed;
    long runs = 0;
    io_refused = 0;
    for (int k = 0; k < IO_KINDS; k++)
        for (int persistent = 0; persistent < 2; persistent++) {
            long stride = calls[k] > IO_STEPS ? (calls[k] + IO_STEPS - 1) / IO_STEPS : 1;
            for (long n = 1; n <= calls[k] && U.failed - failed <= 20; n += stride, runs++)
                io_once(p, (io_kind_t)k, persistent, n, &before, &ref);
        }
    buf_free(&before), buf_free(&ref);
    cur_path = NULL;
    CHECK(__lsan_do_recoverable_leak_check() == 0);
    fprintf(stderr,
            "%s %s: %ld open, %ld write, %ld pwrite, %ld fsync, %ld ftruncate, %ld rename, %ld unlink; %ld runs, %ld "
            "refused (%.1f s)\n",
            U.failed == failed ? "ok  " : "FAIL", p->name, calls[IO_OPEN], calls[IO_WRITE], calls[IO_PWRITE],
            calls[IO_FSYNC], calls[IO_FTRUNCATE], calls[IO_RENAME], calls[IO_UNLINK], runs, io_refused,
            (double)clock() / CLOCKS_PER_SEC - t0);
}

/* ---- the runner ---- */

static void say_where(void) {
    if (cur_path) fprintf(stderr, "oom: died in path `%s` with allocation %ld failing\n", cur_path, cur_n);
}

static void on_abort(int sig) {
    say_where();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Frees what one run of the operation made. */
static void release(subject_t *x) {
    merge_result_destroy(&x->m);
    buf_free(&x->out);
    buf_init(&x->out);
}

/* What the operation answered, and (changes_store) what the store holds after it. */
typedef struct {
    buf_t answer, store;
} outcome_t;

static void outcome_of(const path_t *p, subject_t *x, outcome_t *o) {
    buf_init(&o->answer);
    buf_init(&o->store);
    if (p->answer) p->answer(x, &o->answer);
    buf_putc(&o->answer, 0);
    if (p->changes_store) store_answer(x->s, &o->store);
}

static void outcome_free(outcome_t *o) {
    buf_free(&o->answer);
    buf_free(&o->store);
}

/* 1 when x (after a successful run) answers as want; reports the first difference. */
static int same_outcome(const path_t *p, subject_t *x, const outcome_t *want, const char *when) {
    outcome_t got;
    outcome_of(p, x, &got);
    int same = !strcmp((char *)got.answer.data, (char *)want->answer.data) &&
               (!p->changes_store || !strcmp((char *)got.store.data, (char *)want->store.data));
    if (!same) fprintf(stderr, "oom: %s, allocation %ld: the answer differs %s\n", p->name, cur_n, when);
    outcome_free(&got);
    return same;
}

/* The store's answers equal want (a store that failed an operation holds what it held). */
static int same_store(const path_t *p, subject_t *x, const buf_t *want, const char *when) {
    if (!p->changes_store) return 1;
    buf_t got;
    buf_init(&got);
    store_answer(x->s, &got);
    int same = !strcmp((char *)got.data, (char *)want->data);
    if (!same) fprintf(stderr, "oom: %s, allocation %ld: the store's answers changed %s\n", p->name, cur_n, when);
    buf_free(&got);
    return same;
}

/* One N: the operation with its Nth allocation failing, then the checks. Returns 1
 * when the Nth allocation was reached. */
static int run_once(const path_t *p, subject_t *x, long n, const buf_t *before, const outcome_t *ref) {
    hr_err_t err = {0};
    cur_n = n;
    oom_arm(n);
    int rc = p->op(x, &err);
    oom_disarm();
    int fired = oom_fired();
    if (!fired || rc == 0) { /* not reached, or coped with: the answer is the reference's */
        CHECK(rc == 0);
        CHECK(same_outcome(p, x, ref, fired ? "after coping with the failure" : "without a failure"));
        release(x);
        return fired;
    }
    if (err.code != HR_ENOMEM)
        fprintf(stderr, "oom: %s, allocation %ld: code %d (%s), want HR_ENOMEM\n", p->name, n, err.code, err.msg);
    CHECK_INT(err.code, HR_ENOMEM);
    release(x);
    CHECK(same_store(p, x, before, "after the failure"));
    if (p->changes_store) {
        subject_reopen(x);
        CHECK(x->s != NULL && same_store(p, x, before, "after the failure and a reopen"));
    }
    err = (hr_err_t){0};
    CHECK(x->s != NULL && p->op(x, &err) == 0); /* the retry */
    CHECK(same_outcome(p, x, ref, "on the retry"));
    release(x);
    if (p->changes_store) {
        subject_reopen(x);
        CHECK(x->s != NULL && same_store(p, x, &ref->store, "after the retry and a reopen"));
    }
    return 1;
}

static void run_path(const path_t *p) {
    cur_path = p->name;
    cur_n = 0;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    subject_t x;
    subject_init(&x, "ref");
    must(x.s != NULL, "store_open");
    p->build(&x);
    buf_t before;
    buf_init(&before);
    if (p->changes_store) store_answer(x.s, &before);
    hr_err_t err = {0};
    oom_arm(0);
    int rc = p->op(&x, &err);
    long total = oom_disarm();
    must(rc == 0, err.msg[0] ? err.msg : p->name);
    outcome_t ref;
    outcome_of(p, &x, &ref);
    release(&x);
    long stride = total > STEPS ? (total + STEPS - 1) / STEPS : 1, runs = 0;
    int failed = U.failed;
    for (long n = 1;; n += stride, runs++) {
        if (p->changes_store) { /* a fresh store in the state the reference started from */
            subject_destroy(&x);
            subject_init(&x, "n");
            must(x.s != NULL, "store_open");
            p->build(&x);
        }
        if (!run_once(p, &x, n, &before, &ref) || U.failed - failed > 20) break;
    }
    subject_destroy(&x);
    buf_free(&before);
    outcome_free(&ref);
    cur_path = NULL;
    CHECK(__lsan_do_recoverable_leak_check() == 0);
    fprintf(stderr, "%s %s: %ld allocations, %ld failed in turn%s (%.1f s)\n", U.failed == failed ? "ok  " : "FAIL",
            p->name, total, runs, stride > 1 ? " (strided)" : "", (double)clock() / CLOCKS_PER_SEC - t0);
    if (stride > 1) fprintf(stderr, "     every %ld-th allocation of %ld\n", stride, total);
}

/* The paths run in WORKERS processes at once (forked, so a crash or a leak fails
 * that process, not the run's bookkeeping), each taking the next path not yet taken
 * from a counter they share: every path is one core's work, and the long ones
 * (compaction, OTLP) then overlap instead of running one after another. */
#define WORKERS 2

typedef struct {
    _Atomic size_t next; /* the next path to take: PATHS, then IO_PATHS */
    _Atomic int ok, bad, passed, failed;
} shared_t;

#define NPATHS (sizeof PATHS / sizeof *PATHS)
#define NIO_PATHS (sizeof IO_PATHS / sizeof *IO_PATHS)

/* Path i (of PATHS, then IO_PATHS): 1 passed, -1 failed, 0 left out by `only`. */
static int run_nth(size_t i, const char *only) {
    const char *name = i < NPATHS ? PATHS[i].name : IO_PATHS[i - NPATHS].name;
    if (only && !strstr(name, only)) return 0;
    int before = U.failed;
    if (i < NPATHS) run_path(&PATHS[i]);
    else run_io_path(&IO_PATHS[i - NPATHS]);
    return U.failed == before ? 1 : -1;
}

/* Worker k: takes paths until none is left, in a directory of its own, then adds
 * its counts to sh's. */
static void work(shared_t *sh, const char *only, int k) {
    size_t len = strlen(U.tmpdir);
    snprintf(U.tmpdir + len, sizeof U.tmpdir - len, "/w%d", k);
    must(mkdir(U.tmpdir, 0700) == 0, U.tmpdir);
    for (size_t i; (i = atomic_fetch_add(&sh->next, 1)) < NPATHS + NIO_PATHS;) {
        int r = run_nth(i, only);
        if (r) atomic_fetch_add(r > 0 ? &sh->ok : &sh->bad, 1);
    }
    atomic_fetch_add(&sh->passed, U.passed);
    atomic_fetch_add(&sh->failed, U.failed);
    U.tmpdir[len] = 0;
}

/* Runs every path in the workers (here, when none could be forked); the number of
 * workers that crashed or exited with an error (a leak found at exit). */
static int run_workers(shared_t *sh, const char *only) {
    pid_t pid[WORKERS];
    int started = 0, bad = 0;
    fflush(NULL);
    for (int k = 0; k < WORKERS; k++) {
        if ((pid[started] = fork()) == 0) {
            work(sh, only, k);
            exit(0); /* LSan's check at exit runs in each worker */
        }
        started += pid[started] > 0;
    }
    if (!started) work(sh, only, 0);
    for (int k = 0; k < started; k++) {
        int st = 0;
        if (waitpid(pid[k], &st, 0) != pid[k] || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "FAIL oom worker %d ended badly (status %d)\n", k, st);
            bad++;
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    U.testdata = argc > 1 ? argv[1] : "../shared/testdata";
    const char *only = argc > 2 ? argv[2] : NULL;
    /* In memory when the machine has it: a store syncs every block and catalog commit. */
    snprintf(U.tmpdir, sizeof U.tmpdir, "%s/hearth-oom-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(U.tmpdir)) return 2;
    signal(SIGABRT, on_abort);
    must(faultvfs_register() == 0, "the SQLite fault VFS");
    __asan_set_death_callback(say_where);
    for (size_t i = 0; i < sizeof UPLOADS / sizeof *UPLOADS; i++)
        UPLOADS[i].body = unit_read(UPLOADS[i].file, &UPLOADS[i].len);
    upload_t *o = &UPLOADS[3];
    unsigned char *gz = o->body;
    o->body =
        otlp_body_of_pprof(gz, o->len, "otlp-api", "2d6912fd3dd64542f6f6294f4bf9cb6c265b3085", o->at_s * S, &o->len);
    free(gz);
    must(o->body != NULL, "the OTLP body");
    NATIVE.body = unit_read(NATIVE.file, &NATIVE.len);
    DEBUG_FILE = unit_read("symbolize/" DEBUG_ID ".debuginfo", &DEBUG_LEN);
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    must(sh != MAP_FAILED, "mmap");
    int bad = run_workers(sh, only);
    for (size_t i = 0; i < sizeof UPLOADS / sizeof *UPLOADS; i++) free(UPLOADS[i].body);
    free(NATIVE.body);
    free(DEBUG_FILE);
    U.passed = sh->passed, U.failed = sh->failed + bad; /* a crashed or leaking worker fails the run */
    return unit_finish("oom", sh->ok, sh->bad + bad);
}
