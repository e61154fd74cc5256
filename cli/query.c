/* query.c - `hearth query SELECTOR`: merge on the server, print in the terminal.
 *
 * The default output is a table in the spirit of `go tool pprof -top`: flat and
 * cumulative values with units scaled for reading. Other formats are passed
 * through (folded, flame graph JSON) or written to a file (pprof). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "wire/client.h"

static const char USAGE[] =
    "Usage: hearth query SELECTOR [flags]\n\n"
    "Merges the profiles SELECTOR matches and prints the result.\n"
    "SELECTOR is TYPE{label=\"v\",...}, e.g. process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"};\n"
    "`hearth query --types` lists the types stored.\n\n"
    "Flags:\n"
    "  --from T        start: unix time, RFC 3339 or now-1h (default now-1h)\n"
    "  --until T       end (default now)\n"
    "  --format F      top (default), folded, json (flame graph) or pprof\n"
    "  --limit N       rows of the top table (default 20)\n"
    "  --group-by L    the top table split by label L's values (e.g. service_name): which\n"
    "                  services spend each function (comma-separated for several labels)\n"
    "  -o, --output F  write to file F (required for pprof on a terminal)\n"
    "  --types         list the profile types instead of querying\n"
    "  --server URL    server address (default " CLI_DEFAULT_SERVER ", env HEARTH_SERVER)\n\n"
    "Examples:\n"
    "  hearth query 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}' --from now-10m\n"
    "  hearth query 'memory:inuse_space:bytes:space:bytes{env=\"prod\"}' --format pprof -o heap.pb.gz\n"
    "  hearth query 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{}' --from now-7d --group-by service_name\n";

/* Formats v in the profile's unit, scaled like pprof does (ms, s, KiB, MiB ...). */
static void human(char *out, size_t n, double v, const char *unit) {
    double a = v < 0 ? -v : v;
    if (!strcmp(unit, "nanoseconds")) {
        if (a >= 1e9) snprintf(out, n, "%.2fs", v / 1e9);
        else if (a >= 1e6) snprintf(out, n, "%.2fms", v / 1e6);
        else if (a >= 1e3) snprintf(out, n, "%.2fus", v / 1e3);
        else snprintf(out, n, "%.0fns", v);
    } else if (!strcmp(unit, "bytes")) {
        if (a >= 1 << 30) snprintf(out, n, "%.2fGiB", v / (1 << 30));
        else if (a >= 1 << 20) snprintf(out, n, "%.2fMiB", v / (1 << 20));
        else if (a >= 1 << 10) snprintf(out, n, "%.2fKiB", v / (1 << 10));
        else snprintf(out, n, "%.0fB", v);
    } else {
        snprintf(out, n, "%.0f", v);
    }
}

/* A fleet table function's groups (--group-by), indented under it: "label=value, ...". */
static void print_groups(json_t *groups, json_t *by, double pct, const char *unit, FILE *out) {
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g) {
        double self = (double)json_integer_value(json_object_get(g, "self"));
        double cum = (double)json_integer_value(json_object_get(g, "total"));
        char a[32], b[32];
        human(a, sizeof a, self, unit);
        human(b, sizeof b, cum, unit);
        fprintf(out, "%12s %6.2f%% %7s %12s %6.2f%%    ", a, self * pct, "", b, cum * pct);
        size_t k;
        json_t *name;
        json_array_foreach(by, k, name) { /* a label the group lacks is left out of its labels */
            const char *s = json_string_value(json_object_get(json_object_get(g, "labels"), json_string_value(name)));
            fprintf(out, "%s%s=%s", k ? ", " : "", json_string_value(name), s ? s : "(none)");
        }
        fputc('\n', out);
    }
}

