/* objstore.c - `hearth objstore URL COMMAND`: the S3 client (remote/objstore.h) by hand.
 *
 * Puts, gets (whole or by byte ranges), heads, lists and deletes objects, so an
 * operator can check an object store's URL and keys before pointing Hearth at it, and
 * the integration tests drive the client against a real S3 server through the same
 * binary every sanitizer build already produces. `get --threads N` reads the same
 * ranges from N threads over one shared store and checks they agree, the concurrent
 * use the cluster's queries will make. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "remote/objstore.h"

static const char USAGE[] =
    "Usage: hearth objstore URL COMMAND [ARGS] [flags]\n\n"
    "A client for the object stores of the cluster mode. URL is\n"
    "s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&region=REGION (S3), or\n"
    "azblob://CONTAINER/PREFIX?endpoint=https://ACCOUNT.blob.core.windows.net (Azure Blob Storage);\n"
    "keys are relative to PREFIX. The keys come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\n"
    "(Azure: AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN), or the\n"
    "flags, which other users of the machine can see in the process list.\n\n"
    "Commands:\n"
    "  put KEY FILE   store FILE, streamed (FILE `-`: standard input, read into memory first)\n"
    "  get KEY        write the object to standard output\n"
    "  head KEY       print the object's size in bytes\n"
    "  ls [PREFIX]    print `KEY SIZE` for every object under PREFIX, in key order\n"
    "  rm KEY         delete the object\n"
    "  abort-stale SECONDS [PREFIX]\n"
    "                 abort the multipart uploads begun more than SECONDS ago (a crashed put's parts)\n\n"
    "Flags:\n"
    "  --if-absent         put: only create; an existing KEY is left alone (exit 3)\n"
    "  --range OFF:LEN,..  get: only these byte ranges, written one after another\n"
    "  --threads N         get: read from N threads at once, which must agree (default 1)\n"
    "  --page N            ls: objects per ListObjectsV2 page (default 1000)\n"
    "  --multipart-threshold BYTES\n"
    "                      put: a larger FILE goes up in parts (default 67108864, 64 MiB)\n"
    "  --timeout-ms MS     connect timeout, and stall timeout, per attempt (default 5000/30000)\n"
    "  --retries N         extra attempts after a 5xx or a connection failure (default 2)\n"
    "  --access-key KEY, --secret-key SECRET\n\n"
    "Exit status: 0 done, 1 failed (the error class first: ENOTFOUND, EIO = transient, ...),\n"
    "2 bad usage, 3 put --if-absent found KEY existing.\n\n"
    "Example:\n"
    "  hearth objstore 's3://hearth/prod?endpoint=http://127.0.0.1:7480' ls\n";

static const char *code_name(hr_code_t c) {
    // clang-format off
    static const char *const NAMES[] = {
        [HR_OK] = "OK", [HR_EINVAL] = "EINVAL", [HR_EUNPROC] = "EUNPROC", [HR_ETOOBIG] = "ETOOBIG",
        [HR_ENOTFOUND] = "ENOTFOUND", [HR_EIO] = "EIO", [HR_ENOMEM] = "ENOMEM", [HR_EINTERNAL] = "EINTERNAL",
        [HR_ELIMIT] = "ELIMIT", [HR_ETIMEOUT] = "ETIMEOUT", [HR_EDENIED] = "EDENIED",
    };
    // clang-format on
    return (size_t)c < sizeof NAMES / sizeof *NAMES && NAMES[c] ? NAMES[c] : "E?";
}

static int fail(const hr_err_t *err) {
    fprintf(stderr, "hearth objstore: %s: %s\n", code_name(err->code), err->msg);
    return 1;
}

/* Parses "OFF:LEN,OFF:LEN" into a new array (caller frees); NULL after printing why. */
static objstore_range_t *parse_ranges(const char *s, size_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    objstore_range_t *r = calloc(cap, sizeof *r);
    if (!r) return NULL;
    *n = 0;
    while (*s) {
        char *end;
        unsigned long long off = strtoull(s, &end, 10), len;
        if (end == s || *end != ':') break;
        s = end + 1;
        len = strtoull(s, &end, 10);
        if (end == s || (*end && *end != ',') || !len) break;
        r[(*n)++] = (objstore_range_t){.off = off, .len = len};
        s = end + (*end == ',');
        if (!*s) return r;
    }
    fprintf(stderr, "hearth objstore: --range wants OFF:LEN[,OFF:LEN...] with LEN > 0\n");
    free(r);
    return NULL;
}

typedef struct {
    objstore_t *s;
    const char *key;
    const objstore_range_t *r; /* NULL: the whole object */
    size_t nr;
    buf_t out;
    hr_err_t err;
    int rc;
} reader_t;

static void *reader_run(void *arg) {
    reader_t *t = arg;
    t->rc = t->r ? objstore_get_ranges(t->s, t->key, t->r, t->nr, &t->out, &t->err)
                 : objstore_get(t->s, t->key, SIZE_MAX, &t->out, &t->err);
    return NULL;
}

