/* config.c - see config.h. */
#include "server/config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeparse.h"

/* T_DURATION0 and T_INT0 also take 0, which turns the setting off ("0 = no limit"). */
/* T_SECRET is a string --print-config does not print. */
typedef enum {
    T_STR,
    T_SECRET,
    T_SIZE,
    T_DURATION,
    T_DURATION0,
    T_INT,
    T_INT0,
    T_FSYNC,
    T_LEVEL,
    T_LOGFMT,
    T_BOOL,
    T_TARGET,
    T_TIERS
} opt_type_t;

typedef struct {
    const char *name, *def, *help;
    opt_type_t type;
    size_t offset, len;
} opt_t;

#define O(field) offsetof(config_t, field), sizeof(((config_t *)0)->field)
static const opt_t OPTS[] = {
    {"listen", "127.0.0.1:4040",
     "address and port to serve HTTP on: IPv4, or IPv6 in brackets ([::]:4040 takes IPv4 too)", T_STR, O(listen)},
    {"data-dir", "./data", "directory for the WAL, blocks and index.db", T_STR, O(data_dir)},
    {"web-dir", "", "directory of the web UI files (default: web/ beside the binary)", T_STR, O(web_dir)},
    {"tls-cert", "", "PEM certificate (chain) to serve HTTPS; needs --tls-key", T_STR, O(tls_cert)},
    {"tls-key", "", "PEM private key for --tls-cert", T_STR, O(tls_key)},
    {"grpc-listen", "",
     "address and port to serve gRPC on (HTTP/2, over TLS with --tls-cert; 4317 is OTLP's port): OTLP profiles "
     "Export, Pyroscope's Push, Parca's WriteRaw and DebuginfoService; empty for none",
     T_STR, O(grpc_listen)},
    {"auth-file", "",
     "bearer/basic credentials bound to tenants and roles; SIGHUP reloads (see README: Authentication)", T_STR,
     O(auth_file)},
    {"scrape-config", "", "JSON file of targets to pull profiles from (see README: Scraping)", T_STR, O(scrape_config)},
    {"wal-fsync", "always", "always: fsync the WAL before acknowledging an ingest; none: leave it to the OS", T_FSYNC,
     O(wal_fsync)},
    {"max-body-bytes", "16MiB", "largest accepted request body", T_SIZE, O(max_body_bytes)},
    {"max-inflight-body-bytes", "256MiB",
     "request-body bytes held by all uploads in progress together; past it 503 (at least max-body-bytes; 0 = no cap)",
     T_SIZE, O(max_inflight_body_bytes)},
    {"max-decompressed-bytes", "128MiB", "largest accepted profile after gunzip (gzip-bomb guard)", T_SIZE,
     O(max_decompressed_bytes)},
    {"max-samples", "2000000", "most samples accepted in one profile", T_SIZE, O(max_samples)},
    {"max-decode-memory", "1GiB",
     "memory all concurrent profile decodes may hold together (estimated before decoding); past it 429; 0 = unbounded",
     T_SIZE, O(max_decode_memory)},
    {"max-query-memory", "4GiB",
     "memory all concurrent queries' merges may hold together (symbol tables, per-stack sums); past it a query gets "
     "429, or 413 when it alone needs more; 0 = unbounded",
     T_SIZE, O(max_query_memory)},
    {"max-nodes-limit", "65536",
     "largest max_nodes (maxNodes) a query may ask for: larger is a 400; the answer's nodes are pruned to it", T_SIZE,
     O(max_nodes_limit)},
    {"max-labels", "64", "most labels on one series", T_SIZE, O(max_labels)},
    {"max-label-value-bytes", "2048", "longest accepted label value (names: 1024 bytes)", T_SIZE,
     O(max_label_value_bytes)},
    {"max-series-per-tenant", "100000", "new series past this many per tenant are refused (429); 0 = no cap", T_SIZE,
     O(max_series_per_tenant)},
    {"max-concurrent-ingests", "64", "ingest requests processed at once; more get 429", T_INT,
     O(max_concurrent_ingests)},
    {"max-concurrent-queries", "16", "query requests processed at once; more get 429", T_INT,
     O(max_concurrent_queries)},
    {"ingest-rate-limit", "0", "request-body bytes per second per tenant (e.g. 50MiB); 0 = unlimited", T_SIZE,
     O(ingest_rate_bytes)},
    {"head-max-bytes", "256MiB", "cut the in-memory head into a block past this size", T_SIZE, O(head_max_bytes)},
    {"block-duration", "1h", "cut the head into a block when it is older than this", T_DURATION, O(block_duration_ns)},
    {"retention", "0", "delete blocks whose newest profile is older than this, e.g. 7d (0 keeps everything)",
     T_DURATION0, O(retention_ns)},
    {"compact-min-blocks", "4",
     "merge runs of at least this many small adjacent blocks of a tenant in the background; 0 = no compaction", T_SIZE,
     O(compact_min_blocks)},
    {"compact-max-bytes", "64MiB", "largest block compaction makes; blocks over half of it are left alone", T_SIZE,
     O(compact_max_bytes)},
    {"compact-tiers", "7d,28d",
     "longer spans compaction merges ended windows into (Monday-aligned, whole days, each a multiple of the one "
     "before), so a month reads one partition per service per tier window; 0 = day blocks only",
     T_TIERS, O(compact_tiers_ns)},
    {"source-dir", "",
     "folder of source files the source view (format=source) reads, by the path the debug info names (else its "
     "file name); before asking debuginfod",
     T_STR, O(source_dir)},
    {"recording-rules", "", "JSON file of provisioned recording rules (metrics from profiles; see README)", T_STR,
     O(recording_rules)},
    {"remote-write-url", "",
     "Prometheus remote write URL the recording rules' samples are sent to, e.g. http://prom:9090/api/v1/write; "
     "empty: rules are kept but not evaluated",
     T_STR, O(remote_write_url)},
    {"recording-rules-interval", "15s", "recording rules are evaluated per interval of this length", T_DURATION,
     O(recording_rules_interval_ns)},
    {"block-cache-bytes", "1GiB", "decoded blocks kept in memory for queries", T_SIZE, O(block_cache_bytes)},
    {"zstd-level", "3", "zstd compression level of blocks (1-19)", T_INT, O(zstd_level)},
    {"max-connections", "10000", "concurrent HTTP connections (each costs a descriptor and a few KiB, no thread)",
     T_INT, O(max_connections)},
    {"max-connections-per-ip", "64",
     "concurrent HTTP connections from one client address (0 = no cap; raise it behind a proxy)", T_INT0,
     O(max_connections_per_ip)},
    {"idle-timeout", "120s", "close a connection that sends nothing for this long (slow clients)", T_DURATION,
     O(idle_timeout_ns)},
    {"request-read-timeout", "30s",
     "a request (headers and body) must fully arrive within this, however slowly it trickles; 0 = no limit",
     T_DURATION0, O(request_read_timeout_ns)},
    {"query-timeout", "60s", "a merge running longer stops with 504; 0 = no limit", T_DURATION0, O(query_timeout_ns)},
    {"log-level", "info", "debug, info, warn or error", T_LEVEL, O(log_level)},
    {"multitenancy", "false", "true: every request names its tenant in X-Scope-OrgID; false: one tenant, anonymous",
     T_BOOL, O(multitenancy)},
    {"log-format", "logfmt", "logfmt or json: one line per event either way", T_LOGFMT, O(log_json)},
    {"symbolize", "true", "resolve address-only frames (native, eBPF profiles) at query time from debug info", T_BOOL,
     O(symbolize)},
    {"debuginfo-dir", "", "folder of debug files named by build ID: ID, ID.debuginfo or ID/debuginfo", T_STR,
     O(debuginfo_dir)},
    {"debuginfod-urls", "",
     "space-separated debuginfod servers to fetch debug files from (default: the DEBUGINFOD_URLS environment "
     "variable)",
     T_STR, O(debuginfod_urls)},
    {"debuginfod-negative-ttl", "5m", "a build ID no source has is not asked for again for this long", T_DURATION,
     O(debuginfod_negative_ttl_ns)},
    {"catalog", "",
     "cluster mode: the shared catalog, postgres://USER@HOST:PORT/DB (password: PGPASSWORD or ~/.pgpass); needs "
     "--object-store (docs/cluster.md)",
     T_STR, O(catalog)},
    {"object-store", "", "cluster mode: where blocks live, s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&region=R",
     T_STR, O(object_store)},
    {"s3-access-key", "", "object store access key; empty: AWS_ACCESS_KEY_ID", T_STR, O(s3_access_key)},
    {"s3-secret-key", "", "object store secret key; empty: AWS_SECRET_ACCESS_KEY (never printed or logged)", T_SECRET,
     O(s3_secret_key)},
    {"cache-dir", "",
     "cluster mode: disk cache of block byte ranges read from the object store (default DATA_DIR/cache)", T_STR,
     O(cache_dir)},
    {"cache-bytes", "10GiB", "cluster mode: size of --cache-dir's cache", T_SIZE, O(cache_bytes)},
    {"multipart-threshold", "64MiB",
     "cluster mode: objects larger than this go to the object store as multipart uploads (parts retried one by one)",
     T_SIZE, O(multipart_threshold)},
    {"flush-interval", "1s",
     "cluster mode: uploads are batched this long, stored as a block in the object store and only then acknowledged",
     T_DURATION, O(flush_interval_ns)},
    {"flush-bytes", "64MiB", "cluster mode: ... or until the batch is this large", T_SIZE, O(flush_bytes)},
    {"ack-timeout", "30s", "cluster mode: an upload whose batch is not stored within this gets 503", T_DURATION,
     O(ack_timeout_ns)},
    {"trash-delay", "10m",
     "cluster mode: objects of blocks compaction or retention replaced are deleted this long after (outlasting "
     "queries)",
     T_DURATION, O(trash_delay_ns)},
    {"target", "all",
     "cluster mode: this node's roles: all, ingest (accepts uploads), query (answers queries) or compact "
     "(compaction and retention only)",
     T_TARGET, O(target)},
    {"node-name", "", "cluster mode: this node's name in the catalog (default: HOSTNAME/LISTEN)", T_STR, O(node_name)},
    {"query-split", "true",
     "cluster mode: a merge's block partitions are divided among this node and the other live query nodes, each "
     "merging its share",
     T_BOOL, O(query_split)},
    {"query-split-min-bytes", "4MiB",
     "cluster mode: a merge reading fewer bytes of block partitions than this is not split (round trips to peers "
     "cost more than they save)",
     T_SIZE, O(query_split_min_bytes)},
    {"debuginfo-quota", "8GiB",
     "total size of the debug files kept (uploads and debuginfod downloads); past it uploads get 507 and "
     "downloads are skipped; 0 = no limit",
     T_SIZE, O(debuginfo_quota)},
    {"debuginfo-keep-free", "256MiB",
     "debug files never take the data disk below this much free space: it stays for profile uploads and the WAL",
     T_SIZE, O(debuginfo_keep_free)},
    {"max-debuginfo-bytes", "1GiB",
     "largest debug file or source archive upload (PUT /api/v1/debuginfo/ID), instead of max-body-bytes; written to "
     "disk as it arrives (no memory budget), and also the most a debuginfod download or an archive's unpacked files "
     "may take",
     T_SIZE, O(max_debuginfo_bytes)},
};
#define NOPTS (sizeof OPTS / sizeof *OPTS)
_Static_assert(NOPTS <= CONFIG_MAX_OPTS, "config_t.raw holds CONFIG_MAX_OPTS options");

