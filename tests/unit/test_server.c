/* The HTTP layer's own machinery: the handler pool and lingering close. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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
