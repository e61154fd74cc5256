/* The server's own machinery: the handler pool, lingering close, relabeling, gRPC codes,
 * the auth file and the flags. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "server/auth.h"
#include "server/config.h"
#include "server/grpc.h"
#include "server/linger.h"
#include "server/relabel.h"
#include "server/workers.h"
#include "tests/unit/unit.h"

typedef struct {
    workers_job_t job;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *open, *ran;
} gated_job_t;

/* Waits until the gate opens, then counts itself. */
static void gated_run(workers_job_t *job) {
    gated_job_t *g = (gated_job_t *)job;
    pthread_mutex_lock(g->mu);
    while (!*g->open) pthread_cond_wait(g->cv, g->mu);
    (*g->ran)++;
    pthread_mutex_unlock(g->mu);
}

/* Ten blocking jobs on a pool of three: three threads start, seven jobs wait their turn,
 * all ten run once the gate opens, and a closed pool refuses more. */
void test_workers_run_jobs_at_once_up_to_the_cap(void) {
    hr_err_t err = {0};
    workers_t *w = workers_start(3, &err);
    CHECK(w != NULL);
    if (!w) return;
    workers_stats_t st = workers_stats(w);
    CHECK_INT(st.threads, 0); /* none before the first job */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int open = 0, ran = 0;
    gated_job_t jobs[10];
    for (int i = 0; i < 10; i++) {
        jobs[i] = (gated_job_t){.job.run = gated_run, .mu = &mu, .cv = &cv, .open = &open, .ran = &ran};
        CHECK_INT(workers_submit(w, &jobs[i].job), 0);
    }
    for (int tries = 0; tries < 10000 && workers_stats(w).busy < 3; tries++) usleep(1000); /* up to 10 s */
    st = workers_stats(w);
    CHECK_INT(st.threads, 3);
    CHECK_INT(st.busy, 3);
    CHECK_INT(st.queued, 7);
    pthread_mutex_lock(&mu);
    open = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    workers_close(w); /* returns when all ten have run */
    pthread_mutex_lock(&mu);
    CHECK_INT(ran, 10);
    pthread_mutex_unlock(&mu);
    gated_job_t late = {.job.run = gated_run, .mu = &mu, .cv = &cv, .open = &open, .ran = &ran};
    CHECK_INT(workers_submit(w, &late.job), -1);
    workers_stop(w);
    CHECK_INT(ran, 10);
}

/* Waits until the peer of a lingering socket is closed: a send then fails. 1 when it is. */
static int peer_closed(int fd) {
    for (int tries = 0; tries < 300; tries++) {
        if (send(fd, "x", 1, MSG_NOSIGNAL) < 0 && (errno == EPIPE || errno == ECONNRESET)) return 1;
        usleep(10000);
    }
    return 0;
}

/* A lingering socket gets its end at once (shut for writing), has what arrives read and
 * dropped, and is closed once the client ends: the caller's own descriptor is its own. */
void test_linger_drains_and_closes(void) {
    hr_err_t err = {0};
    linger_t *l = linger_start(&err);
    CHECK(l != NULL);
    if (!l) return;
    int sv[2];
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    linger_add(l, sv[0], 1 << 20);
    close(sv[0]); /* the HTTP layer closes its descriptor as usual */
    char buf[8];
    struct pollfd p = {.fd = sv[1], .events = POLLIN};
    CHECK_INT(poll(&p, 1, 2000), 1);
    CHECK_INT(recv(sv[1], buf, sizeof buf, 0), 0);      /* the lingering side said it is done */
    CHECK_INT(send(sv[1], "body", 4, MSG_NOSIGNAL), 4); /* still open: the upload goes on */
    shutdown(sv[1], SHUT_WR);
    CHECK(peer_closed(sv[1]));
    close(sv[1]);
    /* One left lingering when the pool stops is closed too. */
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    linger_add(l, sv[0], 1 << 20);
    close(sv[0]);
    linger_stop(l);
    CHECK(peer_closed(sv[1]));
    close(sv[1]);
}

/* Applies rules (JSON) to labels given as "k=v,k=v"; returns relabel_apply's answer and
 * the labels after it as "k=v,..." in out. */
static int relabel_run(const char *rules, const char *in, char *out, size_t cap) {
    relabel_t r;
    hr_err_t err = {0};
    json_t *doc = json_loads(rules, 0, NULL);
    CHECK(doc != NULL);
    if (relabel_parse(doc, &r, &err)) {
        fprintf(stderr, "relabel: %s\n", err.msg);
        json_decref(doc);
        return -2;
    }
    json_decref(doc);
    labels_t l;
    labels_init(&l);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", in);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        *eq = 0;
        labels_set(&l, kv, eq + 1);
    }
    int rc = relabel_apply(&r, &l);
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < l.n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s=%s", i ? "," : "", l.v[i].name, l.v[i].value);
    labels_destroy(&l);
    relabel_free(&r);
    return rc;
}

