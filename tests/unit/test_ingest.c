/* test_ingest.c - app names, folded text, pprof decoding, WAL request records. */
#include <stdlib.h>

#include "ingest/appname.h"
#include "ingest/delta.h"
#include "ingest/folded.h"
#include "wire/gzip.h"
#include "ingest/jfr.h"
#include "ingest/otlp.h"
#include "wire/profile.pb-c.h"
#include "ingest/pprof.h"
#include "ingest/pprof_edit.h"
#include "wire/push.pb-c.h"
#include "common/arena.h"
#include "common/base64.h"
#include "common/pbjson.h"
#include "wire/querier.pb-c.h"
#include "ingest/push.h"
#include "ingest/request.h"
#include "tests/unit/unit.h"

void test_appname(void) {
    char app[256];
    labels_t l;
    hr_err_t err = {0};
    labels_init(&l);
    CHECK(appname_parse("api.cpu{env=prod, region = eu,otel.scope.name=x}", app, sizeof app, &l, &err) == 0);
    CHECK_STR(app, "api.cpu");
    CHECK_INT(l.n, 3);
    CHECK_STR(labels_get(&l, "region"), "eu");
    CHECK_STR(labels_get(&l, "otel.scope.name"), "x");
    labels_destroy(&l);
    labels_init(&l);
    CHECK(appname_parse("svc{}", app, sizeof app, &l, &err) == 0 && l.n == 0);
    CHECK(appname_parse("", app, sizeof app, &l, &err) == -1 && err.code == HR_EINVAL);
    CHECK(appname_parse("bad name", app, sizeof app, &l, &err) == -1);
    CHECK(appname_parse("a{k=v", app, sizeof app, &l, &err) == -1);
    CHECK(appname_parse("a{1k=v}", app, sizeof app, &l, &err) == -1);
    CHECK(appname_parse("a{k}", app, sizeof app, &l, &err) == -1);
    CHECK(appname_parse("a{k=v}x", app, sizeof app, &l, &err) == -1);
    CHECK(appname_parse("a{k=\xff}", app, sizeof app, &l, &err) == -1);
    labels_destroy(&l);
}

void test_folded(void) {
    batch_t b;
    batch_init(&b);
    labels_t l;
    labels_init(&l);
    batch_profile_t *p = batch_profile(&b, "t:a:b:c:d", &l, 1, 0);
    hr_err_t err = {0};
    const char *text = "a;b;c 10\r\n\na;b 5\nx y;z 2\n";
    CHECK(folded_decode(text, strlen(text), 0, 3, &b, p, &err) == 0);
    CHECK_INT(p->n, 3);
    CHECK_INT(p->values[0] + p->values[1] + p->values[2], 51);
    CHECK_INT(symtab_stack_depth(b.sym, p->stacks[0]), 3);
    CHECK(b.sym->stacks[p->stacks[0]].parent == p->stacks[1]); /* a;b is the prefix of a;b;c */
    CHECK(folded_decode("a;b notanumber\n", 15, 0, 1, &b, p, &err) == -1 && err.code == HR_EUNPROC);
    CHECK(strstr(err.msg, "line 1") != NULL);
    CHECK(folded_decode("a;b\n", 4, 0, 1, &b, p, &err) == -1);
    CHECK(folded_decode("a;b\na;b\n", 8, 1, 1, &b, p, &err) == 0); /* lines format */
    CHECK_INT(p->n, 5);
    labels_destroy(&l);
    batch_destroy(&b);
}

static int decode_file(const char *rel, batch_t *b, hr_err_t *err) {
    size_t n;
    unsigned char *d = unit_read(rel, &n);
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "t");
    pprof_opts_t o = {.base = &l, .time_ns = 1, .now_ns = 1, .max_decompressed = 64 << 20};
    int rc = pprof_decode(d, n, &o, b, err);
    labels_destroy(&l);
    free(d);
    return rc;
}

static int64_t type_total(const batch_t *b, const char *type) {
    int64_t t = 0;
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->p[i].profile_type, type))
            for (size_t j = 0; j < b->p[i].n; j++) t += b->p[i].values[j];
    return t;
}

/* The census counts from the wire exactly what protobuf-c unpacks, and the decode
 * budget refuses a profile before it is unpacked. */