/* get: nthreads readers of the same bytes; the first one's bytes go to stdout. */
static int cmd_get(objstore_t *s, const char *key, const char *ranges, int nthreads) {
    size_t nr = 0;
    objstore_range_t *r = ranges ? parse_ranges(ranges, &nr) : NULL;
    if (ranges && !r) return 2;
    reader_t *t = calloc((size_t)nthreads, sizeof *t);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    int rc = t && th ? 0 : 1, started = 0;
    if (rc) fprintf(stderr, "hearth objstore: ENOMEM: out of memory\n");
    while (rc == 0 && started < nthreads) {
        t[started] = (reader_t){.s = s, .key = key, .r = r, .nr = nr};
        buf_init(&t[started].out);
        if (pthread_create(&th[started], NULL, reader_run, &t[started]))
            rc = 1, fprintf(stderr, "hearth objstore: cannot start thread %d\n", started);
        else started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int i = 0; rc == 0 && i < started; i++) {
        const buf_t *a = &t[i].out, *b = &t[0].out;
        if (t[i].rc) rc = fail(&t[i].err);
        else if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len))) {
            fprintf(stderr, "hearth objstore: EINTERNAL: thread %d read other bytes than thread 0\n", i);
            rc = 1;
        }
    }
    if (rc == 0 && t[0].out.len && fwrite(t[0].out.data, 1, t[0].out.len, stdout) != t[0].out.len) rc = 1;
    for (int i = 0; i < started; i++) buf_free(&t[i].out);
    free(t), free(th), free(r);
    return rc;
}

static int cmd_put(objstore_t *s, const char *key, const char *file, int flags) {
    hr_err_t err = {0};
    int rc;
    if (strcmp(file, "-")) rc = objstore_put_file(s, key, file, flags, &err);
    else {
        buf_t in;
        buf_init(&in);
        char chunk[65536];
        size_t k;
        while ((k = fread(chunk, 1, sizeof chunk, stdin)) > 0) buf_append(&in, chunk, k);
        rc = in.oom ? hr_fail(&err, HR_ENOMEM, "out of memory reading standard input")
                    : objstore_put(s, key, in.data, in.len, flags, &err);
        buf_free(&in);
    }
    if (rc < 0) return fail(&err);
    printf(rc ? "exists %s (left alone)\n" : "stored %s\n", key);
    return rc ? 3 : 0;
}

static int print_entry(void *ctx, const char *key, uint64_t size) {
    (void)ctx;
    printf("%s %llu\n", key, (unsigned long long)size);
    return 0;
}

static int run(objstore_t *s, const char *cmd, const char **pos, size_t npos, const char *const *fl) {
    hr_err_t err = {0};
    /* fl: if_absent, range, threads */
    if (!strcmp(cmd, "put") && npos == 4) return cmd_put(s, pos[2], pos[3], fl[0] ? OBJSTORE_IF_ABSENT : 0);
    if (!strcmp(cmd, "get") && npos == 3) {
        int n = fl[2] ? atoi(fl[2]) : 1;
        if (n < 1 || n > 64) return fprintf(stderr, "hearth objstore: --threads is 1 to 64\n"), 2;
        return cmd_get(s, pos[2], fl[1], n);
    }
    if (!strcmp(cmd, "head") && npos == 3) {
        uint64_t size;
        if (objstore_head(s, pos[2], &size, &err)) return fail(&err);
        printf("%llu\n", (unsigned long long)size);
        return 0;
    }
    if (!strcmp(cmd, "ls") && npos <= 3)
        return objstore_list(s, npos == 3 ? pos[2] : "", print_entry, NULL, &err) ? fail(&err) : 0;
    if (!strcmp(cmd, "rm") && npos == 3) return objstore_delete(s, pos[2], &err) ? fail(&err) : 0;
    if (!strcmp(cmd, "abort-stale") && npos >= 3 && npos <= 4) {
        size_t n = 0;
        if (objstore_abort_stale(s, npos == 4 ? pos[3] : "", atoll(pos[2]), &n, &err)) return fail(&err);
        printf("aborted %zu\n", n);
        return 0;
    }
    fprintf(stderr, "hearth objstore: `%s` with %zu argument(s) is not a command (see hearth objstore --help)\n", cmd,
            npos - 2);
    return 2;
}

int cli_objstore(int argc, char **argv) {
    const char *ak = NULL, *sk = NULL, *if_absent = NULL, *range = NULL, *threads = NULL, *page = NULL, *timeout = NULL,
               *retries = NULL, *multipart = NULL;
    const cli_opt_t opts[] = {
        {"access-key", &ak, 0},      {"secret-key", &sk, 0},   {"if-absent", &if_absent, 1},
        {"range", &range, 0},        {"threads", &threads, 0}, {"page", &page, 0},
        {"timeout-ms", &timeout, 0}, {"retries", &retries, 0}, {"multipart-threshold", &multipart, 0},
    };
    const char *pos[4];
    size_t npos;
    int prc = cli_parse(argc, argv, opts, sizeof opts / sizeof *opts, pos, 4, &npos, USAGE);
    if (prc) return prc == 1 ? 0 : 2;
    if (npos < 2) return fputs(USAGE, stderr), 2;
    long tmo = timeout ? atol(timeout) : 0;
    objstore_config_t cfg = {
        .url = pos[0],
        .access_key = ak,
        .secret_key = sk,
        .connect_timeout_ms = tmo,
        .stall_timeout_ms = tmo,
        .retries = !retries            ? 0
                   : atoi(retries) > 0 ? atoi(retries)
                                       : -1, /* objstore: 0 is its default */
        .list_page = page ? atoi(page) : 0,
        .multipart_threshold = multipart ? strtoull(multipart, NULL, 10) : 0,
    };
    hr_err_t err = {0};
    objstore_t *s = objstore_open(&cfg, &err);
    if (!s) return fail(&err), 2;
    const char *fl[] = {if_absent, range, threads};
    /* pos[1] is the command; run() sees the positional list as `URL COMMAND ARGS`. */
    int rc = run(s, pos[1], pos, npos, fl);
    objstore_free(s);
    return rc;
}