void test_relabel_rules_as_prometheus_applies_them(void) {
    char out[512];
    /* replace with a named group; the default regex and replacement copy a value */
    CHECK_INT(relabel_run("[{\"source_labels\":[\"a\",\"b\"],\"regex\":\"(?P<x>.*);(.*)\",\"target_label\":\"c\","
                          "\"replacement\":\"${x}-$2\"},{\"source_labels\":[\"a\"],\"target_label\":\"d\"}]",
                          "a=1,b=2", out, sizeof out),
              1);
    CHECK_STR(out, "a=1,b=2,c=1-2,d=1");
    /* an empty result removes the target; no match leaves it */
    CHECK_INT(relabel_run("[{\"source_labels\":[\"z\"],\"target_label\":\"a\"},{\"source_labels\":[\"b\"],"
                          "\"regex\":\"9\",\"target_label\":\"b\",\"replacement\":\"x\"}]",
                          "a=1,b=2", out, sizeof out),
              1);
    CHECK_STR(out, "b=2");
    CHECK_INT(relabel_run("[{\"source_labels\":[\"a\"],\"regex\":\"1\",\"action\":\"drop\"}]", "a=1", out, sizeof out),
              0);
    CHECK_INT(relabel_run("[{\"source_labels\":[\"a\"],\"regex\":\"1\",\"action\":\"keep\"}]", "a=12", out, sizeof out),
              0);
    CHECK_INT(relabel_run("[{\"source_labels\":[\"a\"],\"target_label\":\"b\",\"action\":\"keepequal\"}]", "a=1,b=1",
                          out, sizeof out),
              1);
    CHECK_INT(relabel_run("[{\"source_labels\":[\"a\"],\"target_label\":\"b\",\"action\":\"dropequal\"}]", "a=1,b=1",
                          out, sizeof out),
              0);
    CHECK_INT(
        relabel_run("[{\"action\":\"labelkeep\",\"regex\":\"a|c\"},{\"source_labels\":[\"c\"],\"action\":\"uppercase\","
                    "\"target_label\":\"c\"}]",
                    "a=1,b=2,c=x", out, sizeof out),
        1);
    CHECK_STR(out, "a=1,c=X");
    /* Prometheus's formula (md5, its last 8 bytes big-endian, modulo) worked in Python gives 318 */
    CHECK_INT(relabel_run("[{\"source_labels\":[\"__address__\"],\"action\":\"hashmod\",\"modulus\":1000,"
                          "\"target_label\":\"s\"}]",
                          "__address__=127.0.0.1:9090", out, sizeof out),
              1);
    CHECK_STR(strchr(out, ',') + 1, "s=318");
    CHECK_INT(relabel_run("[{\"action\":\"explode\"}]", "a=1", out, sizeof out), -2);
    CHECK_INT(relabel_run("[{\"action\":\"replace\",\"regex\":\"(\",\"target_label\":\"a\"}]", "a=1", out, sizeof out),
              -2);
}

void test_grpc_timeouts_and_status_codes(void) {
    int64_t ns = 0;
    CHECK_INT(grpc_timeout_parse("100m", &ns), 0);
    CHECK_INT(ns, 100000000LL);
    CHECK_INT(grpc_timeout_parse("2H", &ns), 0);
    CHECK_INT(ns, 7200000000000LL);
    CHECK_INT(grpc_timeout_parse("99999999H", &ns), 0); /* no overflow: effectively none */
    CHECK(ns > 0);
    static const char *const BAD[] = {"", "m", "5", "123456789S", "5x", "-5S", "5 S"};
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) CHECK_INT(grpc_timeout_parse(BAD[i], &ns), -1);
    static const int MAP[][2] = {{200, 0}, {400, 3},  {401, 16}, {403, 7},  {413, 8},
                                 {429, 8}, {503, 14}, {504, 4},  {501, 12}, {599, 13}};
    for (size_t i = 0; i < sizeof MAP / sizeof *MAP; i++) CHECK_INT(grpc_code_of_http(MAP[i][0]), MAP[i][1]);
}