void test_pprof_census_and_budget(void) {
    const char *files[] = {"pprof/pprof-large.cpu.pb.gz", "corpus/gen__go119.heap.pb.gz",
                           "corpus/gen__go119.cpu.labels.uncompressed.pb", "corpus/gen__go119.threadcreate.pb.gz"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t n, rawlen;
        unsigned char *d = unit_read(files[f], &n), *raw = NULL;
        hr_err_t err = {0};
        const uint8_t *data = d;
        rawlen = n;
        if (gz_is_gzip(d, n)) {
            CHECK(gz_inflate(d, n, 64 << 20, &raw, &rawlen, &err) == 0);
            data = raw;
        }
        pprof_census_t c;
        CHECK(pprof_census(data, rawlen, &c, &err) == 0);
        Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, rawlen, data);
        CHECK(p != NULL);
        if (p) {
            size_t ids = 0, values = 0, labels = 0, lines = 0;
            for (size_t i = 0; i < p->n_sample; i++)
                ids += p->sample[i]->n_location_id, values += p->sample[i]->n_value, labels += p->sample[i]->n_label;
            for (size_t i = 0; i < p->n_location; i++) lines += p->location[i]->n_line;
            CHECK_INT(c.samples, p->n_sample);
            CHECK_INT(c.location_ids, ids);
            CHECK_INT(c.values, values);
            CHECK_INT(c.labels, labels);
            CHECK_INT(c.locations, p->n_location);
            CHECK_INT(c.lines, lines);
            CHECK_INT(c.functions, p->n_function);
            CHECK_INT(c.mappings, p->n_mapping);
            CHECK_INT(c.strings, p->n_string_table);
            CHECK(c.bytes > rawlen);
            perftools__profiles__profile__free_unpacked(p, NULL);
        }
        free(raw);
        free(d);
    }
    /* pprof-large (24,029 samples) against a budget too small for it, then one that
     * other decodes hold, then one that fits; a fitting decode gives its bytes back. */
    size_t n;
    unsigned char *d = unit_read("pprof/pprof-large.cpu.pb.gz", &n);
    labels_t l;
    labels_init(&l);
    mem_budget_t small = {.cap = 1 << 20}, busy = {.cap = 256 << 20}, roomy = {.cap = 256 << 20};
    atomic_store(&busy.used, (size_t)250 << 20);
    pprof_opts_t o = {.base = &l, .time_ns = 1, .now_ns = 1, .max_decompressed = 64 << 20, .budget = &small};
    batch_t b;
    hr_err_t err = {0};
    batch_init(&b);
    CHECK(pprof_decode(d, n, &o, &b, &err) == -1 && err.code == HR_ETOOBIG);
    o.budget = &busy;
    CHECK(pprof_decode(d, n, &o, &b, &err) == -1 && err.code == HR_ELIMIT);
    o.budget = &roomy;
    CHECK(pprof_decode(d, n, &o, &b, &err) == 0);
    CHECK_INT(atomic_load(&roomy.used), 0);
    batch_destroy(&b);
    batch_init(&b);
    o.budget = NULL;
    o.max_samples = 1; /* refused from the census, before unpacking */
    CHECK(pprof_decode(d, n, &o, &b, &err) == -1 && err.code == HR_ETOOBIG);
    batch_destroy(&b);
    labels_destroy(&l);
    free(d);
}

void test_pprof_totals(void) {
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    /* Totals from ../shared/testdata/SOURCES.md (what go tool pprof reports). */
    CHECK(decode_file("pprof/pprof-large.cpu.pb.gz", &b, &err) == 0);
    CHECK_INT(type_total(&b, "process_cpu:samples:count:cpu:nanoseconds"), 24029);
    CHECK_INT(type_total(&b, "process_cpu:cpu:nanoseconds:cpu:nanoseconds"), 240290000000LL);
    batch_destroy(&b);
    batch_init(&b);
    CHECK(decode_file("pprof/go-runtime-heap.pb.gz", &b, &err) == 0);
    int types = 0;
    for (size_t i = 0; i < b.n; i++) types += !strncmp(b.p[i].profile_type, "memory:", 7);
    CHECK_INT(types, 4);
    CHECK(type_total(&b, "memory:inuse_space:bytes:space:bytes") > 0);
    batch_destroy(&b);
    batch_init(&b);
    CHECK(decode_file("corpus/gen__go119.cpu.empty.pb.gz", &b, &err) == 0); /* zero samples is valid */
    CHECK_INT(b.n, 2);
    CHECK_INT(batch_samples(&b), 0);
    batch_destroy(&b);
    batch_init(&b);
    CHECK(decode_file("corpus/gen__go119.threadcreate.pb.gz", &b, &err) == 0); /* empty stack */
    CHECK_STR(b.p[0].profile_type, "threadcreate:threadcreate:count:threadcreate:count");
    batch_destroy(&b);
    batch_init(&b);
    CHECK(decode_file("corpus/parca__pkg__normalizer__profile.pb.gz", &b, &err) == 0); /* empty type names */
    CHECK_STR(b.p[0].profile_type, "unknown:unknown:unknown:unknown:unknown");
    batch_destroy(&b);
}

void test_pprof_twice_no_new_symbols(void) {
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    CHECK(decode_file("pprof/go-runtime-cpu-00.pb.gz", &b, &err) == 0);
    size_t s = b.sym->nstrings, f = b.sym->nfunctions, l = b.sym->nlocations, st = b.sym->nstacks, m = b.sym->nmappings;
    CHECK(decode_file("pprof/go-runtime-cpu-00.pb.gz", &b, &err) == 0);
    CHECK_INT(b.sym->nstrings, s);
    CHECK_INT(b.sym->nfunctions, f);
    CHECK_INT(b.sym->nlocations, l);
    CHECK_INT(b.sym->nstacks, st);
    CHECK_INT(b.sym->nmappings, m);
    batch_destroy(&b);
}

