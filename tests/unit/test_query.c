/* test_query.c - selectors, merging and every renderer, against a real store. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "wire/gzip.h"
#include "ingest/pprof.h"
#include "wire/profile.pb-c.h"
#include "common/ptype.h"
#include "common/timeparse.h"
#include "ingest/request.h"
#include "query/callsite.h"
#include "query/catalog.h"
#include "query/groupby.h"
#include "query/merge.h"
#include "query/render.h"
#include "query/selector.h"
#include "query/share.h"
#include "query/split.h"
#include "query/stackfilter.h"
#include "query/tree.h"
#include "tests/unit/unit.h"

#define S 1000000000LL

static store_t *new_store(const char *name) {
    char dir[512];
    unit_tmpdir(name, dir, sizeof dir);
    store_config_t cfg = {.data_dir = dir,
                          .fsync = WAL_FSYNC_NONE,
                          .head_max_bytes = 64 << 20,
                          .block_duration_ns = 3600 * S,
                          .zstd_level = 3,
                          .block_cache_bytes = 64 << 20,
                          .retention_ns = 0,
                          .compact_min_blocks = 0,
                          .compact_max_bytes = 0};
    hr_err_t err = {0};
    store_t *s = store_open(&cfg, &err);
    wal_scan_t ws;
    store_replay(s, NULL, NULL, &ws, &err);
    return s;
}

static void put_folded(store_t *s, const char *name, const char *text, int64_t from_s, int64_t rate) {
    ingest_request_t r = {.tenant = "anonymous",
                          .name = name,
                          .format = INGEST_FOLDED,
                          .has_from = 1,
                          .from_ns = from_s * S,
                          .received_ns = from_s * S,
                          .sample_rate = rate,
                          .body = (const uint8_t *)text,
                          .body_len = strlen(text)};
    ingest_limits_t lim = {1 << 20, 0, 64, NULL, 2048};
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    CHECK(ingest_to_batch(&r, &lim, &b, &err) == 0);
    CHECK(store_apply(s, "anonymous", &b, &err) == 0);
    batch_destroy(&b);
}

/* Merges sel over [from, until] seconds and renders format into a NUL-terminated string;
 * with tree, the merge builds the call tree as it goes (merge_query_t.tree). */
static char *render_as(store_t *s, const char *sel_text, int64_t from, int64_t until, const char *format,
                       size_t max_nodes, int tree) {
    selector_t sel;
    hr_err_t err = {0};
    if (selector_parse(sel_text, &sel, &err)) {
        fprintf(stderr, "selector: %s\n", err.msg);
        return NULL;
    }
    merge_query_t q = {
        .tenant = "anonymous", .sel = &sel, .from = from * S, .until = until * S, .want_stacks = 1, .tree = tree};
    merge_result_t m;
    tree_t t = {0};
    buf_t out;
    buf_init(&out);
    int rc = merge_run(s, &q, &m, &err);
    if (rc == 0 && (rc = tree_build(&t, &m, &err)) == 0) {
        if (!strcmp(format, "flamegraph")) rc = render_flamegraph(&t, &m, max_nodes, NULL, &out);
        else if (!strcmp(format, "top")) rc = render_top(&t, &m, 0, &out);
        else rc = render_folded(&t, &out);
    }
    buf_putc(&out, 0);
    tree_destroy(&t);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    if (rc) {
        fprintf(stderr, "render: %s\n", err.msg);
        buf_free(&out);
        return NULL;
    }
    return (char *)buf_steal(&out, NULL);
}

static char *render(store_t *s, const char *sel_text, int64_t from, int64_t until, const char *format,
                    size_t max_nodes) {
    return render_as(s, sel_text, from, until, format, max_nodes, 0);
}

void test_selector(void) {
    selector_t s;
    hr_err_t err = {0};
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "api");
    labels_set(&l, "env", "prod");
    const char *pt = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    CHECK(selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\", env!=\"dev\"}", &s, &err) ==
          0);
    CHECK(selector_matches(&s, pt, &l));
    CHECK(!selector_matches(&s, "memory:alloc_space:bytes:space:bytes", &l));
    selector_destroy(&s);
    CHECK(selector_parse("{env=~\"pr.*\", region!~\"eu|us\"}", &s, &err) == 0);
    CHECK(s.profile_type == NULL && selector_matches(&s, pt, &l));
    selector_destroy(&s);
    CHECK(selector_parse("{env=~\"pro\"}", &s, &err) == 0); /* anchored */
    CHECK(!selector_matches(&s, pt, &l));
    selector_destroy(&s);
    CHECK(selector_parse("api.cpu{env=prod}", &s, &err) == 0); /* Pyroscope legacy form */
    CHECK_STR(s.profile_type, pt);
    CHECK(selector_matches(&s, pt, &l));
    selector_destroy(&s);
    CHECK(selector_parse("{__name__=\"process_cpu\"}", &s, &err) == 0 && selector_matches(&s, pt, &l));
    selector_destroy(&s);
    CHECK(selector_parse("{env=~\"p(r|x)+o{1,2}d?\\\\+*\"}", &s, &err) == 0); /* ordinary repetition is fine */
    selector_destroy(&s);
    static const char *bad[] = {"{env=\"prod}", "{=\"x\"}", "{env~\"x\"}", "{env=\"x\"", "{env=~\"(\"}", "a:b{}",
                                "nosuffix{}", "{a=\"b\"} junk",
                                /* stacked repetitions: found by fuzz_selector when glibc's regcomp
                                 * exhausted memory on them; RE2 refuses them as Go does */
                                "{env=~ reG++++++++++++++++++++++++++++++++~}", "{env=~\"a*+\"}",
                                "{env=~\"(a{2}){3}*\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(selector_parse(bad[i], &s, &err) == -1 && err.code == HR_EINVAL);
        selector_destroy(&s);
    }
    labels_destroy(&l);
}