const char *config_target_name(config_target_t t) {
    static const char *const NAMES[TARGET_COUNT] = {"all", "ingest", "query", "compact"};
    return t < TARGET_COUNT ? NAMES[t] : "?";
}

static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double mul = 1;
    if (!strcasecmp(end, "k") || !strcasecmp(end, "kib") || !strcasecmp(end, "kb")) mul = 1024.0;
    else if (!strcasecmp(end, "m") || !strcasecmp(end, "mib") || !strcasecmp(end, "mb")) mul = 1024.0 * 1024;
    else if (!strcasecmp(end, "g") || !strcasecmp(end, "gib") || !strcasecmp(end, "gb")) mul = 1024.0 * 1024 * 1024;
    else if (*end) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* "7d,28d": ascending whole days of at least 2, each a multiple of the one before;
 * "0" or "" for none. */
static int parse_tiers(config_t *c, const char *v) {
    size_t n = 0;
    const int64_t day = 86400LL * 1000000000;
    char tmp[128];
    if (!*v || !strcmp(v, "0")) return c->ncompact_tiers = 0, 0;
    if (strlen(v) >= sizeof tmp) return -1;
    memcpy(tmp, v, strlen(v) + 1);
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t d;
        if (n == CONFIG_MAX_TIERS || duration_parse(t, &d) || d < 2 * day || d % day) return -1;
        if (n && (d <= c->compact_tiers_ns[n - 1] || d % c->compact_tiers_ns[n - 1])) return -1;
        c->compact_tiers_ns[n++] = d;
    }
    c->ncompact_tiers = n;
    return n ? 0 : -1;
}