void test_pprof_negative(void) {
    static const char *bad[] = {
        "corpus/synthetic__empty.pb",
        "corpus/synthetic__empty.pb.gz",
        "corpus/synthetic__truncated.pb.gz",
        "corpus/pprof__profile__testdata__cppbench.cpu.legacy",
        "corpus/flamegraph__test__results__perf-java-stacks-01-collapsed-pid.txt",
        "corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        batch_t b;
        batch_init(&b);
        hr_err_t err = {0};
        CHECK(decode_file(bad[i], &b, &err) == -1);
        CHECK(err.code == HR_EUNPROC && err.msg[0]);
        batch_destroy(&b);
    }
    /* A gzip bomb stops at the limit. */
    size_t n;
    unsigned char *d = unit_read("corpus/gen__go119.allocs.huge.pb.gz", &n);
    batch_t b;
    batch_init(&b);
    labels_t l;
    labels_init(&l);
    pprof_opts_t o = {.base = &l, .max_decompressed = 1 << 20};
    hr_err_t err = {0};
    CHECK(pprof_decode(d, n, &o, &b, &err) == -1 && err.code == HR_ETOOBIG);
    free(d);
    batch_destroy(&b);
}

void test_pprof_labels_split_series(void) {
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    CHECK(decode_file("pprof/go-runtime-cpu-00.pb.gz", &b, &err) == 0);
    int with_endpoint = 0;
    for (size_t i = 0; i < b.n; i++) with_endpoint += labels_get(&b.p[i].labels, "endpoint") != NULL;
    CHECK(b.n >= 4 && with_endpoint >= 4); /* per endpoint x 2 sample types */
    batch_destroy(&b);
}

void test_request_roundtrip(void) {
    ingest_request_t r = {.tenant = "anonymous",
                          .name = "app.cpu{a=b}",
                          .format = INGEST_FOLDED,
                          .spy_name = NULL,
                          .sample_type_config = "{}",
                          .has_from = 1,
                          .from_ns = 5,
                          .until_ns = -3,
                          .received_ns = 9,
                          .sample_rate = 100,
                          .body = (const uint8_t *)"a;b 1",
                          .body_len = 5};
    buf_t b;
    buf_init(&b);
    ingest_request_encode(&r, &b);
    ingest_request_t d;
    hr_err_t err = {0};
    CHECK(ingest_request_decode(b.data, b.len, &d, &err) == 0);
    CHECK_STR(d.name, r.name);
    CHECK_STR(d.sample_type_config, "{}");
    CHECK(d.spy_name == NULL && d.has_from && !d.has_until && d.from_ns == 5 && d.until_ns == -3);
    CHECK(d.body_len == 5 && !memcmp(d.body, "a;b 1", 5));
    ingest_request_t cut;
    CHECK(ingest_request_decode(b.data, b.len - 2, &cut, &err) == -1);
    batch_t bt;
    batch_init(&bt);
    ingest_limits_t lim = {1 << 20, 0, 64, NULL, 2048};
    CHECK(ingest_to_batch(&d, &lim, &bt, &err) == 0);
    CHECK_STR(bt.p[0].profile_type, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    CHECK_INT(bt.p[0].values[0], 10000000); /* 1 sample at 100 Hz */
    CHECK_STR(labels_get(&bt.p[0].labels, "service_name"), "app");
    batch_destroy(&bt);
    CHECK(d.aux_body == NULL);
    /* A version-1 record (before aux_body) still decodes. */
    b.data[0] = 1;
    CHECK(ingest_request_decode(b.data, b.len - 1, &d, &err) == 0 && d.body_len == 5 && !d.aux_body);
    buf_free(&b);
    buf_init(&b);
    r.aux_body = (const uint8_t *)"prev", r.aux_len = 4;
    ingest_request_encode(&r, &b);
    CHECK(ingest_request_decode(b.data, b.len, &d, &err) == 0 && d.aux_len == 4 && !memcmp(d.aux_body, "prev", 4));
    buf_free(&b);
}

static batch_profile_t *delta_profile(batch_t *b, const char *type, const char *const *leaf, const int64_t *v,
                                      size_t n) {
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "svc");
    batch_profile_t *p = batch_profile(b, type, &l, 1, 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t s = symtab_string(b->sym, leaf[i], strlen(leaf[i]));
        sym_function_t f = {s, s, s, 0};
        sym_line_t line = {symtab_function(b->sym, &f), 1};
        sym_mapping_t m = {0, 0, 0, s, 0};
        batch_sample(p, symtab_stack(b->sym, 0, symtab_location(b->sym, symtab_mapping(b->sym, &m), 0, &line, 1)),
                     v[i]);
    }
    labels_destroy(&l);
    return p;
}

static int64_t leaf_value(const batch_t *b, const batch_profile_t *p, const char *leaf) {
    int64_t sum = 0;
    for (size_t i = 0; i < p->n; i++) {
        const sym_location_t *loc = &b->sym->locations[b->sym->stacks[p->stacks[i]].location];
        if (!strcmp(symtab_str(b->sym, b->sym->functions[b->sym->lines[loc->first_line].function].name), leaf))
            sum += p->values[i];
    }
    return sum;
}

/* prev_profile deltas: per stack cur - prev, a decrease keeps cur (a reset), stacks
 * only in prev vanish, repeats are summed first, non-cumulative profiles untouched. */
