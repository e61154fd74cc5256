/* push.c - `hearth push FILE... --name 'app.cpu{k=v}'`: upload local profiles.
 *
 * Each file goes to the server's /ingest exactly as an agent would send it, so a
 * push exercises the same validation; the format is detected per file (gzip or
 * protobuf means pprof, text means folded) unless --format says otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#include "cli/cli.h"
#include "common/log.h"
#include "ingest/format.h"
#include "common/fsutil.h"
#include "wire/client.h"
#include "wire/gzip.h"
#include "wire/profile.pb-c.h"

/* The time a pprof recorded (time_nanos, in seconds), or 0 when it has none or is not
 * a pprof: the server stores it there unless --from says otherwise. */
static int64_t recorded_time(const uint8_t *p, size_t n) {
    uint8_t *raw = NULL;
    size_t rn = n;
    hr_err_t err = {0};
    if (gz_is_gzip(p, n) && gz_inflate(p, n, (size_t)1 << 30, &raw, &rn, &err)) return 0;
    Perftools__Profiles__Profile *prof = perftools__profiles__profile__unpack(NULL, rn, raw ? raw : p);
    free(raw);
    int64_t t = prof ? prof->time_nanos / 1000000000 : 0;
    if (prof) perftools__profiles__profile__free_unpacked(prof, NULL);
    return t;
}

/* A pushed profile an hour old or more lands where the UI's default range (the last
 * hour) does not look: said once, with the time, so an empty graph is not a mystery. */
static void hint_old(const char *file, int64_t t) {
    char when[64];
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    fprintf(stderr,
            "hearth push: note: %s is stored at the time it recorded, %s (%.1f hours ago), which the UI's "
            "default range (the last hour) does not show: choose that range, or push with --from now\n",
            file, when, (double)(time(NULL) - t) / 3600);
}

static const char USAGE[] =
    "Usage: hearth push FILE... --name NAME [flags]\n\n"
    "Uploads pprof files (gzipped or not) or folded stacks to a Hearth server.\n\n"
    "Flags:\n"
    "  --name NAME          application name and labels, e.g. 'api.cpu{env=prod}' (required)\n"
    "  --server URL         server address (default " CLI_DEFAULT_SERVER ", env HEARTH_SERVER)\n"
    "  --format F           pprof, jfr, folded or lines (default: detected per file)\n"
    "  --from T             profile time: unix seconds, RFC 3339 or now-1h\n"
    "                       (default: the time recorded in the pprof, else now)\n"
    "  --until T            end of the profile's interval\n"
    "  --sample-rate HZ     for folded cpu/wall stacks (default 100)\n"
    "  --spy-name NAME      stored as the label pyroscope_spy\n\n"
    "Examples:\n"
    "  hearth push cpu.pb.gz --name 'checkout{env=prod}'\n"
    "  hearth push *.folded --name 'batch.cpu' --sample-rate 99 --server http://hearth:4040\n";

int cli_push(int argc, char **argv) {
    const char *name = NULL, *server = NULL, *format = NULL, *from = NULL, *until = NULL, *rate = NULL, *spy = NULL;
    cli_opt_t opts[] = {{"name", &name, 0},   {"server", &server, 0},    {"format", &format, 0}, {"from", &from, 0},
                        {"until", &until, 0}, {"sample-rate", &rate, 0}, {"spy-name", &spy, 0}};
    const char *files[4096];
    size_t nfiles;
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof *opts, files, 4096, &nfiles, USAGE);
    if (rc) return rc == 1 ? 0 : rc;
    if (!name || !nfiles) {
        fprintf(stderr, "hearth push: need at least one FILE and --name (e.g. --name 'api.cpu{env=prod}')\n");
        return 2;
    }
    int tty = isatty(2), failed = 0, hinted = 0;
    const char *pending_hint = NULL;
    int64_t pending_t = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < nfiles; i++) {
        uint8_t *data;
        size_t n;
        hr_err_t err = {0};
        if (fs_read_file(files[i], (size_t)1 << 30, &data, &n, &err)) {
            fprintf(stderr, "%shearth push: %s: %s\n", tty ? "\n" : "", files[i], err.msg);
            failed++;
            continue;
        }
        const char *f = format ? format : ingest_sniff(data, n)->name; /* as the server would */
        const char *kv[] = {"name", name,         "format", f,         "from", from, "until",
                            until,  "sampleRate", rate,     "spyName", spy,    NULL};
        char *url = client_url(cli_server(server), "/ingest", kv);
        client_resp_t r;
        if (client_http("POST", url, data, n, "application/octet-stream", 300, &r)) {
            fprintf(stderr, "%shearth push: %s: %s\n", tty ? "\n" : "", files[i], r.error), cli_hint(&r);
            failed++;
        } else {
            bytes += n;
            int64_t t = from || hinted || strcmp(f, "pprof") ? 0 : recorded_time(data, n);
            if (t > 0 && time(NULL) - t >= 3600) hinted = 1, pending_hint = files[i], pending_t = t;
        }
        if (tty) fprintf(stderr, "\r[%zu/%zu] %s", i + 1, nfiles, files[i]);
        else log_info("push.progress", "file=\"%s\" done=%zu total=%zu status=%ld", files[i], i + 1, nfiles, r.status);
        buf_free(&r.body);
        free(url);
        free(data);
    }
    if (tty) fputc('\n', stderr);
    printf("pushed %zu of %zu files (%zu bytes)%s\n", nfiles - (size_t)failed, nfiles, bytes,
           failed ? "; see the errors above" : "");
    if (pending_hint) hint_old(pending_hint, pending_t);
    return failed ? 1 : 0;
}