/* 1 if sel_text selects a series of labels l (type pt), 0 if not, -1 if it does not parse. */
static int selects(const char *sel_text, const labels_t *l) {
    selector_t s;
    hr_err_t err = {0};
    int rc = selector_parse(sel_text, &s, &err)
                 ? -1
                 : selector_matches(&s, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", l);
    selector_destroy(&s);
    return rc;
}

/* The value of the first matcher of text, decoded; NULL when text does not parse. */
static char *first_value(const char *text) {
    selector_t s;
    hr_err_t err = {0};
    char *v = selector_parse(text, &s, &err) == 0 && s.n ? strdup(s.m[0].value) : NULL;
    selector_destroy(&s);
    return v;
}

/* Selector values are PromQL string literals: Go escapes in "..." and '...', raw
 * backticks, and an escape Prometheus does not know is an error. */
void test_selector_string_escapes(void) {
    static const struct {
        const char *text, *want; /* want NULL: refused */
    } cases[] = {
        {"{a=\"x\\ny\\tz\"}", "x\ny\tz"},
        {"{a=\"q\\\"q\"}", "q\"q"},
        {"{a='q\\'q'}", "q'q"},
        {"{a=\"\\\\d+\"}", "\\d+"},
        {"{a='\\\\d+'}", "\\d+"},
        {"{a=`\\d+`}", "\\d+"},
        {"{a=`a\"b'c\\n`}", "a\"b'c\\n"},
        {"{a=\"\\x41\\101\\u00e9\\U0001F600\"}", "AA\xc3\xa9\xf0\x9f\x98\x80"},
        {"{a=\"\\a\\b\\f\\r\\v\"}", "\a\b\f\r\v"},
        {"{a=\"\"}", ""},
        {"{a=\"\\d+\"}", NULL}, /* PromQL: unknown escape sequence */
        {"{a=\"\\'\"}", NULL},  /* the other quote is not an escape in "..." */
        {"{a='\\\"'}", NULL},
        {"{a=\"\\x4\"}", NULL},    /* too few digits */
        {"{a=\"\\400\"}", NULL},   /* octal over 255 */
        {"{a=\"\\uD800\"}", NULL}, /* a surrogate is not a code point */
        {"{a=\"\\U00110000\"}", NULL},
        {"{a=\"x\ny\"}", NULL}, /* a raw newline ends nothing: unterminated */
        {"{a=`abc}", NULL},
        {"{a=\"abc\\", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *v = first_value(cases[i].text);
        if (cases[i].want) CHECK_STR(v, cases[i].want);
        else CHECK(v == NULL);
        free(v);
    }
    /* The regex a user meant: "\\d+", '\\d+' and `\d+` all select digits. */
    labels_t l;
    labels_init(&l);
    labels_set(&l, "pod", "web-42");
    const char *digits[] = {"{pod=~\"web-\\\\d+\"}", "{pod=~'web-\\\\d+'}", "{pod=~`web-\\d+`}"};
    for (size_t i = 0; i < 3; i++) CHECK_INT(selects(digits[i], &l), 1);
    CHECK_INT(selects("{pod=~\"web-\\d+\"}", &l), -1);
    labels_destroy(&l);
}

/* Short names fit the types agents store: `cpu` is Go's CPU time first, then the
 * Node agent's CPU inside its wall profile; block never stands in for mutex. */
void test_short_type_names(void) {
    CHECK_INT(ptype_short_rank("cpu", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"), 0);
    CHECK_INT(ptype_short_rank("cpu", "wall:cpu:nanoseconds:wall:nanoseconds"), 1);
    CHECK(ptype_short_rank("cpu", "process_cpu:samples:count:cpu:nanoseconds") > 1);
    CHECK_INT(ptype_short_rank("cpu", "wall:wall:nanoseconds:wall:nanoseconds"), -1);
    CHECK_INT(ptype_short_rank("heap", "memory:inuse_space:bytes:inuse_space:bytes"), 0);
    CHECK_INT(ptype_short_rank("block_count", "mutex:contentions:count:mutex:count"), -1);
    CHECK_INT(ptype_short_rank("mutex_count", "mutex:contentions:count:mutex:count"), 0);
    CHECK_STR(ptype_short_name("memory:inuse_space:bytes:space:bytes"), "inuse_space");
    CHECK_STR(ptype_short_name("wall:cpu:nanoseconds:wall:nanoseconds"), "cpu");
    CHECK(ptype_short_name("threadcreate:threadcreate:count:threadcreate:count") == NULL);
    CHECK_STR(ptype_short_default("heap"), "memory:inuse_space:bytes:space:bytes");
    CHECK(ptype_short_default("nope") == NULL);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Regexes mean what they mean in PromQL (Go's syntax, anchored, `.` matching a
 * newline), and patterns that made glibc's regcomp take gigabytes or exponential
 * time are refused at parse time, at once and in little memory. */
void test_selector_regex(void) {
    labels_t l;
    labels_init(&l);
    labels_set(&l, "env", "prod");
    labels_set(&l, "pod", "api-7f9c\nsidecar");
    labels_set(&l, "ver", "v1.23");
    /* anchored at both ends, around the whole alternation */
    CHECK_INT(selects("{env=~\"prod\"}", &l), 1);
    CHECK_INT(selects("{env=~\"pro\"}", &l), 0);
    CHECK_INT(selects("{env=~\"rod\"}", &l), 0);
    CHECK_INT(selects("{env=~\"pro|prodx\"}", &l), 0);
    CHECK_INT(selects("{env=~\"dev|prod\"}", &l), 1);
    CHECK_INT(selects("{env!~\"dev|prod\"}", &l), 0);
    CHECK_INT(selects("{env=~\"^prod$\"}", &l), 1);
    /* the pattern is parsed alone: it cannot close the anchoring group */
    CHECK_INT(selects("{env=~\"x)|(.*\"}", &l), -1);
    /* (?s): `.` matches a newline; `$` is the end of the value, not of a line */
    CHECK_INT(selects("{pod=~\"api-.*\"}", &l), 1);
    CHECK_INT(selects("{pod=~\"api-7f9c.sidecar\"}", &l), 1);
    CHECK_INT(selects("{pod=~\"api-7f9c\"}", &l), 0);
    CHECK_INT(selects("{pod=~\"(?-s)api-.*\"}", &l), 0);
    /* .* and .+ against an absent label, which matches as "" */
    CHECK_INT(selects("{region=~\".*\"}", &l), 1);
    CHECK_INT(selects("{region=~\".+\"}", &l), 0);
    CHECK_INT(selects("{region!~\".+\"}", &l), 1);
    /* character classes: bracket, Perl and POSIX-in-bracket */
    CHECK_INT(selects("{ver=~\"v[0-9]+\\\\.[0-9]+\"}", &l), 1);
    CHECK_INT(selects("{ver=~\"v\\\\d\\\\.\\\\d+\"}", &l), 1);
    CHECK_INT(selects("{ver=~\"v\\\\d\\\\d\"}", &l), 0);
    CHECK_INT(selects("{env=~\"[[:alpha:]]{4}\"}", &l), 1);
    CHECK_INT(selects("{env=~\"\\\\w+\"}", &l), 1);
    CHECK_INT(selects("{env=~\"[^p].*\"}", &l), 0);
    /* case-insensitive, whole pattern or one group */
    CHECK_INT(selects("{env=~\"(?i)PROD\"}", &l), 1);
    CHECK_INT(selects("{env=~\"PROD\"}", &l), 0);
    CHECK_INT(selects("{env=~\"p(?i:ROD)\"}", &l), 1);
    /* the attacks: refused quickly, without growing the process */
    static const char *attacks[] = {"{x=~\"a{0,32767}\"}", "{x=~\"(a{0,255}){0,255}\"}", "{x=~\"(a)\\\\1\"}",
                                    "{x=~\"(\\\\pL{1000})\"}", "{x!~\"((a{0,30}){0,30}){0,30}\"}"};
    for (size_t i = 0; i < sizeof attacks / sizeof *attacks; i++) {
        selector_t s;
        hr_err_t err = {0};
        long rss0 = max_rss_kb();
        double t0 = now_s();
        CHECK(selector_parse(attacks[i], &s, &err) == -1 && err.code == HR_EINVAL);
        CHECK(now_s() - t0 < 1.0);
        CHECK(max_rss_kb() - rss0 < 64 * 1024);
        CHECK(strstr(err.msg, "label x") != NULL);
        selector_destroy(&s);
    }
    hr_err_t err = {0};
    selector_t s;
    CHECK(selector_parse("{x=~\"(a)\\\\1\"}", &s, &err) == -1 && strstr(err.msg, "backreferences") != NULL);
    selector_destroy(&s);
    CHECK(selector_parse("{x=~\"a{0,32767}\"}", &s, &err) == -1 && strstr(err.msg, "at most 1000") != NULL);
    selector_destroy(&s);
    /* up to 1000 repetitions compile, and a long alternation (a Grafana multi-value variable) too */
    CHECK_INT(selects("{env=~\"(?:prod){0,1000}\"}", &l), 1);
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{env=~\"");
    for (int i = 0; i < 500; i++) buf_printf(&b, "service-%03d|", i);
    buf_printf(&b, "prod\"}");
    buf_putc(&b, 0);
    CHECK_INT(selects((const char *)b.data, &l), 1);
    buf_free(&b);
    labels_destroy(&l);
}

typedef struct {
    store_t *st;
    size_t calls, total_seen;
    int ingest_blocked;
} probe_t;

static void *series_total(void *st) {
    index_series_total(store_index(st));
    return NULL;
}

/* A catalog callback that checks, from another thread, that the index mutex every
 * ingest takes is free while selected series are handed out (and so while they are
 * matched): the other thread must get it within a second. */
static void probe(void *ctx, const series_t *s) {
    probe_t *p = ctx;
    (void)s;
    p->calls++;
    pthread_t t;
    if (pthread_create(&t, NULL, series_total, p->st)) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (pthread_timedjoin_np(t, NULL, &until)) {
        p->ingest_blocked = 1;
        pthread_detach(t); /* it finishes once the lock is released */
    }
}

static void count(void *ctx, const series_t *s) {
    (void)s;
    (*(size_t *)ctx)++;
}

/* Discovery and selection match without the index lock and stop at the deadline
 * (a slow selector stalled every tenant's ingest and ignored --query-timeout). */
void test_catalog_unlocked_and_deadline(void) {
    store_t *st = new_store("catalog");
    put_folded(st, "api.cpu", "main;a 1\n", 100, 100);
    put_folded(st, "db.cpu", "main;b 2\n", 100, 100);
    put_folded(st, "web.cpu", "main;c 3\n", 100, 100);
    selector_t sel;
    hr_err_t err = {0};
    CHECK(selector_parse("{service_name=~\"api|db\"}", &sel, &err) == 0);
    probe_t p = {st, 0, 0, 0};
    catalog_query_t q = {"anonymous", &sel, 0, 0, 0, 0};
    CHECK(catalog_series(st, &q, probe, &p, &err) == 0);
    CHECK_INT(p.calls, 2);
    CHECK_INT(p.ingest_blocked, 0);
    size_t n = 0;
    q.ranged = 1, q.from = 100 * S, q.until = 100 * S;
    CHECK(catalog_series(st, &q, count, &n, &err) == 0);
    CHECK_INT(n, 2);
    /* past the deadline: 504, unranged (checked per series) and ranged (per segment) */
    q.deadline_ns = 1;
    for (int ranged = 0; ranged < 2; ranged++) {
        hr_err_t e = {0};
        q.ranged = ranged;
        n = 0;
        CHECK(catalog_series(st, &q, count, &n, &e) == -1 && e.code == HR_ETIMEOUT && n == 0);
        CHECK(strstr(e.msg, "--query-timeout") != NULL);
    }
    hr_err_t e = {0};
    uint32_t nbits;
    CHECK(catalog_select(st, &q, &nbits, &e) == NULL && e.code == HR_ETIMEOUT);
    q.deadline_ns = time_now_ns() + 60 * S;
    uint8_t *bits = catalog_select(st, &q, &nbits, &e);
    CHECK(bits != NULL && nbits == 4 && bits[1] && bits[2] && !bits[3]);
    free(bits);
    selector_destroy(&sel);
    store_close(st);
}

void test_flamebearer_layout(void) {
    /* The example of Pyroscope's Test_ExportToFlamebearer: a;b;e=1, a;c=2, a;c;d=1. */
    store_t *s = new_store("fb");
    put_folded(s, "app.cpu", "a;b;e 1\na;c 2\na;c;d 1\n", 100, 0);
    char *json = render(s, "process_cpu:samples:count:cpu:nanoseconds{service_name=\"app\"}", 0, 200, "flamegraph", 0);
    CHECK(json != NULL);
    json_t *doc = json ? json_loads(json, 0, NULL) : NULL;
    CHECK(doc != NULL);
    json_t *fb = json_object_get(doc, "flamebearer");
    char *names = json_dumps(json_object_get(fb, "names"), JSON_COMPACT);
    char *levels = json_dumps(json_object_get(fb, "levels"), JSON_COMPACT);
    CHECK_STR(names, "[\"total\",\"a\",\"b\",\"e\",\"c\",\"d\"]");
    CHECK_STR(levels, "[[0,4,0,0],[0,4,0,1],[0,1,0,2,0,3,2,4],[0,1,1,3,2,1,1,5]]");
    CHECK_INT(json_integer_value(json_object_get(fb, "numTicks")), 4);
    CHECK_INT(json_integer_value(json_object_get(fb, "maxSelf")), 2);
    CHECK_STR(json_string_value(json_object_get(json_object_get(doc, "metadata"), "format")), "single");
    free(names);
    free(levels);
    json_decref(doc);
    free(json);
    store_close(s);
}

void test_top_and_folded(void) {
    store_t *s = new_store("top");
    /* Recursion: f appears twice on one stack; its total must count the sample once. */
    put_folded(s, "app.cpu", "main;f;g;f 3\nmain;h 5\nmain 1\n", 100, 100);
    put_folded(s, "app.cpu", "main;h 5\n", 110, 100);
    put_folded(s, "other.cpu", "main;zzz 100\n", 110, 100);
    char *top = render(s, "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"app\"}", 0, 200, "top", 0);
    json_t *doc = top ? json_loads(top, 0, NULL) : NULL;
    json_t *fns = json_object_get(doc, "functions");
    CHECK_INT(json_array_size(fns), 4);
    CHECK_STR(json_string_value(json_object_get(json_array_get(fns, 0), "name")), "h");
    CHECK_INT(json_integer_value(json_object_get(json_array_get(fns, 0), "self")), 100000000);
    CHECK_STR(json_string_value(json_object_get(json_array_get(fns, 1), "name")), "f");
    CHECK_INT(json_integer_value(json_object_get(json_array_get(fns, 1), "total")), 30000000);
    CHECK_INT(json_integer_value(json_object_get(doc, "total")), 140000000);
    json_decref(doc);
    free(top);
    char *folded = render(s, "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"app\"}", 0, 200, "folded", 0);
    CHECK_STR(folded, "main 10000000\nmain;f;g;f 30000000\nmain;h 100000000\n");
    free(folded);
    /* The time range is honoured (only the profile at t=100). */
    folded = render(s, "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"app\"}", 90, 105, "folded", 0);
    CHECK_STR(folded, "main 10000000\nmain;f;g;f 30000000\nmain;h 50000000\n");
    free(folded);
    store_close(s);
}

/* One small merge (counts: main;f;g;f 3, main;h 5, main 1) through the renderers that
 * had no test of their own: exact SVG frames, Pyroscope's tree bytes, one function's
 * lines and its sandwich. */
void test_renderers_svg_pyrotree_lines_sandwich(void) {
    store_t *s = new_store("renderers");
    put_folded(s, "app.cpu", "main;f;g;f 3\nmain;h 5\nmain 1\n", 100, 0);
    selector_t sel;
    hr_err_t err = {0};
    CHECK(selector_parse("process_cpu:samples:count:cpu:nanoseconds{service_name=\"app\"}", &sel, &err) == 0);
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = 200 * S, .want_stacks = 1};
    merge_result_t m;
    tree_t t = {0};
    buf_t out;
    buf_init(&out);
    CHECK(merge_run(s, &q, &m, &err) == 0 && tree_build(&t, &m, &err) == 0);
    /* SVG: the header names the type and total; one frame per node, the root as wide as the image. */
    CHECK(render_svg(&t, &m, &out) == 0);
    buf_putc(&out, 0);
    const char *svg = (const char *)out.data;
    CHECK(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    CHECK(strstr(svg, "process_cpu:samples:count:cpu:nanoseconds: 9 count, 1 profile</text>") != NULL);
    size_t frames = 0;
    for (const char *p = svg; (p = strstr(p, "<rect x=")); p++) frames++;
    CHECK_INT(frames, 6); /* total, main, f, g, f, h */
    CHECK(strstr(svg, "<title>h (5 count, 55.56%)</title><rect x=") != NULL);
    CHECK(strstr(svg, "<title>total (9 count, 100.00%)</title><rect x=\"0.0\"") != NULL);
    /* Pyroscope's tree: depth first from a nameless root; each node name, self, children. */
    out.len = 0;
    CHECK(render_pyroscope_tree(&t, 0, &out) == 0);
    /* root: "" 0 1 | main 1 2 | f 0 1 | g 0 1 | f 3 0 | h 5 0 (main's children in any order) */
    static const uint8_t fgh[] = {0, 0, 1,   4, 'm', 'a', 'i', 'n', 1, 2, 1,   'f', 0,
                                  1, 1, 'g', 0, 1,   1,   'f', 3,   0, 1, 'h', 5,   0};
    static const uint8_t hfg[] = {0, 0, 1,   4, 'm', 'a', 'i', 'n', 1, 2, 1,   'h', 5,
                                  0, 1, 'f', 0, 1,   1,   'g', 0,   1, 1, 'f', 3,   0};
    CHECK(out.len == sizeof fgh && (!memcmp(out.data, fgh, sizeof fgh) || !memcmp(out.data, hfg, sizeof hfg)));
    /* Lines of f: folded frames have no file or line; f's self is 3, its total 3 (once per sample). */
    out.len = 0;
    CHECK(render_lines(&m, "f", &out) == 0);
    buf_putc(&out, 0);
    json_t *doc = json_loads((const char *)out.data, 0, NULL);
    CHECK(doc && json_integer_value(json_object_get(doc, "self")) == 3 &&
          json_integer_value(json_object_get(doc, "total")) == 3);
    json_decref(doc);
    /* Sandwich of f: callers main above f (3), callees g under f (3), counted once per side. */
    out.len = 0;
    CHECK(render_sandwich(&m, "f", 0, &out, &err) == 0);
    buf_putc(&out, 0);
    doc = json_loads((const char *)out.data, 0, NULL);
    json_t *callers = json_object_get(json_object_get(doc, "callers"), "flamebearer");
    json_t *callees = json_object_get(json_object_get(doc, "callees"), "flamebearer");
    CHECK(doc && callers && callees);
    CHECK_INT(json_integer_value(json_object_get(callers, "numTicks")), 3);
    CHECK_INT(json_integer_value(json_object_get(callees, "numTicks")), 3);
    char *cn = json_dumps(json_object_get(callers, "names"), JSON_COMPACT);
    char *ce = json_dumps(json_object_get(callees, "names"), JSON_COMPACT);
    CHECK(cn && strstr(cn, "\"main\"") && !strstr(cn, "\"h\""));
    CHECK(ce && strstr(ce, "\"g\"") && !strstr(ce, "\"main\""));
    free(cn), free(ce);
    json_decref(doc);
    buf_free(&out);
    tree_destroy(&t);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    store_close(s);
}

/* A split gives every partition to exactly one node, each share sorted, the loads within
 * one partition of each other; a share travels intact and damaged bytes are refused. */
/* Stacks from two services' shared dictionaries and a head, with names in common, draw
 * the same tree whether the merge copies them into one symtab first or adds each
 * dictionary to the tree by name. */
void test_tree_from_dictionaries(void) {
    store_t *s = new_store("treedict");
    put_folded(s, "a.cpu", "main;f;g;f 3\nmain;h 5\nmain 1\nmain;x;y 2\n", 100, 100);
    put_folded(s, "b.cpu", "main;f;g 4\nmain;k 6\nmain;x;y 7\n", 100, 100);
    /* Past 8 children a node's are found by hash, not by walking them (tree.c). */
    char wide[512] = "";
    for (int i = 0; i < 12; i++) snprintf(wide + strlen(wide), sizeof wide - strlen(wide), "main;w;c%d %d\n", i, i + 1);
    put_folded(s, "b.cpu", wide, 200, 100);
    hr_err_t err = {0};
    CHECK(store_cut(s, &err) == 0);
    put_folded(s, "a.cpu", "main;f;g;f 2\nmain;z 1\n", 4000, 100);
    put_folded(s, "c.cpu", "main;h 9\n", 4000, 100);
    put_folded(s, "b.cpu", wide, 4100, 100);
    const char *sel_text = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}";
    const char *formats[] = {"flamegraph", "folded", "top"};
    for (size_t f = 0; f < 3; f++)
        for (size_t max = 0; max <= 6; max += 3) {
            char *by_sym = render_as(s, sel_text, 0, 5000, formats[f], max, 0);
            char *by_tree = render_as(s, sel_text, 0, 5000, formats[f], max, 1);
            CHECK(by_sym && by_tree && !strcmp(by_sym, by_tree));
            free(by_sym);
            free(by_tree);
        }
    /* The dictionaries' stacks went to the tree: the symtab holds the heads' alone. */
    selector_t sel;
    CHECK(selector_parse(sel_text, &sel, &err) == 0);
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = 5000 * S, .want_stacks = 1, .tree = 1};
    merge_result_t m;
    CHECK(merge_run(s, &q, &m, &err) == 0);
    /* The root and main, f, g, f, h, x, y, k, w and c0..c11; the heads' stacks: the empty
     * one, main, main;f, main;f;g, main;f;g;f, main;z, main;h, main;w and main;w;c0..c11. */
    CHECK(m.tree && m.tree->len == 22 && m.sym->nstacks == 20);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    store_close(s);
}

void test_split_and_share(void) {
    store_part_ref_t refs[7];
    uint64_t bytes[7] = {100, 90, 80, 10, 10, 5, 0}, load[3] = {0};
    for (int i = 0; i < 7; i++) refs[i] = (store_part_ref_t){i / 2 + 1, (uint32_t)(i % 2)};
    store_part_ref_t *shares[3];
    size_t n[3], seen = 0;
    CHECK(split_plan(refs, bytes, 7, 3, shares, n) == 0);
    for (int k = 0; k < 3; k++) {
        for (size_t j = 0; j < n[k]; j++) {
            size_t i = (size_t)((shares[k][j].block - 1) * 2 + shares[k][j].part);
            CHECK(i < 7 &&
                  (!j || shares[k][j - 1].block < shares[k][j].block ||
                   (shares[k][j - 1].block == shares[k][j].block && shares[k][j - 1].part < shares[k][j].part)));
            load[k] += i < 7 ? bytes[i] : 0;
        }
        seen += n[k];
    }
    CHECK_INT(seen, 7);
    CHECK(load[0] <= 110 && load[1] <= 110 && load[2] <= 110 && load[0] + load[1] + load[2] == 295);
    for (int k = 0; k < 3; k++) free(shares[k]);

    /* 24 blocks of 2 partitions: enough blocks that each goes whole to one node (a node
     * then reads only its blocks' footers), still balanced. */
    store_part_ref_t many[48];
    uint64_t mbytes[48];
    for (int i = 0; i < 48; i++) many[i] = (store_part_ref_t){i / 2 + 1, (uint32_t)(i % 2)}, mbytes[i] = 10;
    CHECK(split_plan(many, mbytes, 48, 3, shares, n) == 0);
    CHECK_INT(n[0], 16);
    CHECK_INT(n[1], 16);
    CHECK_INT(n[2], 16);
    for (int k = 0; k < 3; k++) {
        for (size_t j = 0; j < n[k]; j += 2)
            CHECK(shares[k][j].block == shares[k][j + 1].block && shares[k][j].part == 0 && shares[k][j + 1].part == 1);
        free(shares[k]);
    }

    store_t *s = new_store("share");
    put_folded(s, "app.cpu", "main;f;g;f 3\nmain;h 5\nmain 1\n", 100, 100);
    selector_t sel;
    hr_err_t err = {0};
    CHECK(selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err) == 0);
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = 200 * S, .want_stacks = 1};
    merge_result_t m;
    CHECK(merge_run(s, &q, &m, &err) == 0);
    buf_t b;
    buf_init(&b);
    share_encode(&m, 0, 7, 42, &b);
    share_t sh;
    CHECK(share_decode(b.data, b.len, &sh, &err) == 0);
    int64_t sum = 0;
    for (size_t i = 0; sh.sym && i < sh.sym->nstacks; i++) sum += sh.self[i];
    CHECK(sh.sym && sh.sym->nstacks == m.sym->nstacks && sum == 90000000 && (double)sum == m.total);
    CHECK(sh.parts_decoded == 7 && sh.cpu_us == 42 && !sh.has_totals);
    share_destroy(&sh);
    merge_result_destroy(&m);
    /* With its totals: the total, profile count, span and each timeline step's sum. */
    q.step = 50 * S;
    CHECK(merge_run(s, &q, &m, &err) == 0);
    b.len = 0;
    share_encode(&m, 1, 7, 42, &b);
    CHECK(share_decode(b.data, b.len, &sh, &err) == 0);
    CHECK(sh.has_totals && (double)sh.total == m.total && sh.profiles == m.profiles && sh.profiles == 1);
    CHECK(sh.first_ns == m.first_ns && sh.end_ns == m.end_ns && sh.nbuckets == m.nbuckets && m.nbuckets == 5);
    for (size_t i = 0; i < sh.nbuckets; i++) CHECK((double)sh.timeline[i] == m.timeline[i]);
    share_destroy(&sh);
    CHECK(share_decode(b.data, b.len - 1, &sh, &err) == -1 && err.code == HR_EUNPROC);
    share_destroy(&sh);
    b.data[0] = 'X';
    CHECK(share_decode(b.data, b.len, &sh, &err) == -1);
    share_destroy(&sh);
    buf_free(&b);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    store_close(s);
}

void test_max_nodes(void) {
    store_t *s = new_store("maxn");
    put_folded(s, "app.cpu", "a;big 100\na;small1 1\na;small2 1\nb 2\n", 100, 0);
    char *json = render(s, "process_cpu:samples:count:cpu:nanoseconds", 0, 200, "flamegraph", 3);
    json_t *doc = json ? json_loads(json, 0, NULL) : NULL;
    json_t *fb = json_object_get(doc, "flamebearer");
    char *levels = json_dumps(json_object_get(fb, "levels"), JSON_COMPACT);
    /* Kept: total(104), a(102), big(100); b and the smalls fold into their parents' self. */
    CHECK_STR(levels, "[[0,104,2,0],[2,102,2,1],[4,100,100,2]]");
    CHECK_INT(json_integer_value(json_object_get(fb, "numTicks")), 104);
    free(levels);
    json_decref(doc);
    free(json);
    /* The threshold falls on ties: of small1 and small2 (1 each) a limit of 5 keeps one. */
    for (size_t limit = 4; limit <= 7; limit++) {
        json = render(s, "process_cpu:samples:count:cpu:nanoseconds", 0, 200, "flamegraph", limit);
        doc = json ? json_loads(json, 0, NULL) : NULL;
        json_t *lv = json_object_get(json_object_get(doc, "flamebearer"), "levels");
        size_t nodes = 0;
        for (size_t d = 0; d < json_array_size(lv); d++) nodes += json_array_size(json_array_get(lv, d)) / 4;
        CHECK_INT(nodes, limit < 6 ? limit : 6); /* 6 nodes in all */
        json_decref(doc);
        free(json);
    }
    store_close(s);
}

/* Merges one selection over two ranges (seconds) and renders the diff. */
static char *render_diff_of(store_t *s, const char *sel_text, int64_t lf, int64_t lu, int64_t rf, int64_t ru,
                            size_t max_nodes) {
    selector_t sel;
    hr_err_t err = {0};
    CHECK(selector_parse(sel_text, &sel, &err) == 0);
    merge_query_t lq = {.tenant = "anonymous", .sel = &sel, .from = lf * S, .until = lu * S, .want_stacks = 1},
                  rq = {.tenant = "anonymous", .sel = &sel, .from = rf * S, .until = ru * S, .want_stacks = 1};
    merge_result_t lm, rm;
    tree_t lt = {0}, rt = {0};
    buf_t out;
    buf_init(&out);
    CHECK(merge_run(s, &lq, &lm, &err) == 0 && tree_build(&lt, &lm, &err) == 0);
    CHECK(merge_run(s, &rq, &rm, &err) == 0 && tree_build(&rt, &rm, &err) == 0);
    CHECK(render_diff(&lt, &lm, &rt, max_nodes, &out) == 0);
    buf_putc(&out, 0);
    tree_destroy(&lt), tree_destroy(&rt);
    merge_result_destroy(&lm), merge_result_destroy(&rm);
    selector_destroy(&sel);
    return (char *)buf_steal(&out, NULL);
}

static void check_diff_levels(const char *json, const char *want_levels, long long left, long long right) {
    json_t *doc = json ? json_loads(json, 0, NULL) : NULL;
    json_t *fb = json_object_get(doc, "flamebearer");
    char *levels = json_dumps(json_object_get(fb, "levels"), JSON_COMPACT);
    CHECK_STR(levels, want_levels);
    CHECK_INT(json_integer_value(json_object_get(fb, "leftTicks")), left);
    CHECK_INT(json_integer_value(json_object_get(fb, "rightTicks")), right);
    CHECK_INT(json_integer_value(json_object_get(fb, "numTicks")), left + right);
    CHECK_STR(json_string_value(json_object_get(json_object_get(doc, "metadata"), "format")), "double");
    free(levels);
    json_decref(doc);
}

void test_diff_layout(void) {
    store_t *s = new_store("diff");
    put_folded(s, "app.cpu", "a;b 3\na;c 1\n", 100, 0);
    put_folded(s, "app.cpu", "a;c 2\nd 1\n", 150, 0);
    const char *sel = "process_cpu:samples:count:cpu:nanoseconds";
    /* total(4|3) > a(4|2) d(0|1); a > b(3|0) c(1|2). Each side keeps its own x. */
    char *json = render_diff_of(s, sel, 0, 120, 140, 200, 0);
    check_diff_levels(json, "[[0,4,0,0,3,0,0],[0,4,0,0,2,0,1,0,0,0,0,1,1,4],[0,3,3,0,0,0,2,0,1,1,0,2,2,3]]", 4, 3);
    json_t *doc = json_loads(json, 0, NULL);
    char *names = json_dumps(json_object_get(json_object_get(doc, "flamebearer"), "names"), JSON_COMPACT);
    CHECK_STR(names, "[\"total\",\"a\",\"b\",\"c\",\"d\"]");
    free(names);
    json_decref(doc);
    free(json);
    /* Trimmed to 3 nodes by the larger share of either side: c and d fold into their
     * parents' self, which comes first, so a and b shift right by it on each side. */
    json = render_diff_of(s, sel, 0, 120, 140, 200, 3);
    check_diff_levels(json, "[[0,4,0,0,3,1,0],[0,4,1,1,2,2,1],[1,3,3,3,0,0,2]]", 4, 3);
    free(json);
    /* An empty side still gives a well-formed document. */
    json = render_diff_of(s, sel, 0, 120, 500, 600, 0);
    check_diff_levels(json, "[[0,4,0,0,0,0,0],[0,4,0,0,0,0,1],[0,3,3,0,0,0,2,0,1,1,0,0,0,3]]", 4, 0);
    free(json);
    store_close(s);
}

void test_gauge_average(void) {
    store_t *s = new_store("gauge");
    /* Two snapshots of one process's heap average to one; two processes add up. */
    put_folded(s, "p1.inuse_space", "main;alloc 100\n", 100, 0);
    put_folded(s, "p1.inuse_space", "main;alloc 300\n", 110, 0);
    put_folded(s, "p2.inuse_space", "main;alloc 50\n", 110, 0);
    char *f = render(s, "memory:inuse_space:bytes:space:bytes", 0, 200, "folded", 0);
    CHECK_STR(f, "main;alloc 250\n");
    free(f);
    put_folded(s, "p1.alloc_space", "main;alloc 100\n", 100, 0);
    put_folded(s, "p1.alloc_space", "main;alloc 300\n", 110, 0);
    f = render(s, "memory:alloc_space:bytes:space:bytes", 0, 200, "folded", 0);
    CHECK_STR(f, "main;alloc 400\n"); /* cumulative types sum */
    free(f);
    store_close(s);
}

void test_pprof_output(void) {
    store_t *s = new_store("pprofout");
    size_t n;
    unsigned char *d = unit_read("pprof/go-runtime-cpu-00.pb.gz", &n);
    ingest_request_t r = {.tenant = "anonymous",
                          .name = "svc",
                          .format = INGEST_PPROF,
                          .has_from = 1,
                          .from_ns = 100 * S,
                          .received_ns = 100 * S,
                          .sample_rate = 100,
                          .body = d,
                          .body_len = n};
    ingest_limits_t lim = {64 << 20, 0, 64, NULL, 2048};
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    CHECK(ingest_to_batch(&r, &lim, &b, &err) == 0 && store_apply(s, "anonymous", &b, &err) == 0);
    batch_destroy(&b);
    free(d);
    selector_t sel;
    selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds", &sel, &err);
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = 200 * S, .want_stacks = 1};
    merge_result_t m;
    CHECK(merge_run(s, &q, &m, &err) == 0);
    buf_t out;
    buf_init(&out);
    CHECK(render_pprof(&m, &out, &err) == 0);
    /* Re-decode our own output: the total must be the input's (1.96 s). */
    batch_init(&b);
    labels_t l;
    labels_init(&l);
    pprof_opts_t o = {.base = &l, .time_ns = 1, .max_decompressed = 64 << 20};
    CHECK(pprof_decode(out.data, out.len, &o, &b, &err) == 0);
    int64_t total = 0;
    for (size_t i = 0; i < b.n; i++)
        for (size_t j = 0; j < b.p[i].n; j++) total += b.p[i].values[j];
    CHECK_INT(total, 1960000000);
    CHECK_STR(b.p[0].profile_type, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    batch_destroy(&b);
    labels_destroy(&l);
    buf_free(&out);
    /* Dated by the profile, not by the query range [0, 200 s]: it was
     * taken at 100 s and its own duration_nanos is 1,204,887,616 ns. */
    buf_init(&out);
    CHECK(render_pprof_raw(&m, &out, &err) == 0);
    Perftools__Profiles__Profile *pp = perftools__profiles__profile__unpack(NULL, out.len, out.data);
    CHECK(pp && pp->time_nanos == 100 * S && pp->duration_nanos == 1204887616);
    if (pp) perftools__profiles__profile__free_unpacked(pp, NULL);
    buf_free(&out);
    merge_result_destroy(&m);
    selector_destroy(&sel);
    store_close(s);
}

/* The renderer table: rows by name and kind, the names a 400 lists, and
 * query_render building the trees a row reads and refusing a diff of two types. */
void test_render_table(void) {
    store_t *s = new_store("table");
    put_folded(s, "app.cpu", "a;b 3\na;c 1\n", 100, 0);
    put_folded(s, "app.alloc_space", "a;b 5\n", 100, 0);
    const renderer_t *fg = render_find("flamegraph", RENDER_MERGE), *folded = render_find("folded", RENDER_MERGE);
    CHECK(fg != NULL && render_find("json", RENDER_MERGE) == fg);
    CHECK(render_find("diff", RENDER_MERGE) == NULL && render_find("diff", RENDER_DIFF) != NULL);
    CHECK(render_find("timeseries", RENDER_MERGE) == NULL && render_find("nope", RENDER_MERGE) == NULL);
    CHECK(folded != NULL && (folded->needs & RENDER_TREE) && !(folded->needs & RENDER_TIMELINE));
    CHECK_STR(folded->content_type, "text/plain; charset=utf-8");
    CHECK(render_find("pprof", RENDER_MERGE)->disposition != NULL && fg->disposition == NULL);
    buf_t out;
    buf_init(&out);
    render_names(RENDER_MERGE, &out);
    buf_putc(&out, 0);
    /* Table order, the last after " or "; a row added later joins the list by itself. */
    const char *names = (const char *)out.data, * or = strstr(names, " or ");
    CHECK(!strncmp(names, "flamegraph, top, folded, dataframe", 34) && strstr(names, "pprof") != NULL);
    CHECK(or != NULL && !strstr(or, ", ") && !strstr(or +1, " or ") && !strstr(names, "diff"));
    buf_free(&out);

    selector_t cpu, alloc;
    hr_err_t err = {0};
    CHECK(selector_parse("process_cpu:samples:count:cpu:nanoseconds", &cpu, &err) == 0);
    CHECK(selector_parse("memory:alloc_space:bytes:space:bytes", &alloc, &err) == 0);
    merge_query_t q = {.tenant = "anonymous", .sel = &cpu, .from = 0, .until = 200 * S, .want_stacks = 1};
    merge_result_t m, m2;
    CHECK(merge_run(s, &q, &m, &err) == 0);
    render_args_t args = {.m = &m};
    buf_init(&out);
    CHECK(query_render(folded, &args, &out, &err) == 0);
    buf_putc(&out, 0);
    CHECK_STR((char *)out.data, "a;b 3\na;c 1\n");
    buf_free(&out);
    q.sel = &alloc;
    CHECK(merge_run(s, &q, &m2, &err) == 0);
    args.right = &m2;
    hr_err_t e = {0};
    buf_init(&out);
    CHECK(query_render(render_find("diff", RENDER_DIFF), &args, &out, &e) == -1 && e.code == HR_EINVAL);
    CHECK(strstr(e.msg, "same profile type") != NULL);
    buf_free(&out);
    merge_result_destroy(&m2);
    merge_result_destroy(&m);
    selector_destroy(&alloc);
    selector_destroy(&cpu);
    store_close(s);
}

static void check_strings(const catalog_strings_t *s, const char *want) {
    buf_t b;
    buf_init(&b);
    for (size_t i = 0; i < s->n; i++) buf_printf(&b, "%s%s", i ? "," : "", s->v[i]);
    buf_putc(&b, 0);
    CHECK_STR((char *)b.data, want);
    buf_free(&b);
}

/* Discovery answers: sorted and distinct, one allocation each, the union
 * of several queries, pseudo-labels only when asked, and the deadline honoured. */
void test_catalog_answers(void) {
    store_t *st = new_store("answers");
    put_folded(st, "api.cpu{env=prod}", "main;a 1\n", 100, 100);
    put_folded(st, "api.cpu{env=dev}", "main;a 1\n", 100, 100);
    put_folded(st, "db.alloc_space{env=prod}", "main;b 2\n", 200, 0);
    put_folded(st, "web.cpu", "main;c 3\n", 300, 100);
    selector_t api, db;
    hr_err_t err = {0};
    CHECK(selector_parse("{service_name=\"api\"}", &api, &err) == 0);
    CHECK(selector_parse("{service_name=\"db\"}", &db, &err) == 0);
    catalog_query_t all = {"anonymous", NULL, 0, 0, 0, 0};
    catalog_query_t two[2] = {{"anonymous", &api, 0, 0, 0, 0}, {"anonymous", &db, 0, 0, 0, 0}};
    catalog_query_t late = {"anonymous", NULL, 1, 250 * S, 350 * S, 0};
    catalog_strings_t s;
    CHECK(catalog_label_names(st, &all, 1, 0, &s, &err) == 0);
    check_strings(&s, "env,service_name");
    free(s.v);
    CHECK(catalog_label_names(st, &all, 1, CATALOG_PSEUDO_LABELS, &s, &err) == 0);
    check_strings(&s, "__name__,__profile_type__,env,service_name");
    free(s.v);
    CHECK(catalog_label_values(st, two, 2, "service_name", &s, &err) == 0);
    check_strings(&s, "api,db");
    free(s.v);
    CHECK(catalog_label_values(st, two, 2, "env", &s, &err) == 0);
    check_strings(&s, "dev,prod");
    free(s.v);
    CHECK(catalog_label_values(st, &all, 1, "__name__", &s, &err) == 0);
    check_strings(&s, "memory,process_cpu");
    free(s.v);
    CHECK(catalog_label_values(st, &late, 1, "service_name", &s, &err) == 0);
    check_strings(&s, "web");
    free(s.v);
    CHECK(catalog_app_names(st, &all, 1, &s, &err) == 0);
    check_strings(&s, "api.cpu,db.alloc_space,web.cpu");
    free(s.v);
    CHECK(catalog_label_values(st, &all, 1, "nope", &s, &err) == 0 && s.v != NULL && s.n == 0);
    free(s.v);

    catalog_types_t t;
    CHECK(catalog_profile_types(st, &all, 1, &t, &err) == 0);
    CHECK_INT(t.n, 2);
    CHECK_STR(t.v[0].id, "memory:alloc_space:bytes:space:bytes");
    CHECK_STR(t.v[0].parts.sample_type, "alloc_space");
    CHECK_STR(t.v[1].id, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    CHECK_STR(t.v[1].parts.period_unit, "nanoseconds");
    free(t.v);

    /* Connect's Series: projected onto env, the three series of api and db are two sets. */
    char *env[] = {"env"};
    catalog_label_sets_t ls;
    CHECK(catalog_label_sets(st, two, 2, env, 1, &ls, &err) == 0);
    CHECK_INT(ls.n, 2);
    CHECK(ls.n == 2 && ls.v[0].n == 1 && ls.v[1].n == 1);
    if (ls.n == 2) {
        CHECK_STR(ls.v[0].kv[1], "dev");
        CHECK_STR(ls.v[1].kv[0], "env");
        CHECK_STR(ls.v[1].kv[1], "prod");
    }
    free(ls.v);
    CHECK(catalog_label_sets(st, &late, 1, NULL, 0, &ls, &err) == 0);
    CHECK(ls.n == 1 && ls.v[0].n == 3);
    if (ls.n == 1 && ls.v[0].n == 3) {
        CHECK_STR(ls.v[0].kv[0], "__name__");
        CHECK_STR(ls.v[0].kv[1], "process_cpu");
        CHECK_STR(ls.v[0].kv[2], "__profile_type__");
        CHECK_STR(ls.v[0].kv[5], "web");
    }
    free(ls.v);

    /* Group-by: a missing label is "", rows sorted by their values. */
    char *by[] = {"env", "service_name"};
    catalog_groups_t g;
    CHECK(catalog_groups(st, &all, 1, by, 2, &g, &err) == 0);
    CHECK(g.n == 4 && g.width == 2);
    catalog_strings_t flat = {g.v, g.n * g.width};
    check_strings(&flat, ",web,dev,api,prod,api,prod,db");
    free(g.v);
    CHECK(catalog_groups(st, &late, 1, NULL, 0, &g, &err) == 0 && g.n == 1 && g.width == 0);
    free(g.v);

    /* Past the deadline: HR_ETIMEOUT and nothing to free. */
    hr_err_t e = {0};
    two[0].deadline_ns = two[1].deadline_ns = 1;
    CHECK(catalog_label_names(st, two, 2, 0, &s, &e) == -1 && e.code == HR_ETIMEOUT && s.v == NULL);
    selector_destroy(&db);
    selector_destroy(&api);
    store_close(st);
}

/* A small symtab for the stack selectors: main > alpha > beta, main > gamma (in lib.go),
 * main > [outer > inner] (one location, inner inlined into outer), main > 0x1234 (no
 * symbols). Stack ids come back in *st in that order. */
enum { ST_MAIN, ST_ALPHA, ST_BETA, ST_GAMMA, ST_INLINED, ST_ADDR, ST_N };

static uint32_t fn(symtab_t *t, const char *name, const char *file) {
    sym_function_t f = {.name = symtab_string(t, name, strlen(name)), .filename = symtab_string(t, file, strlen(file))};
    return symtab_function(t, &f);
}

static uint32_t loc1(symtab_t *t, const char *name, const char *file) {
    sym_line_t l = {.function = fn(t, name, file), .line = 1};
    return symtab_location(t, 0, 0, &l, 1);
}

static symtab_t *selector_symtab(uint32_t st[ST_N]) {
    symtab_t *t = symtab_new();
    CHECK(t != NULL);
    st[ST_MAIN] = symtab_stack(t, 0, loc1(t, "main", "main.go"));
    st[ST_ALPHA] = symtab_stack(t, st[ST_MAIN], loc1(t, "alpha", "main.go"));
    st[ST_BETA] = symtab_stack(t, st[ST_ALPHA], loc1(t, "beta", "main.go"));
    st[ST_GAMMA] = symtab_stack(t, st[ST_MAIN], loc1(t, "gamma", "lib.go"));
    sym_line_t in[2] = {{.function = fn(t, "inner", "main.go"), .line = 7},
                        {.function = fn(t, "outer", "main.go"), .line = 3}};
    st[ST_INLINED] = symtab_stack(t, st[ST_MAIN], symtab_location(t, 0, 0, in, 2));
    st[ST_ADDR] = symtab_stack(t, st[ST_MAIN], symtab_location(t, 0, 0x1234, NULL, 0));
    for (int i = 0; i < ST_N; i++) CHECK(st[i] != SYM_NONE);
    return t;
}

/* The selected stacks of m as a string of their ST_ letters (m[st[i]] set: 'a' + i). */
static void selected(const uint8_t *m, const uint32_t st[ST_N], char out[ST_N + 1]) {
    size_t n = 0;
    for (int i = 0; i < ST_N; i++)
        if (m[st[i]]) out[n++] = (char)('a' + i);
    out[n] = 0;
}

static void check_callsite(const symtab_t *t, const uint32_t st[ST_N], const char *const *names, size_t n,
                           const char *want) {
    callsite_t cs = {names, n};
    uint8_t *m = callsite_match(t, &cs);
    CHECK(m != NULL);
    if (!m) return;
    char got[ST_N + 1];
    selected(m, st, got);
    CHECK_STR(got, want);
    free(m);
}

void test_callsite_prefixes(void) {
    uint32_t st[ST_N];
    symtab_t *t = selector_symtab(st);
    check_callsite(t, st, NULL, 0, "abcdef"); /* an empty call site selects every stack */
    const char *main_alpha[] = {"main", "alpha"};
    check_callsite(t, st, main_alpha, 2, "bc"); /* the prefix and what is under it */
    const char *alpha[] = {"alpha"};
    check_callsite(t, st, alpha, 1, ""); /* rooted: a frame further down is no prefix */
    const char *deep[] = {"main", "alpha", "beta", "delta"};
    check_callsite(t, st, deep, 4, ""); /* longer than every stack */
    const char *inl[] = {"main", "outer", "inner"};
    check_callsite(t, st, inl, 3, "e"); /* inlined frames root first: caller, then callee */
    const char *inl_wrong[] = {"main", "inner"};
    check_callsite(t, st, inl_wrong, 2, "");
    const char *addr[] = {"main", "0x1234"};
    check_callsite(t, st, addr, 2, "f"); /* a location without symbols is its address */
    symtab_free(t);
}

static void check_filter(const symtab_t *t, const uint32_t st[ST_N], const char *focus, const char *ignore,
                         const char *want) {
    hr_err_t err = {0};
    stackfilter_t f = {0};
    hr_regex_t *fo = focus ? hr_regex_compile(focus, &err) : NULL, *ig = ignore ? hr_regex_compile(ignore, &err) : NULL;
    CHECK(!focus || fo);
    CHECK(!ignore || ig);
    f.focus = fo;
    f.ignore = ig;
    uint8_t *m = stackfilter_match(t, &f);
    CHECK(m != NULL);
    if (m) {
        char got[ST_N + 1];
        selected(m, st, got);
        CHECK_STR(got, want);
        CHECK_INT(m[0], 0); /* a sample without locations is dropped once a filter is set */
        free(m);
    }
    hr_regex_free(fo);
    hr_regex_free(ig);
}

void test_stackfilter_focus_and_ignore(void) {
    uint32_t st[ST_N];
    symtab_t *t = selector_symtab(st);
    check_filter(t, st, "beta", NULL, "c");          /* focus: a location of the stack matches */
    check_filter(t, st, "a$", NULL, "bcd");          /* unanchored search: alpha, beta, gamma */
    check_filter(t, st, "lib\\.go", NULL, "d");      /* file names count too */
    check_filter(t, st, "inner", NULL, "e");         /* any line of an inlined location */
    check_filter(t, st, NULL, "alpha", "adef");      /* ignore drops every stack through it */
    check_filter(t, st, "main", "alpha|gam", "aef"); /* ignore wins over focus */
    symtab_free(t);
}

/* Group-by: each group's numbers are the narrowed query's, ranked by total, the rest
 * summed into "other"; a series without the label is the "" group. */
void test_groupby_ranks_and_sums_other(void) {
    store_t *st = new_store("groupby");
    put_folded(st, "app.cpu{pod=a}", "main;x 5\n", 100, 100);
    put_folded(st, "app.cpu{pod=b}", "main;x 3\n", 100, 100);
    put_folded(st, "app.cpu{pod=b}", "main;y 7\n", 160, 100);
    put_folded(st, "app.cpu", "main;z 1\n", 100, 100);
    put_folded(st, "other.cpu{pod=a}", "main;w 50\n", 100, 100); /* not selected */
    selector_t sel;
    hr_err_t err = {0};
    CHECK(selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"app\"}", &sel, &err) == 0);
    merge_query_t q = {.tenant = "anonymous", .sel = &sel, .from = 0, .until = 200 * S, .step = 60 * S};
    merge_result_t whole;
    CHECK(merge_run(st, &q, &whole, &err) == 0);
    char *names[] = {"pod"};
    for (size_t limit = 0; limit <= 2; limit += 2) {
        grouped_t g;
        CHECK(groupby_run(st, &q, &sel, names, 1, limit, &g, &err) == 0);
        CHECK_INT(g.n, limit ? 2 : 3);
        CHECK_INT(g.nother, limit ? 1 : 0);
        if (g.n == (limit ? 2u : 3u)) {     /* else the groups below are not there to read */
            CHECK_STR(g.v[0].vals[0], "b"); /* 10 before 5 before 1 */
            CHECK_STR(g.v[1].vals[0], "a");
            CHECK(g.v[0].m.total == 2 * g.v[1].m.total);
            CHECK_INT(g.v[0].m.nbuckets, whole.nbuckets);
            double sum = g.other_total;
            for (size_t i = 0; i < g.n; i++) sum += g.v[i].m.total;
            CHECK(sum == whole.total); /* the groups add up to the whole */
            /* the "" group, 1 of 16: kept last, or summed into other past the limit */
            if (limit) CHECK(g.other_total * 16 == whole.total && g.other != NULL);
            else CHECK(!strcmp(g.v[2].vals[0], "") && g.v[2].m.total * 16 == whole.total);
        }
        grouped_destroy(&g);
    }
    char *too_many[GROUPBY_MAX_LABELS + 1];
    for (size_t i = 0; i <= GROUPBY_MAX_LABELS; i++) too_many[i] = "pod";
    grouped_t g;
    hr_err_t e = {0};
    CHECK(groupby_run(st, &q, &sel, too_many, GROUPBY_MAX_LABELS + 1, 0, &g, &e) == -1 && e.code == HR_EINVAL);
    grouped_destroy(&g);
    merge_result_destroy(&whole);
    selector_destroy(&sel);
    store_close(st);
}