void test_delta(void) {
    batch_t cur, prev;
    batch_init(&cur);
    batch_init(&prev);
    const char *alloc = "memory:alloc_space:bytes:space:bytes", *inuse = "memory:inuse_space:bytes:space:bytes";
    const char *cl[] = {"a", "b", "c", "c"}, *pl[] = {"d", "b", "a"};
    const int64_t cv[] = {10, 5, 1, 2}, pv[] = {9, 7, 4};
    delta_profile(&cur, alloc, cl, cv, 4);
    delta_profile(&cur, inuse, cl, cv, 4);
    delta_profile(&prev, alloc, pl, pv, 3);
    delta_profile(&prev, inuse, pl, pv, 3);
    uint8_t cum[] = {1, 0};
    hr_err_t err = {0};
    CHECK(delta_subtract(&cur, cum, &prev, &err) == 0);
    CHECK_INT(leaf_value(&cur, &cur.p[0], "a"), 6);
    CHECK_INT(leaf_value(&cur, &cur.p[0], "b"), 5); /* went down: a reset, keep the current */
    CHECK_INT(leaf_value(&cur, &cur.p[0], "c"), 3);
    CHECK_INT(leaf_value(&cur, &cur.p[0], "d"), 0);
    CHECK_INT(cur.p[0].n, 3);
    CHECK_INT(leaf_value(&cur, &cur.p[1], "a"), 10); /* inuse: as uploaded */
    CHECK_INT(cur.p[1].n, 4);
    batch_destroy(&cur);
    batch_destroy(&prev);
}

void test_base64(void) {
    static const char *in[] = {"aGVsbG8gd29ybGQ=", "aGVsbG8gd29ybGQ", "aGVs-G8_", "aGVs+G8/"};
    uint8_t *out;
    size_t n;
    CHECK(base64_decode(in[0], strlen(in[0]), &out, &n) == 0 && n == 11 && !memcmp(out, "hello world", 11));
    free(out);
    CHECK(base64_decode(in[1], strlen(in[1]), &out, &n) == 0 && n == 11); /* unpadded */
    free(out);
    uint8_t *a, *b;
    size_t na, nb;
    CHECK(base64_decode(in[2], 8, &a, &na) == 0 && base64_decode(in[3], 8, &b, &nb) == 0); /* URL-safe == standard */
    CHECK(na == nb && na == 6 && !memcmp(a, b, na));
    free(a);
    free(b);
    CHECK(base64_decode("ab$d", 4, &out, &n) == -1);
}

/* proto3 JSON both ways: camelCase and original names, int64 as string or number,
 * enums by name, bytes as base64, unknown keys skipped, wrong types refused. */
void test_pbjson(void) {
    arena_t *ar = arena_new();
    hr_err_t err = {0};
    const char *in = "{\"profileTypeID\":\"a:b:c:d:e\",\"label_selector\":\"{x=\\\"1\\\"}\",\"start\":\"5\",\"end\":7,"
                     "\"maxNodes\":\"9\",\"format\":\"PROFILE_FORMAT_TREE\",\"stackTraceSelector\":{\"x\":1}}";
    Querier__V1__SelectMergeStacktracesRequest *q =
        (void *)pbjson_decode(&querier__v1__select_merge_stacktraces_request__descriptor, in, strlen(in), ar, 0, &err);
    CHECK(q != NULL);
    if (q) {
        CHECK_STR(q->profile_typeid, "a:b:c:d:e");
        CHECK_STR(q->label_selector, "{x=\"1\"}");
        CHECK_INT(q->start, 5);
        CHECK_INT(q->end, 7);
        CHECK_INT(q->max_nodes, 9);
        CHECK_INT(q->format, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE);
    }
    const char *bad = "{\"start\":\"soon\"}";
    CHECK(pbjson_decode(&querier__v1__select_merge_stacktraces_request__descriptor, bad, strlen(bad), ar, 0, &err) ==
          NULL);
    CHECK(err.code == HR_EINVAL && strstr(err.msg, "start"));
    err = (hr_err_t){0};
    CHECK(pbjson_decode(&querier__v1__select_merge_stacktraces_request__descriptor, "[1]", 3, ar, 0, &err) == NULL);
    static const char *range[] = {"{\"end\":1e300}", "{\"end\":\"99999999999999999999\"}", "{\"format\":4294967296}"};
    for (int i = 0; i < 3; i++) { /* out of range: refused, not wrapped (fuzzer find) */
        err = (hr_err_t){0};
        CHECK(pbjson_decode(&querier__v1__select_merge_stacktraces_request__descriptor, range[i], strlen(range[i]), ar,
                            0, &err) == NULL);
    }
    /* Strict: the unknown key nested in stackTraceSelector is named, not skipped. */
    err = (hr_err_t){0};
    CHECK(pbjson_decode(&querier__v1__select_merge_stacktraces_request__descriptor, in, strlen(in), ar, PBJSON_STRICT,
                        &err) == NULL);
    CHECK(err.code == HR_EINVAL && strstr(err.msg, "field `x` of querier.v1.StackTraceSelector"));
    /* The proto side: field 7 (stack_trace_selector) holding an unknown field 50, and
     * field 11 (span_selector), which the type lists. */
    static const uint8_t wire[] = {0x3a, 0x03, 0x90, 0x03, 0x01, 0x5a, 0x01, 'a'};
    ProtobufCAllocator al = arena_pb_allocator(ar);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(&querier__v1__select_merge_stacktraces_request__descriptor, &al, sizeof wire, wire);
    char which[200] = "";
    CHECK(m && pb_unknown_field(m, which, sizeof which));
    CHECK_STR(which, "field 50 of querier.v1.StackTraceSelector");
    m = protobuf_c_message_unpack(&querier__v1__select_merge_stacktraces_request__descriptor, &al, 3, wire + 5);
    CHECK(m && !pb_unknown_field(m, which, sizeof which));

    int64_t vals[] = {0, -3, 1LL << 40};
    Querier__V1__Level lv = QUERIER__V1__LEVEL__INIT, *lvp = &lv;
    lv.n_values = 3, lv.values = vals;
    char *names[] = {"total", "a\"b"};
    Querier__V1__FlameGraph g = QUERIER__V1__FLAME_GRAPH__INIT;
    g.n_names = 2, g.names = names, g.n_levels = 1, g.levels = &lvp, g.total = 42, g.max_self = 1;
    Querier__V1__SelectMergeStacktracesResponse r = QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    r.flamegraph = &g;
    r.tree = (ProtobufCBinaryData){5, (uint8_t *)"hello"};
    r.dot = "digraph \"x\" {\n}";
    buf_t b;
    buf_init(&b);
    CHECK(pbjson_encode(&r.base, &b) == 0);
    buf_putc(&b, 0);
    CHECK_STR((char *)b.data, "{\"flamegraph\":{\"names\":[\"total\",\"a\\\"b\"],\"levels\":[{\"values\":[\"0\",\"-3\","
                              "\"1099511627776\"]}],\"total\":\"42\",\"maxSelf\":\"1\"},\"tree\":\"aGVsbG8=\","
                              "\"dot\":\"digraph \\\"x\\\" {\\n}\"}");
    /* ...and back. */
    Querier__V1__SelectMergeStacktracesResponse *back = (void *)pbjson_decode(
        &querier__v1__select_merge_stacktraces_response__descriptor, (char *)b.data, b.len - 1, ar, 0, &err);
    CHECK(back && back->flamegraph && back->flamegraph->n_levels == 1 &&
          back->flamegraph->levels[0]->values[2] == 1LL << 40);
    CHECK(back && back->tree.len == 5 && !memcmp(back->tree.data, "hello", 5));
    CHECK(back && back->flamegraph && !strcmp(back->flamegraph->names[1], "a\"b"));
    buf_free(&b);
    arena_free(ar);
}