static int print_top(const buf_t *body, FILE *out) {
    json_t *doc = json_loadb((const char *)body->data, body->len, 0, NULL);
    json_t *fns = json_object_get(doc, "functions");
    if (!json_is_array(fns)) {
        fprintf(stderr, "hearth query: the server sent no top table\n");
        json_decref(doc);
        return 1;
    }
    double total = (double)json_integer_value(json_object_get(doc, "total"));
    const char *unit = json_string_value(json_object_get(doc, "unit"));
    char t[32];
    human(t, sizeof t, total, unit ? unit : "");
    fprintf(out, "Type: %s\nTotal: %s in %lld profiles (%s)\n", json_string_value(json_object_get(doc, "profileType")),
            t, json_integer_value(json_object_get(doc, "profiles")),
            json_string_value(json_object_get(doc, "aggregation")));
    if (!json_array_size(fns)) {
        fprintf(out, "No samples in the range: widen --from/--until or check the selector (hearth query --types).\n");
        json_decref(doc);
        return 0;
    }
    fprintf(out, "%12s %7s %7s %12s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "function");
    double sum = 0;
    size_t i;
    json_t *fn;
    json_array_foreach(fns, i, fn) {
        double self = (double)json_integer_value(json_object_get(fn, "self"));
        double cum = (double)json_integer_value(json_object_get(fn, "total"));
        sum += self;
        char a[32], b[32];
        human(a, sizeof a, self, unit ? unit : "");
        human(b, sizeof b, cum, unit ? unit : "");
        double pct = total ? 100.0 / total : 0;
        fprintf(out, "%12s %6.2f%% %6.2f%% %12s %6.2f%%  %s\n", a, self * pct, sum * pct, b, cum * pct,
                json_string_value(json_object_get(fn, "name")));
        print_groups(json_object_get(fn, "groups"), json_object_get(doc, "groupBy"), pct, unit ? unit : "", out);
    }
    json_decref(doc);
    return 0;
}

static int print_types(const char *server) {
    const char *kv[] = {NULL};
    char *url = client_url(cli_server(server), "/api/v1/profile-types", kv);
    client_resp_t r;
    int rc = client_http("GET", url, NULL, 0, NULL, 300, &r);
    free(url);
    if (rc) {
        fprintf(stderr, "hearth query: %s\n", r.error), cli_hint(&r);
        buf_free(&r.body);
        return 1;
    }
    json_t *doc = json_loadb((const char *)r.body.data, r.body.len, 0, NULL);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "profileTypes"), i, t)
        printf("%s\n", json_string_value(json_object_get(t, "id")));
    json_decref(doc);
    buf_free(&r.body);
    return 0;
}

int cli_query(int argc, char **argv) {
    const char *from = "now-1h", *until = "now", *format = "top", *limit = "20", *output = NULL, *server = NULL,
               *types = NULL, *group_by = NULL;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-o")) argv[i] = "--output";
    cli_opt_t opts[] = {{"from", &from, 0},   {"until", &until, 0},      {"format", &format, 0},
                        {"limit", &limit, 0}, {"output", &output, 0},    {"server", &server, 0},
                        {"types", &types, 1}, {"group-by", &group_by, 0}};
    const char *pos[1];
    size_t npos;
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof *opts, pos, 1, &npos, USAGE);
    if (rc) return rc == 1 ? 0 : rc;
    if (types) return print_types(server);
    if (!npos) {
        fprintf(stderr, "hearth query: need a SELECTOR, e.g. 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{}' "
                        "(hearth query --types lists them)\n");
        return 2;
    }
    const char *wire = !strcmp(format, "json") ? "flamegraph" : format;
    if (strcmp(wire, "top") && strcmp(wire, "folded") && strcmp(wire, "flamegraph") && strcmp(wire, "pprof")) {
        fprintf(stderr, "hearth query: unknown --format `%s`: use top, folded, json or pprof\n", format);
        return 2;
    }
    if (group_by && strcmp(wire, "top")) {
        fprintf(stderr, "hearth query: --group-by splits the top table: use it with --format top\n");
        return 2;
    }
    if (!strcmp(wire, "pprof") && !output && isatty(1)) {
        fprintf(stderr, "hearth query: pprof output is binary; write it to a file with -o FILE\n");
        return 2;
    }
    const char *kv[] = {"query",    pos[0],   "from", from,    "until",
                        until,      "format", wire,   "limit", strcmp(wire, "top") ? NULL : limit,
                        "group_by", group_by, NULL};
    char *url = client_url(cli_server(server), "/api/v1/query", kv);
    client_resp_t r;
    rc = client_http("GET", url, NULL, 0, NULL, 300, &r);
    free(url);
    if (rc) {
        fprintf(stderr, "hearth query: %s\n", r.error), cli_hint(&r);
        buf_free(&r.body);
        return 1;
    }
    FILE *out = output ? fopen(output, "wb") : stdout;
    if (!out) {
        fprintf(stderr, "hearth query: cannot write %s\n", output);
        buf_free(&r.body);
        return 1;
    }
    if (!strcmp(wire, "top")) rc = print_top(&r.body, out);
    else if (fwrite(r.body.data, 1, r.body.len, out) != r.body.len) rc = 1;
    if (output) {
        if (fclose(out) != 0) rc = 1;
        if (!rc) fprintf(stderr, "wrote %zu bytes to %s\n", r.body.len, output);
    }
    buf_free(&r.body);
    return rc;
}