static int set_opt(config_t *c, const opt_t *o, const char *v, FILE *err) {
    char *field = (char *)c + o->offset;
    size_t sz;
    int64_t d;
    long n;
    char *end;
    switch (o->type) {
    case T_STR:
    case T_SECRET:
        if (strlen(v) >= o->len) goto bad;
        memcpy(field, v, strlen(v) + 1);
        return 0;
    case T_SIZE:
        if (parse_size(v, &sz)) goto bad;
        *(size_t *)(void *)field = sz;
        return 0;
    case T_DURATION:
    case T_DURATION0:
        if (o->type == T_DURATION0 && !strcmp(v, "0")) d = 0;
        else if (duration_parse(v, &d) || d <= 0) goto bad;
        *(int64_t *)(void *)field = d;
        return 0;
    case T_INT:
    case T_INT0:
        n = strtol(v, &end, 10);
        if (*end || n < (o->type == T_INT0 ? 0 : 1) || n > INT_MAX) goto bad;
        if (o->len == sizeof(int)) *(int *)(void *)field = (int)n;
        else *(unsigned *)(void *)field = (unsigned)n;
        return 0;
    case T_FSYNC:
        if (!strcmp(v, "always")) c->wal_fsync = WAL_FSYNC_ALWAYS;
        else if (!strcmp(v, "none")) c->wal_fsync = WAL_FSYNC_NONE;
        else goto bad;
        return 0;
    case T_LEVEL:
        if (log_parse_level(v, &c->log_level)) goto bad;
        return 0;
    case T_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1")) *(int *)(void *)field = 1;
        else if (!strcmp(v, "false") || !strcmp(v, "0")) *(int *)(void *)field = 0;
        else goto bad;
        return 0;
    case T_TARGET:
        for (int t = 0; t < TARGET_COUNT; t++)
            if (!strcmp(v, config_target_name((config_target_t)t))) return c->target = (config_target_t)t, 0;
        goto bad;
    case T_TIERS:
        if (parse_tiers(c, v)) goto bad;
        return 0;
    case T_LOGFMT:
        if (!strcmp(v, "logfmt")) c->log_json = 0;
        else if (!strcmp(v, "json")) c->log_json = 1;
        else goto bad;
        return 0;
    }
bad:
    if ((o->type == T_DURATION || o->type == T_DURATION0) && *v && v[strspn(v, "0123456789.")] == 0)
        fprintf(err, "hearth: --%s `%s`: a duration needs a unit, e.g. %s7d, 90m, 1h30m or 30s\n", o->name, v,
                o->type == T_DURATION0 ? "0 (off), " : "");
    else fprintf(err, "hearth: invalid value `%s` for --%s (%s)\n", v, o->name, o->help);
    return -1;
}