/* Writes text to a fresh file under /tmp; its path in path[64]. */
static void write_tmp(char path[64], const char *text) {
    snprintf(path, 64, "/tmp/hearth-unit-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    if (fd >= 0) close(fd);
}

/* The auth file: comments and blank lines skipped, each credential bound to its tenant and
 * role, Bearer and Basic (any case) checked, unknown and malformed headers refused; a bad
 * line refuses the whole file naming its line. */
void test_auth_file_and_headers(void) {
    char path[64];
    write_tmp(path, "# agents\nbearer tok-w team-a write\n\n  basic ann:s3cret team-b read # the UI\n"
                    "bearer tok-admin ops admin\n");
    hr_err_t err = {0};
    auth_t *a = auth_load(path, &err);
    CHECK(a && auth_count(a) == 3);
    char tenant[129];
    role_t role = 0;
    CHECK(auth_check(a, "Bearer tok-w", tenant, sizeof tenant, &role) == 0 && !strcmp(tenant, "team-a") &&
          role == ROLE_WRITE);
    CHECK(auth_check(a, "bearer   tok-admin", tenant, sizeof tenant, &role) == 0 && role == ROLE_ADMIN);
    CHECK(auth_check(a, "Basic YW5uOnMzY3JldA==", tenant, sizeof tenant, &role) == 0 && !strcmp(tenant, "team-b") &&
          role == ROLE_READ);                                                       /* ann:s3cret */
    CHECK(auth_check(a, "Basic YW5uOndyb25n", tenant, sizeof tenant, &role) == -1); /* ann:wrong */
    CHECK(auth_check(a, "Bearer tok-", tenant, sizeof tenant, &role) == -1);
    CHECK(auth_check(a, "Bearer tok-ww", tenant, sizeof tenant, &role) == -1);
    CHECK(auth_check(a, "Token tok-w", tenant, sizeof tenant, &role) == -1);
    CHECK(auth_check(a, "Basic !!!", tenant, sizeof tenant, &role) == -1);
    CHECK(auth_check(a, NULL, tenant, sizeof tenant, &role) == -1);
    auth_free(a);
    unlink(path);
    static const struct {
        const char *text, *says;
    } BAD[] = {
        {"bearer tok team\n", ":1: want `bearer|basic SECRET TENANT ROLE`"},
        {"# ok\ntoken tok team read\n", ":2: kind must be bearer or basic"},
        {"basic nocolon team read\n", ":1: basic credentials are USER:PASSWORD"},
        {"bearer tok te/am read\n", ":1: bad tenant id"},
        {"bearer tok team root\n", ":1: role must be read, write or admin"},
        {"# nothing\n\n", "holds no credentials"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        write_tmp(path, BAD[i].text);
        err = (hr_err_t){0};
        CHECK(auth_load(path, &err) == NULL && strstr(err.msg, BAD[i].says));
        unlink(path);
    }
    CHECK(auth_load("/nonexistent/auth", &err) == NULL && strstr(err.msg, "cannot read auth file"));
}

/* Runs config_load on argv; its error text in msg[512]. */
static int load_flags(config_t *c, char **argv, int argc, char msg[512]) {
    FILE *f = tmpfile();
    int rc = config_load(c, argc, argv, f);
    msg[0] = 0;
    if (f) {
        rewind(f);
        size_t n = fread(msg, 1, 511, f);
        msg[n] = 0;
        fclose(f);
    }
    return rc;
}

/* Flags: defaults, both flag spellings, sizes with units, the environment under the flags,
 * and unknown flags, bad values and stray arguments refused with their name. */
void test_config_flags_env_and_errors(void) {
    static config_t c; /* large */
    char msg[512];
    char *plain[] = {"hearth"};
    CHECK(load_flags(&c, plain, 1, msg) == 0 && c.max_body_bytes == (size_t)16 << 20);
    char *sizes[] = {"hearth", "serve", "--max-body-bytes", "2MiB", "--block-cache-bytes=3GiB"};
    CHECK(load_flags(&c, sizes, 5, msg) == 0 && c.max_body_bytes == (size_t)2 << 20 &&
          c.block_cache_bytes == (size_t)3 << 30);
    setenv("HEARTH_MAX_BODY_BYTES", "5MiB", 1);
    CHECK(load_flags(&c, plain, 1, msg) == 0 && c.max_body_bytes == (size_t)5 << 20);
    CHECK(load_flags(&c, sizes, 5, msg) == 0 && c.max_body_bytes == (size_t)2 << 20); /* the flag wins */
    setenv("HEARTH_MAX_BODY_BYTES", "lots", 1);
    CHECK(load_flags(&c, plain, 1, msg) == -1 && strstr(msg, "max-body-bytes"));
    unsetenv("HEARTH_MAX_BODY_BYTES");
    char *unknown[] = {"hearth", "--max-bodies", "1"};
    CHECK(load_flags(&c, unknown, 3, msg) == -1 && strstr(msg, "unknown flag `--max-bodies`"));
    char *stray[] = {"hearth", "serve", "extra"};
    CHECK(load_flags(&c, stray, 3, msg) == -1 && strstr(msg, "unexpected argument `extra`"));
    char *bad[] = {"hearth", "--wal-fsync", "sometimes"};
    CHECK(load_flags(&c, bad, 3, msg) == -1 && strstr(msg, "wal-fsync"));
}