/* The body of a push.v1 request with one series (service_name=t, plus __name__ when
 * given) holding pprof. Caller frees. */
static uint8_t *push_body(const char *name, const uint8_t *pprof, size_t n, size_t *len) {
    Push__V1__LabelPair l[2] = {PUSH__V1__LABEL_PAIR__INIT, PUSH__V1__LABEL_PAIR__INIT}, *lp[2] = {&l[0], &l[1]};
    l[0].name = "service_name", l[0].value = "t";
    l[1].name = "__name__", l[1].value = (char *)name;
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT, *sp = &sample;
    sample.raw_profile.data = (uint8_t *)pprof, sample.raw_profile.len = n;
    Push__V1__RawProfileSeries ser = PUSH__V1__RAW_PROFILE_SERIES__INIT, *serp = &ser;
    ser.n_labels = name ? 2 : 1, ser.labels = lp, ser.n_samples = 1, ser.samples = &sp;
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.n_series = 1, req.series = &serp;
    *len = push__v1__push_request__get_packed_size(&req);
    uint8_t *out = malloc(*len);
    push__v1__push_request__pack(&req, out);
    return out;
}

/* Decodes r into a fresh batch and returns the total of type (-1 when decoding failed). */
static int64_t request_total(const ingest_request_t *r, const char *type, size_t *dropped) {
    ingest_limits_t lim = {64 << 20, 0, 64, NULL, 2048};
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    int64_t t = ingest_to_batch(r, &lim, &b, &err) ? -1 : type_total(&b, type);
    if (dropped) *dropped = b.dropped_negative_gauge;
    batch_destroy(&b);
    return t;
}

/* Go's block and mutex profiles have the same sample types; what tells them apart
 * is how they arrive, as Pyroscope reads it: the push's __name__, the display names
 * of a sample_type_config (pyroscope-go's block_count/block_duration), and in JFR
 * the event (ThreadPark is block, JavaMonitorEnter is mutex). */