/* Sets an option and remembers its text and source for --print-config. */
static int apply(config_t *c, size_t i, const char *v, const char *source, FILE *err) {
    if (set_opt(c, &OPTS[i], v, err)) return -1;
    snprintf(c->raw[i], sizeof c->raw[i], "%s", v);
    c->source[i] = source;
    return 0;
}

static void env_name(const opt_t *o, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "HEARTH_");
    for (const char *p = o->name; *p && k + 1 < n; p++) out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[k] = 0;
}

void config_usage(FILE *out) {
    fprintf(out, "Usage: hearth [serve] [flags]\n"
                 "       hearth push FILE... --name NAME   upload profiles to a server\n"
                 "       hearth query SELECTOR             merge and print (a top table by default)\n"
                 "       hearth check DATA_DIR             verify blocks, catalog and WAL\n"
                 "       hearth objstore URL COMMAND       put, get, list an object store (S3, Azure) by hand\n"
                 "       hearth version\n"
                 "Each command has --help with examples.\n\n"
                 "serve (the default) runs the Hearth server. Agents push pprof or folded stacks to /ingest\n"
                 "(Pyroscope's protocol); the REST API and the web UI query them.\n\n"
                 "Flags (each also read from the environment variable shown, or from the\n"
                 "config file key of the same name):\n");
    for (size_t i = 0; i < NOPTS; i++) {
        char env[64];
        env_name(&OPTS[i], env, sizeof env);
        /* An empty default whose help says what it means (the help's own "default") is
         * not printed again as "(none)". */
        int said = !OPTS[i].def[0] && strstr(OPTS[i].help, "default");
        fprintf(out, "  --%-24s %s\n  %-26s ", OPTS[i].name, OPTS[i].help, "");
        if (!said) fprintf(out, "default: %s; ", OPTS[i].def[0] ? OPTS[i].def : "(none)");
        fprintf(out, "env %s\n", env);
    }
    fprintf(out, "  --%-24s read settings from FILE (`key = value` lines); env HEARTH_CONFIG\n", "config FILE");
    fprintf(out, "  --%-24s print every setting with its value and source, then exit\n", "print-config");
    fprintf(out, "  --%-24s print the HTTP route table (method, path, role, limiter), then exit\n", "print-routes");
    fprintf(out,
            "  --%-24s show this help\n\nExamples:\n"
            "  hearth serve --listen 0.0.0.0:4040 --data-dir /var/lib/hearth\n"
            "  HEARTH_WAL_FSYNC=none hearth serve --config /etc/hearth/hearth.conf\n"
            "  hearth serve --print-config > hearth.conf\n",
            "help");
}

static const opt_t *find_opt(const char *name, size_t n, size_t *index) {
    for (size_t k = 0; k < NOPTS; k++)
        if (strlen(OPTS[k].name) == n && !strncmp(OPTS[k].name, name, n)) {
            *index = k;
            return &OPTS[k];
        }
    return NULL;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int load_file(config_t *c, const char *path, FILE *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(err, "hearth: cannot read config file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        size_t idx;
        if (!eq) {
            fprintf(err, "hearth: %s:%d: expected `key = value`\n", path, lineno);
            rc = -1;
            break;
        }
        *eq = 0;
        char *key = trim(s), *val = trim(eq + 1);
        size_t vl = strlen(val);
        if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') val[vl - 1] = 0, val++;
        if (!find_opt(key, strlen(key), &idx)) {
            fprintf(err, "hearth: %s:%d: unknown setting `%s` (see hearth serve --help)\n", path, lineno, key);
            rc = -1;
        } else if (apply(c, idx, val, "config", err)) {
            fprintf(err, "hearth: in %s:%d\n", path, lineno);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

/* The --config value from argv or the environment, if any. */
static const char *config_path(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--config=", 9)) return argv[i] + 9;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) return argv[i + 1];
    }
    const char *e = getenv("HEARTH_CONFIG");
    return e && *e ? e : NULL;
}

static void print_config(const config_t *c) {
    printf("# Hearth settings: effective value of every key, and where it came from.\n");
    if (c->config_file[0]) printf("# config file: %s\n", c->config_file);
    for (size_t i = 0; i < NOPTS; i++) {
        char line[700];
        if (OPTS[i].type == T_SECRET && c->raw[i][0]) /* commented out: the file stays valid */
            snprintf(line, sizeof line, "# %s = (set, not shown)", OPTS[i].name);
        else snprintf(line, sizeof line, "%s = %s", OPTS[i].name, c->raw[i]);
        printf("%-48s # %s; %s\n", line, c->source[i] ? c->source[i] : "default", OPTS[i].help);
    }
}

int config_load(config_t *c, int argc, char **argv, FILE *err) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NOPTS; i++)
        if (apply(c, i, OPTS[i].def, "default", err)) return -1;
    const char *file = config_path(argc, argv);
    if (file) {
        snprintf(c->config_file, sizeof c->config_file, "%s", file);
        if (load_file(c, file, err)) return -1;
    }
    for (size_t i = 0; i < NOPTS; i++) {
        char env[64];
        env_name(&OPTS[i], env, sizeof env);
        const char *v = getenv(env);
        if (v && apply(c, i, v, "environment", err)) return -1;
    }
    int i = 1, print = 0;
    if (i < argc && !strcmp(argv[i], "serve")) i++;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            config_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--print-config")) {
            print = 1;
            continue;
        }
        if (!strncmp(a, "--config", 8) && (a[8] == 0 || a[8] == '=')) {
            if (!a[8]) i++;
            continue;
        }
        if (strncmp(a, "--", 2)) {
            fprintf(err, "hearth: unexpected argument `%s` (see hearth --help)\n", a);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2), idx;
        const opt_t *o = find_opt(a + 2, nl, &idx);
        if (!o) {
            fprintf(err, "hearth: unknown flag `%s` (see hearth --help)\n", a);
            return -1;
        }
        if (o->type == T_BOOL && !eq &&
            (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0 ||
             (strcmp(argv[i + 1], "true") && strcmp(argv[i + 1], "false")))) {
            if (apply(c, idx, "true", "flag", err)) return -1; /* a bare --multitenancy */
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(err, "hearth: flag --%s needs a value\n", o->name);
            return -1;
        }
        if (apply(c, idx, v, "flag", err)) return -1;
    }
    if (c->zstd_level > 19) {
        fprintf(err, "hearth: --zstd-level must be 1-19\n");
        return -1;
    }
    if (!c->catalog[0] != !c->object_store[0]) {
        fprintf(err, "hearth: cluster mode needs both --catalog and --object-store (docs/cluster.md)\n");
        return -1;
    }
    if (c->target != TARGET_ALL && !c->catalog[0]) {
        fprintf(err, "hearth: --target=%s is for cluster nodes (--catalog and --object-store)\n",
                config_target_name(c->target));
        return -1;
    }
    if (print) {
        print_config(c);
        return 1;
    }
    return 0;
}