void test_block_types(void) {
    size_t n, len;
    unsigned char *blk = unit_read("pprof/go-runtime-block.pb.gz", &n);
    uint8_t *named = push_body("block", blk, n, &len);
    ingest_request_t r = {.tenant = "anonymous",
                          .name = "",
                          .format = INGEST_PUSH_PROTO,
                          .received_ns = 1,
                          .body = named,
                          .body_len = len};
    CHECK_INT(request_total(&r, "block:contentions:count:contentions:count", NULL), 413);
    CHECK_INT(request_total(&r, "block:delay:nanoseconds:contentions:count", NULL), 1220163243);
    CHECK_INT(request_total(&r, "mutex:contentions:count:contentions:count", NULL), 0);
    free(named);
    uint8_t *unnamed = push_body(NULL, blk, n, &len); /* nothing says block: Pyroscope's default names it mutex */
    r.body = unnamed, r.body_len = len;
    CHECK_INT(request_total(&r, "mutex:contentions:count:contentions:count", NULL), 413);
    free(unnamed);
    ingest_request_t ing = {.tenant = "anonymous",
                            .name = "app",
                            .format = INGEST_PPROF,
                            .received_ns = 1,
                            .body = blk,
                            .body_len = n,
                            .sample_type_config = "{\"contentions\":{\"display-name\":\"block_count\"},"
                                                  "\"delay\":{\"display-name\":\"block_duration\"}}"};
    CHECK_INT(request_total(&ing, "block:delay:nanoseconds:contentions:count", NULL), 1220163243);
    free(blk);

    unsigned char *jfr =
        unit_read("corpus/jfrparser__parser__testdata__cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz", &n);
    labels_t l;
    labels_init(&l);
    jfr_opts_t o = {.base = &l, .max_decompressed = 64 << 20};
    batch_t b;
    batch_init(&b);
    hr_err_t err = {0};
    CHECK(jfr_decode(jfr, n, &o, &b, &err) == 0);
    CHECK_INT(type_total(&b, "mutex:contentions:count:mutex:count"), 1773); /* monitor enters */
    CHECK_INT(type_total(&b, "block:contentions:count:block:count"), 435);  /* parks */
    CHECK(type_total(&b, "block:delay:nanoseconds:block:count") > 0);
    batch_destroy(&b);
    labels_destroy(&l);
    free(jfr);
}

/* A scraped allocs delta keeps its alloc_* exactly and loses its inuse_*. */
void test_pprof_keep_types(void) {
    size_t n;
    unsigned char *d = unit_read("pprof/go-runtime-allocs.pb.gz", &n);
    const char *keep[] = {"alloc_objects", "alloc_space"};
    buf_t out;
    buf_init(&out);
    hr_err_t err = {0};
    CHECK(pprof_keep_types(d, n, 64 << 20, keep, 2, &out, &err) == 0);
    ingest_request_t r = {.tenant = "anonymous",
                          .name = "app",
                          .format = INGEST_PPROF,
                          .received_ns = 1,
                          .body = out.data,
                          .body_len = out.len};
    CHECK_INT(request_total(&r, "memory:alloc_objects:count:space:bytes", NULL), 64655759);
    CHECK_INT(request_total(&r, "memory:alloc_space:bytes:space:bytes", NULL), 3839968850LL);
    CHECK_INT(request_total(&r, "memory:inuse_space:bytes:space:bytes", NULL), 0);
    batch_t b;
    batch_init(&b);
    ingest_limits_t lim = {64 << 20, 0, 64, NULL, 2048};
    CHECK(ingest_to_batch(&r, &lim, &b, &err) == 0);
    for (size_t i = 0; i < b.n; i++) CHECK(!strncmp(b.p[i].profile_type, "memory:alloc_", 13));
    batch_destroy(&b);
    const char *none[] = {"samples"};
    size_t before = out.len;
    CHECK(pprof_keep_types(d, n, 64 << 20, none, 1, &out, &err) == -1 && err.code == HR_EUNPROC);
    CHECK(pprof_keep_types((const uint8_t *)"\xff\xff", 2, 64 << 20, keep, 2, &out, &err) == -1 &&
          err.code == HR_EUNPROC);
    CHECK(pprof_keep_types(d, n, 1024, keep, 2, &out, &err) == -1 && err.code == HR_ETOOBIG);
    CHECK_INT(out.len, before);
    buf_free(&out);
    free(d);
}

/* A pprof with inuse_space/bytes and alloc_space/bytes, one function per sample. */
static uint8_t *heap_pprof(const int64_t (*values)[2], size_t n, size_t *len) {
    char *strings[16] = {"", "inuse_space", "alloc_space", "bytes", "f0", "f1", "f2", "f3"};
    Perftools__Profiles__ValueType vt[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                            PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
    Perftools__Profiles__ValueType *vtp[2] = {&vt[0], &vt[1]};
    vt[0].type = 1, vt[0].unit = 3, vt[1].type = 2, vt[1].unit = 3;
    Perftools__Profiles__Sample s[4], *sp[4];
    Perftools__Profiles__Location loc[4], *locp[4];
    Perftools__Profiles__Line line[4], *linep[4];
    Perftools__Profiles__Function fn[4], *fnp[4];
    uint64_t ids[4];
    for (size_t i = 0; i < n && i < 4; i++) {
        perftools__profiles__sample__init(&s[i]);
        perftools__profiles__location__init(&loc[i]);
        perftools__profiles__line__init(&line[i]);
        perftools__profiles__function__init(&fn[i]);
        ids[i] = i + 1;
        fn[i].id = i + 1, fn[i].name = 4 + (int64_t)i, fnp[i] = &fn[i];
        line[i].function_id = i + 1, linep[i] = &line[i];
        loc[i].id = i + 1, loc[i].n_line = 1, loc[i].line = &linep[i], locp[i] = &loc[i];
        s[i].n_location_id = 1, s[i].location_id = &ids[i];
        s[i].n_value = 2, s[i].value = (int64_t *)values[i], sp[i] = &s[i];
    }
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_sample_type = 2, p.sample_type = vtp, p.n_sample = n, p.sample = sp, p.n_location = n, p.location = locp;
    p.n_function = n, p.function = fnp, p.n_string_table = 8, p.string_table = strings;
    *len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *out = malloc(*len);
    perftools__profiles__profile__pack(&p, out);
    return out;
}

/* Negative samples of a gauge are dropped and counted; a counter's are not touched. */
void test_negative_gauges_dropped(void) {
    const int64_t values[][2] = {{100, 50}, {-40, 30}, {-5, 7}, {20, 0}};
    size_t len, dropped = 0;
    uint8_t *pp = heap_pprof(values, 4, &len);
    ingest_request_t r = {
        .tenant = "anonymous", .name = "app", .format = INGEST_PPROF, .received_ns = 1, .body = pp, .body_len = len};
    CHECK_INT(request_total(&r, "memory:inuse_space:bytes:inuse_space:bytes", &dropped), 120);
    CHECK_INT(dropped, 2);
    CHECK_INT(request_total(&r, "memory:alloc_space:bytes:alloc_space:bytes", NULL), 87);
    free(pp);
}

/* Decodes r into b (fresh); 0 or -1. */
static int request_batch(const ingest_request_t *r, batch_t *b) {
    ingest_limits_t lim = {64 << 20, 0, 64, NULL, 2048};
    hr_err_t err = {0};
    batch_init(b);
    return ingest_to_batch(r, &lim, b, &err);
}

/* Packs NULL-terminated name/value pairs as a request's labels into out (fresh). */
static void pack_pairs(const char *const *kv, buf_t *out) {
    labels_t l;
    labels_init(&l);
    for (size_t i = 0; kv[i]; i += 2) labels_set(&l, kv[i], kv[i + 1]);
    buf_init(out);
    ingest_labels_pack(&l, out);
    labels_destroy(&l);
}

/* A pprof request carrying its series labels (the scraper's) stores exactly what the
 * same pprof pushed under those labels stores, and its WAL record (version 3) keeps
 * them; records without labels stay version 2, which older binaries replay. */
void test_request_labels(void) {
    size_t n, len;
    unsigned char *blk = unit_read("pprof/go-runtime-block.pb.gz", &n);
    buf_t packed;
    pack_pairs((const char *const[]){"service_name", "t", "__name__", "block", NULL}, &packed);
    ingest_request_t labelled = {.tenant = "anonymous",
                                 .name = "",
                                 .format = INGEST_PPROF,
                                 .received_ns = 1,
                                 .body = blk,
                                 .body_len = n,
                                 .labels = (char *)packed.data,
                                 .labels_len = packed.len};
    ingest_request_t push = labelled; /* the same pprof, pushed with the same labels (push_body) */
    uint8_t *pushed = push_body("block", blk, n, &len);
    push.format = INGEST_PUSH_PROTO, push.body = pushed, push.body_len = len, push.labels = NULL;
    batch_t a, b;
    CHECK(request_batch(&push, &a) == 0 && request_batch(&labelled, &b) == 0);
    CHECK_INT(b.n, a.n);
    for (size_t i = 0; i < a.n && i < b.n; i++) {
        CHECK_STR(b.p[i].profile_type, a.p[i].profile_type);
        CHECK(labels_equal(&b.p[i].labels, &a.p[i].labels));
        CHECK_INT(type_total(&b, b.p[i].profile_type), type_total(&a, a.p[i].profile_type));
    }
    CHECK_INT(type_total(&b, "block:delay:nanoseconds:contentions:count"), 1220163243);
    batch_destroy(&a);
    batch_destroy(&b);

    buf_t rec;
    buf_init(&rec);
    ingest_request_encode(&labelled, &rec);
    ingest_request_t d;
    hr_err_t err = {0};
    CHECK(rec.data[0] == 3 && ingest_request_decode(rec.data, rec.len, &d, &err) == 0);
    CHECK(d.labels_len == packed.len && !memcmp(d.labels, packed.data, packed.len) && d.body_len == n);
    CHECK(request_batch(&d, &b) == 0 && b.n == 2);
    CHECK_STR(labels_get(&b.p[0].labels, "service_name"), "t");
    batch_destroy(&b);
    rec.data[rec.len - 1] = 'x'; /* the last value loses its NUL */
    CHECK(ingest_request_decode(rec.data, rec.len, &d, &err) == -1);
    buf_free(&rec);
    buf_init(&rec);
    ingest_request_encode(&push, &rec);
    CHECK(rec.data[0] == 2);
    buf_free(&rec);

    /* As in a push: no service_name means unknown_service, __-labels are dropped, bad names refused. */
    buf_t p2;
    pack_pairs((const char *const[]){"env", "prod", "__internal", "x", NULL}, &p2);
    labelled.labels = (char *)p2.data, labelled.labels_len = p2.len;
    CHECK(request_batch(&labelled, &b) == 0 && b.n == 2);
    CHECK_STR(labels_get(&b.p[0].labels, "service_name"), "unknown_service");
    CHECK(labels_get(&b.p[0].labels, "__internal") == NULL);
    CHECK_STR(b.p[0].profile_type, "mutex:contentions:count:contentions:count"); /* no __name__: Pyroscope's default */
    batch_destroy(&b);
    buf_free(&p2);
    pack_pairs((const char *const[]){"env", "prod", "bad-name", "x", NULL}, &p2);
    labelled.labels = (char *)p2.data, labelled.labels_len = p2.len;
    CHECK(request_batch(&labelled, &b) == -1);
    batch_destroy(&b);
    /* Folded text takes its series from `name` only. */
    ingest_request_t folded = {.tenant = "anonymous",
                               .name = "app.cpu",
                               .format = INGEST_FOLDED,
                               .received_ns = 1,
                               .sample_rate = 100,
                               .body = (const uint8_t *)"a;b 1",
                               .body_len = 5,
                               .labels = (char *)p2.data,
                               .labels_len = p2.len};
    CHECK(request_batch(&folded, &b) == -1);
    batch_destroy(&b);
    buf_free(&p2);
    buf_free(&packed);
    free(pushed);
    free(blk);
}

/* A hand-written OTLP JSON request (ingest/otlp.h): a sound profile of two samples (one
 * with two events, one with a sample attribute) and a second profile whose stack index
 * is out of range. Exact stacks, values, labels, the mapping's build id and an address
 * past INT64_MAX (a decimal string), and the partial result naming the fault. */
void test_otlp_json(void) {
    static const char req[] =
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
        "\"svc\"}}]},\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"periodType\":{\"typeStrindex\":1,\"unitStrindex\":2}"
        ","
        "\"period\":\"10000000\",\"timeUnixNano\":\"1700000000000000000\",\"durationNano\":\"1000000000\","
        "\"samples\":[{\"stackIndex\":1,\"values\":[\"30\",\"12\"]},{\"stackIndex\":2,\"attributeIndices\":[1],"
        "\"values\":[\"5\"]}]},"
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[{\"stackIndex\":7,\"values\":[\"1\"]}]}"
        "]}]}],\"dictionary\":{"
        "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"work\",\"app\",\"process.executable.build_id.gnu\","
        "\"abc\",\"endpoint\",\"/x\"],"
        "\"mappingTable\":[{},{\"memoryStart\":\"4096\",\"memoryLimit\":\"18446744073709551615\","
        "\"filenameStrindex\":5,\"attributeIndices\":[0]}],"
        "\"attributeTable\":[{\"keyStrindex\":6,\"value\":{\"stringValue\":\"abc\"}},"
        "{\"keyStrindex\":8,\"value\":{\"stringValueStrindex\":9}}],"
        "\"functionTable\":[{},{\"nameStrindex\":3},{\"nameStrindex\":4}],"
        "\"locationTable\":[{},{\"mappingIndex\":1,\"address\":\"4112\",\"lines\":[{\"functionIndex\":1,\"line\":\"7\"}"
        "]},"
        "{\"mappingIndex\":1,\"address\":\"4128\",\"lines\":[{\"functionIndex\":2,\"line\":\"9\"}]}],"
        "\"stackTable\":[{},{\"locationIndices\":[2,1]},{\"locationIndices\":[1]}]}}";
    ingest_limits_t lim = {.max_decompressed = 1 << 20, .max_labels = 64, .max_label_value_bytes = 2048};
    batch_t b;
    CHECK(batch_init(&b) == 0);
    hr_err_t err = {0};
    ingest_partial_t part;
    CHECK(otlp_decode((const uint8_t *)req, sizeof req - 1, OTLP_JSON, &lim, 1, &b, &part, &err) == 0);
    CHECK_INT(part.rejected, 1);
    CHECK(strstr(part.message, "stack index 7 is out of range") != NULL);
    CHECK_INT(b.n, 2);
    for (size_t i = 0; i < b.n && b.n == 2; i++) {
        const batch_profile_t *p = &b.p[i];
        CHECK_STR(p->profile_type, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        CHECK_STR(labels_get(&p->labels, "service_name"), "svc");
        CHECK_INT(p->time_ns, 1700000000000000000LL);
        CHECK_INT(p->duration_ns, 1000000000LL);
        CHECK_INT(p->n, 1);
        const char *ep = labels_get(&p->labels, "endpoint");
        CHECK_INT(p->values[0], ep ? 5 : 42); /* two events: 30 + 12 */
        CHECK_INT(symtab_stack_depth(b.sym, p->stacks[0]), ep ? 1 : 2);
        const sym_location_t *leaf = &b.sym->locations[b.sym->stacks[p->stacks[0]].location];
        CHECK_STR(symtab_str(b.sym, b.sym->functions[b.sym->lines[leaf->first_line].function].name),
                  ep ? "main" : "work");
        CHECK_INT(leaf->address, ep ? 4112 : 4128);
        const sym_mapping_t *m = &b.sym->mappings[leaf->mapping];
        CHECK_STR(symtab_str(b.sym, m->build_id), "abc");
        CHECK_STR(symtab_str(b.sym, m->filename), "app");
        CHECK(m->start == 4096 && m->limit == UINT64_MAX);
    }
    batch_destroy(&b);
}
