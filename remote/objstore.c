/* objstore.c - the S3 client (objstore.h): path-style requests signed by libcurl.
 *
 * libcurl signs (CURLOPT_AWS_SIGV4), but Debian 12's curl 7.88 leaves two parts of the
 * canonical request to its caller, and this file supplies both:
 *  - the payload hash: curl signs whatever x-amz-content-sha256 header it is given,
 *    so every request sets one, the SHA-256 of its body (OpenSSL, which libcurl links
 *    anyway); an empty body has a well-known hash.
 *  - the query string: curl signs it byte for byte as the URL has it, while S3
 *    recomputes it sorted by name with every value percent-encoded. So each query is
 *    written here already in canonical form (names in order, values encoded with
 *    objstore_encode), and the object path is encoded the same way, with CURLOPT_PATH_AS_IS
 *    so curl never rewrites a "." or ".." segment of a key.
 *
 * One request is one `req_t`: method, key, query, headers, a body from memory or a
 * file, and where the answer goes. `perform` runs it with bounded retries: a transport
 * failure or a 5xx is tried again after 100, 200, 400 ms..., with the answer buffer
 * rolled back and the file rewound, so a retry sends and keeps exactly what the first
 * attempt would have. Anything else is final at once. */
#include "remote/objstore.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "common/base64.h"
#include "common/log.h"
#include "remote/azblob.h"

#define POOL_MAX 8       /* idle easy handles kept (each holds its connections) */
#define KEY_MAX 1024     /* S3's limit on an object name, in bytes */
#define ERRBODY_MAX 4096 /* of an error answer kept to find its <Code> */
#define LIST_ANSWER_MAX (16u << 20)
#define MULTIPART_THRESHOLD (64ull << 20) /* default: files larger go up in parts */
#define PART_MIN (5ull << 20)             /* S3's smallest part (but the last) */
#define PART_MAX (16ull << 20)
#define PARTS_MAX 10000 /* S3's most parts of one upload */

static const char EMPTY_SHA256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct objstore {
    char *endpoint, *bucket, *prefix, *region, *access, *secret, *sigv4;
    /* azblob:// (Azure Blob Storage, azblob.h): the bucket is the container; requests are
     * signed with the account key (Shared Key), or carry a SAS token instead. */
    int azure;
    char *account, *sas;
    uint8_t *azkey;
    size_t azkeylen;
    long connect_ms, stall_ms, timeout_ms;
    int retries, list_page;
    uint64_t multipart_threshold, part_size;
    pthread_mutex_t mu; /* guards pool, npool */
    CURL *pool[POOL_MAX];
    size_t npool;
    /* The store answered a conditional put 501 (OpenStack Swift's S3 API, older MinIO):
     * from then on puts are plain. Nothing depends on the condition (objstore.h). */
    atomic_int no_if_absent;
};

/* ---------------------------------------------------------------- encoding */

void objstore_encode(buf_t *out, const char *s, size_t n, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (c == '/' && keep_slash))
            buf_putc(out, c);
        else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            buf_append(out, e, 3);
        }
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Appends code point cp as UTF-8; -1 for one XML does not allow. */
static int put_utf8(buf_t *out, unsigned long cp) {
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    if (cp < 0x80) buf_putc(out, (uint8_t)cp);
    else if (cp < 0x800) {
        buf_putc(out, (uint8_t)(0xC0 | cp >> 6));
        buf_putc(out, (uint8_t)(0x80 | (cp & 63)));
    } else if (cp < 0x10000) {
        buf_putc(out, (uint8_t)(0xE0 | cp >> 12));
        buf_putc(out, (uint8_t)(0x80 | (cp >> 6 & 63)));
        buf_putc(out, (uint8_t)(0x80 | (cp & 63)));
    } else {
        buf_putc(out, (uint8_t)(0xF0 | cp >> 18));
        buf_putc(out, (uint8_t)(0x80 | (cp >> 12 & 63)));
        buf_putc(out, (uint8_t)(0x80 | (cp >> 6 & 63)));
        buf_putc(out, (uint8_t)(0x80 | (cp & 63)));
    }
    return 0;
}

int objstore_xml_unescape(buf_t *out, const char *p, size_t n) {
    static const struct {
        const char *name;
        char c;
    } NAMED[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '&') {
            buf_putc(out, (uint8_t)p[i]);
            continue;
        }
        const char *semi = memchr(p + i, ';', n - i);
        if (!semi) return -1;
        const char *e = p + i + 1;
        size_t en = (size_t)(semi - e);
        int done = 0;
        for (size_t k = 0; k < sizeof NAMED / sizeof *NAMED && !done; k++)
            if (strlen(NAMED[k].name) == en && !memcmp(NAMED[k].name, e, en))
                buf_putc(out, (uint8_t)NAMED[k].c), done = 1;
        if (!done) {
            if (en < 2 || e[0] != '#') return -1;
            int base = e[1] == 'x' ? 16 : 10;
            unsigned long cp = 0;
            size_t d = base == 16 ? 2 : 1;
            if (d == en || en - d > 8) return -1;
            for (; d < en; d++) {
                int v = hexval(e[d]);
                if (v < 0 || v >= base) return -1;
                cp = cp * (unsigned long)base + (unsigned long)v;
            }
            if (put_utf8(out, cp)) return -1;
        }
        i = (size_t)(semi - p);
    }
    return out->oom ? -1 : 0;
}

/* The text of the first <tag>...</tag> in [p, end): 1 and *v, *vn, or 0. */
static int xml_find(const char *p, const char *end, const char *tag, const char **v, size_t *vn) {
    char open[64], close[64];
    int ol = snprintf(open, sizeof open, "<%s>", tag), cl = snprintf(close, sizeof close, "</%s>", tag);
    const char *a = memmem(p, (size_t)(end - p), open, (size_t)ol);
    if (!a) return 0;
    a += ol;
    const char *b = memmem(a, (size_t)(end - a), close, (size_t)cl);
    if (!b) return 0;
    *v = a, *vn = (size_t)(b - a);
    return 1;
}

int objstore_azure_list_page(const char *xml, size_t n, size_t skip, objstore_list_fn fn, void *ctx, buf_t *next,
                             hr_err_t *err) {
    const char *p = xml, *end = xml + n, *b, *v;
    size_t vn;
    buf_t name;
    buf_init(&name);
    int rc = 0;
    next->len = 0;
    while (rc == 0 && (b = memmem(p, (size_t)(end - p), "<Blob>", 6))) {
        const char *be = memmem(b, (size_t)(end - b), "</Blob>", 7);
        const char *sv;
        size_t sn;
        if (!be || !xml_find(b, be, "Name", &v, &vn) || !xml_find(b, be, "Content-Length", &sv, &sn) || !sn ||
            sn > 20) {
            rc = hr_fail(err, HR_EINTERNAL, "azure listing: a <Blob> without <Name> or <Content-Length>");
            break;
        }
        char num[24], *numend;
        snprintf(num, sizeof num, "%.*s", (int)sn, sv);
        unsigned long long size = strtoull(num, &numend, 10);
        name.len = 0;
        if (objstore_xml_unescape(&name, v, vn) || *numend) {
            rc = hr_fail(err, name.oom ? HR_ENOMEM : HR_EINTERNAL, "azure listing: a bad <Name> or <Content-Length>");
            break;
        }
        buf_putc(&name, 0);
        if (name.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else if (name.len - 1 < skip) rc = hr_fail(err, HR_EINTERNAL, "azure listing: a blob outside the prefix");
        else if (fn(ctx, (const char *)name.data + skip, size)) rc = 1;
        p = be + 7;
    }
    buf_free(&name);
    if (rc == 0 && xml_find(xml, end, "NextMarker", &v, &vn) && vn && objstore_xml_unescape(next, v, vn))
        rc = hr_fail(err, HR_EINTERNAL, "azure listing: a bad <NextMarker>");
    return rc;
}

/* ---------------------------------------------------------------- opening */

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A query parameter's value, percent-decoded; NULL on a bad escape or no memory. */
static char *url_decode(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            d[o++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0)) return free(d), NULL;
        d[o++] = (char)(hi * 16 + lo);
        i += 2;
    }
    d[o] = 0;
    return d;
}

/* Reads the ?name=value&... part of the URL into s (endpoint, region). */
static int parse_params(objstore_t *s, const char *q, hr_err_t *err) {
    while (*q) {
        size_t n = strcspn(q, "&");
        const char *eq = memchr(q, '=', n);
        if (!eq) return hr_fail(err, HR_EINVAL, "object store URL: `%.*s` is not name=value", (int)n, q);
        size_t nl = (size_t)(eq - q);
        char **slot = nl == 8 && !memcmp(q, "endpoint", 8)              ? &s->endpoint
                      : nl == 6 && !memcmp(q, "region", 6) && !s->azure ? &s->region
                      : nl == 7 && !memcmp(q, "account", 7) && s->azure ? &s->account
                                                                        : NULL;
        if (!slot)
            return hr_fail(err, HR_EINVAL, "object store URL: unknown parameter `%.*s` (use endpoint, %s)", (int)nl, q,
                           s->azure ? "account" : "region");
        free(*slot);
        *slot = url_decode(eq + 1, n - nl - 1);
        if (!*slot) return hr_fail(err, HR_EINVAL, "object store URL: bad percent-encoding in `%.*s`", (int)n, q);
        q += n + (q[n] == '&');
    }
    return 0;
}

static int parse_url(objstore_t *s, const char *url, hr_err_t *err) {
    s->azure = url && !strncmp(url, "azblob://", 9);
    if (!url || (strncmp(url, "s3://", 5) && !s->azure))
        return hr_fail(err, HR_EINVAL,
                       "object store URL must look like s3://bucket/prefix?endpoint=http://host:port or "
                       "azblob://container/prefix?endpoint=https://ACCOUNT.blob.core.windows.net");
    const char *p = url + (s->azure ? 9 : 5), *q = strchr(p, '?');
    size_t path_n = q ? (size_t)(q - p) : strlen(p), bn = strcspn(p, "/?");
    if (bn < 3 || bn > 63) return hr_fail(err, HR_EINVAL, "object store URL: a bucket name has 3 to 63 characters");
    s->bucket = dup_n(p, bn);
    const char *pre = p + bn;
    size_t pn = path_n - bn;
    while (pn && *pre == '/') pre++, pn--;
    while (pn && pre[pn - 1] == '/') pn--;
    s->prefix = dup_n(pre, pn);
    if (!s->bucket || !s->prefix) return hr_fail(err, HR_ENOMEM, "out of memory");
    if (q && parse_params(s, q + 1, err)) return -1;
    if (!s->endpoint || (strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8)))
        return hr_fail(err, HR_EINVAL, "object store URL: endpoint=http://host:port (or https://) is required");
    size_t el = strlen(s->endpoint);
    while (el && s->endpoint[el - 1] == '/') s->endpoint[--el] = 0;
    return 0;
}

/* Azure's account and its key (base64) or a SAS token: from the config, else the
 * environment Azure's own tools read (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY,
 * AZURE_STORAGE_SAS_TOKEN), the account also from the URL's account=. */
static int azure_credentials(objstore_t *s, const objstore_config_t *cfg, hr_err_t *err) {
    const char *acct = cfg->access_key ? cfg->access_key : getenv("AZURE_STORAGE_ACCOUNT");
    const char *key = cfg->secret_key ? cfg->secret_key : getenv("AZURE_STORAGE_KEY");
    const char *sas = getenv("AZURE_STORAGE_SAS_TOKEN");
    if (acct && *acct) {
        free(s->account);
        if (!(s->account = strdup(acct))) return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (!s->account || !*s->account)
        return hr_fail(err, HR_EINVAL,
                       "azure object store: no account (AZURE_STORAGE_ACCOUNT, or account= in the URL)");
    if (sas && *sas) {
        if (!(s->sas = strdup(sas[0] == '?' ? sas + 1 : sas))) return hr_fail(err, HR_ENOMEM, "out of memory");
        return 0;
    }
    if (!key || !*key || base64_decode(key, strlen(key), &s->azkey, &s->azkeylen) || !s->azkeylen)
        return hr_fail(err, HR_EINVAL,
                       "azure object store: no usable key (AZURE_STORAGE_KEY, base64) and no AZURE_STORAGE_SAS_TOKEN");
    return 0;
}

objstore_t *objstore_open(const objstore_config_t *cfg, hr_err_t *err) {
    objstore_t *s = calloc(1, sizeof *s);
    if (!s) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    pthread_mutex_init(&s->mu, NULL);
    if (parse_url(s, cfg->url, err)) return objstore_free(s), NULL;
    if (s->azure && azure_credentials(s, cfg, err)) return objstore_free(s), NULL;
    const char *ak = s->azure ? "-" : cfg->access_key ? cfg->access_key : getenv("AWS_ACCESS_KEY_ID");
    const char *sk = s->azure ? "-" : cfg->secret_key ? cfg->secret_key : getenv("AWS_SECRET_ACCESS_KEY");
    if (!ak || !*ak || !sk || !*sk) {
        objstore_free(s);
        hr_fail(err, HR_EINVAL,
                "object store: no keys (give them, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
        return NULL;
    }
    if (!s->region && !(s->region = strdup("us-east-1")))
        return objstore_free(s), hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    s->access = strdup(ak);
    s->secret = strdup(sk);
    size_t sl = strlen(s->region) + 16;
    s->sigv4 = malloc(sl);
    if (!s->access || !s->secret || !s->sigv4) return objstore_free(s), hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    snprintf(s->sigv4, sl, "aws:amz:%s:s3", s->region);
    s->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000;
    s->stall_ms = cfg->stall_timeout_ms > 0 ? cfg->stall_timeout_ms : 30000;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 0;
    s->retries = cfg->retries > 0 ? cfg->retries : cfg->retries < 0 ? 0 : 2;
    s->list_page = cfg->list_page > 0 && cfg->list_page <= 1000 ? cfg->list_page : 1000;
    s->multipart_threshold = cfg->multipart_threshold ? cfg->multipart_threshold : MULTIPART_THRESHOLD;
    if (s->multipart_threshold < PART_MIN) s->multipart_threshold = PART_MIN;
    s->part_size = s->multipart_threshold < PART_MAX ? s->multipart_threshold : PART_MAX;
    return s;
}

void objstore_free(objstore_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->npool; i++) curl_easy_cleanup(s->pool[i]);
    if (s->secret) explicit_bzero(s->secret, strlen(s->secret));
    free(s->endpoint), free(s->bucket), free(s->prefix), free(s->region);
    free(s->access), free(s->secret), free(s->sigv4);
    if (s->azkey) explicit_bzero(s->azkey, s->azkeylen);
    free(s->account), free(s->sas), free(s->azkey);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static CURL *pool_take(objstore_t *s) {
    CURL *c = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->npool) c = s->pool[--s->npool];
    pthread_mutex_unlock(&s->mu);
    return c ? c : curl_easy_init();
}

static void pool_give(objstore_t *s, CURL *c) {
    pthread_mutex_lock(&s->mu);
    if (s->npool < POOL_MAX) s->pool[s->npool++] = c, c = NULL;
    pthread_mutex_unlock(&s->mu);
    if (c) curl_easy_cleanup(c);
}

/* ---------------------------------------------------------------- one request */

typedef struct {
    const char *method; /* GET, PUT, HEAD, DELETE, POST */
    const char *key;    /* relative to the prefix; NULL: the bucket (a listing) */
    const char *query;  /* canonical (sorted, encoded) or NULL */
    char range[64];     /* the Range header's value, or "" */
    int if_absent;
    int blob;            /* Azure's Put Blob: x-ms-blob-type (not for blocks and block lists) */
    const uint8_t *data; /* a PUT's body from memory, */
    size_t n, sent;
    FILE *f; /* or from a file: n bytes from off */
    uint64_t off;
    char sha[65];
    char etag[160]; /* the answer's ETag header (a part's), or "" */
    buf_t *out;     /* a 2xx answer's body (NULL: none expected) */
    size_t max;     /* more than this is refused */
    int over;
    long status;
    uint64_t length; /* the answer's Content-Length (a HEAD's object size) */
    buf_t errbody;   /* a non-2xx answer's body, up to ERRBODY_MAX */
    CURL *c;
} req_t;

static size_t on_body(char *p, size_t size, size_t nm, void *ctx) {
    req_t *r = ctx;
    size_t n = size * nm;
    long st = 0;
    curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &st);
    if (st < 200 || st > 299) {
        size_t room = ERRBODY_MAX - r->errbody.len;
        buf_append(&r->errbody, p, n < room ? n : room);
        return n;
    }
    if (!r->out) return n;                               /* an answer nobody asked for (a PUT's empty XML) */
    if (r->out->len + n > r->max) return r->over = 1, 0; /* curl stops with a write error */
    buf_append(r->out, p, n);
    return r->out->oom ? 0 : n;
}

static size_t on_send(char *p, size_t size, size_t nm, void *ctx) {
    req_t *r = ctx;
    size_t room = size * nm;
    size_t k = r->n - r->sent < room ? r->n - r->sent : room; /* a part's file goes on past its n bytes */
    if (r->f) {
        k = fread(p, 1, k, r->f);
        if (!k && ferror(r->f)) return CURL_READFUNC_ABORT;
    } else {
        memcpy(p, r->data + r->sent, k);
    }
    r->sent += k;
    return k;
}

/* Keeps the ETag header (a part's, which completing the upload names). */
static size_t on_header(char *p, size_t size, size_t nm, void *ctx) {
    req_t *r = ctx;
    size_t n = size * nm;
    if (n > 5 && !strncasecmp(p, "etag:", 5)) {
        const char *v = p + 5, *end = p + n;
        while (v < end && (*v == ' ' || *v == '\t')) v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
        snprintf(r->etag, sizeof r->etag, "%.*s", (int)(end - v), v);
    }
    return n;
}

/* ENDPOINT/BUCKET[/PREFIX/KEY], the path encoded as SigV4's canonical URI wants. */
static void object_url(const objstore_t *s, const char *key, buf_t *u) {
    buf_printf(u, "%s/", s->endpoint);
    objstore_encode(u, s->bucket, strlen(s->bucket), 0);
    if (key) {
        buf_putc(u, '/');
        if (*s->prefix) {
            objstore_encode(u, s->prefix, strlen(s->prefix), 1);
            buf_putc(u, '/');
        }
        objstore_encode(u, key, strlen(key), 1);
    }
}

/* Azure's headers for r, and its Shared Key signature unless a SAS token rides in the
 * URL: the signature covers the headers sent, so they are all listed here once. */
static int azure_headers(objstore_t *s, req_t *r, const char *url, struct curl_slist **hdr) {
    char date[64], line[600];
    azblob_date(time(NULL), date, sizeof date);
    azblob_header_t h[6] = {{"x-ms-date", date}, {"x-ms-version", AZBLOB_VERSION}};
    size_t nh = 2;
    if (r->blob) h[nh++] = (azblob_header_t){"x-ms-blob-type", "BlockBlob"};
    if (r->range[0]) h[nh++] = (azblob_header_t){"Range", r->range};
    if (r->if_absent) h[nh++] = (azblob_header_t){"If-None-Match", "*"};
    for (size_t i = 0; i < nh; i++) {
        snprintf(line, sizeof line, "%s: %s", h[i].name, h[i].value);
        *hdr = curl_slist_append(*hdr, line);
    }
    *hdr = curl_slist_append(*hdr, "Expect:"); /* no 100-continue round trip */
    if (s->sas) return *hdr ? 0 : -1;
    const char *path = strstr(url, "://"), *q;
    path = path ? strchr(path + 3, '/') : NULL;
    if (!path || !*hdr) return -1;
    q = strchr(path, '?');
    char *p = strndup(path, q ? (size_t)(q - path) : strlen(path));
    buf_t auth;
    buf_init(&auth);
    buf_printf(&auth, "Authorization: ");
    hr_err_t err = {0};
    int rc = p ? azblob_sign(s->account, s->azkey, s->azkeylen, r->method, p, q ? q + 1 : NULL,
                             strcmp(r->method, "PUT") ? 0 : r->n, h, nh, &auth, &err)
               : -1;
    if (rc == 0) buf_putc(&auth, 0), *hdr = curl_slist_append(*hdr, (const char *)auth.data);
    free(p);
    buf_free(&auth);
    return rc || !*hdr ? -1 : 0;
}

static int setup(objstore_t *s, req_t *r, const char *url, struct curl_slist **hdr) {
    CURL *c = r->c;
    char h[160];
    if (s->azure) {
        if (azure_headers(s, r, url, hdr)) return -1;
    } else {
        snprintf(h, sizeof h, "x-amz-content-sha256: %s", r->sha[0] ? r->sha : EMPTY_SHA256);
        *hdr = curl_slist_append(*hdr, h);
        if (r->range[0]) snprintf(h, sizeof h, "Range: %s", r->range), *hdr = curl_slist_append(*hdr, h);
        if (r->if_absent) *hdr = curl_slist_append(*hdr, "If-None-Match: *");
        if (!*hdr) return -1;
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
        curl_easy_setopt(c, CURLOPT_USERNAME, s->access);
        curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdr);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s->connect_ms);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, s->stall_ms < 1000 ? 1L : s->stall_ms / 1000);
    if (s->timeout_ms) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s->timeout_ms);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "hearth-objstore");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (!strcmp(r->method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (!strcmp(r->method, "POST")) { /* a multipart upload's start and end: bodies from memory */
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->data ? (const char *)r->data : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->n);
    } else if (!strcmp(r->method, "PUT")) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_send);
        curl_easy_setopt(c, CURLOPT_READDATA, r);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->n);
    } else if (strcmp(r->method, "GET")) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    return 0;
}

/* What a failed attempt was; transient ones are retried. */
typedef enum { ATTEMPT_OK, ATTEMPT_TRANSIENT, ATTEMPT_FINAL } attempt_t;

static attempt_t attempt(objstore_t *s, req_t *r, const char *url, char *cerr, size_t cerr_n) {
    struct curl_slist *hdr = NULL;
    r->status = 0, r->over = 0, r->sent = 0, r->etag[0] = 0;
    r->errbody.len = 0;
    if (r->f && fseeko(r->f, (off_t)r->off, SEEK_SET))
        return snprintf(cerr, cerr_n, "cannot rewind: %s", strerror(errno)), ATTEMPT_FINAL;
    curl_easy_reset(r->c); /* keeps the handle's connections */
    if (setup(s, r, url, &hdr)) return curl_slist_free_all(hdr), snprintf(cerr, cerr_n, "out of memory"), ATTEMPT_FINAL;
    char eb[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(r->c, CURLOPT_ERRORBUFFER, eb);
    CURLcode rc = curl_easy_perform(r->c);
    curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_off_t cl = -1;
    if (curl_easy_getinfo(r->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK && cl >= 0)
        r->length = (uint64_t)cl;
    curl_slist_free_all(hdr);
    /* 501 Not Implemented is the store's answer for good, not a passing failure. */
    if (rc == CURLE_OK) return r->status >= 500 && r->status != 501 ? ATTEMPT_TRANSIENT : ATTEMPT_OK;
    snprintf(cerr, cerr_n, "%s", eb[0] ? eb : curl_easy_strerror(rc));
    if (r->over || (r->out && r->out->oom)) return ATTEMPT_FINAL;
    return ATTEMPT_TRANSIENT; /* connect, send, receive, timeout */
}

/* The S3 error code of an error answer (<Code>NoSuchKey</Code>), or "". */
static void s3_code(const req_t *r, char *code, size_t n) {
    const char *v, *p = (const char *)r->errbody.data;
    size_t vn;
    code[0] = 0;
    if (p && xml_find(p, p + r->errbody.len, "Code", &v, &vn)) snprintf(code, n, "%.*s", (int)(vn < 60 ? vn : 60), v);
}

/* Runs r with bounded retries. 0 on a 2xx (or 412 for a conditional put: r->status
 * says), -1 with err otherwise. */
static int perform(objstore_t *s, req_t *r, hr_err_t *err) {
    buf_t u;
    buf_init(&u);
    object_url(s, r->key, &u);
    if (r->query) buf_printf(&u, "?%s", r->query);
    if (s->sas) buf_printf(&u, "%c%s", r->query ? '&' : '?', s->sas);
    buf_putc(&u, 0);
    buf_init(&r->errbody);
    r->c = u.oom ? NULL : pool_take(s);
    if (!r->c) return buf_free(&u), hr_fail(err, HR_ENOMEM, "out of memory");
    size_t base = r->out ? r->out->len : 0;
    char cerr[CURL_ERROR_SIZE + 64] = "";
    attempt_t a = ATTEMPT_TRANSIENT;
    int tries = 0; /* attempts made */
    while (a == ATTEMPT_TRANSIENT && tries <= s->retries) {
        if (tries) { /* back off 100, 200, 400, 800 ms, 800 ms... */
            long ms = 100L << (tries - 1 < 3 ? tries - 1 : 3);
            struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (r->out) r->out->len = base; /* a retry keeps only its own answer */
        a = attempt(s, r, (const char *)u.data, cerr, sizeof cerr);
        tries++;
    }
    pool_give(s, r->c);
    r->c = NULL;
    char code[64];
    s3_code(r, code, sizeof code);
    buf_free(&r->errbody);
    const char *what = r->key ? r->key : "(bucket)";
    int rc = -1;
    if (r->out && r->out->oom) hr_fail(err, HR_ENOMEM, "out of memory reading %s", what);
    else if (r->over)
        hr_fail(err, r->range[0] ? HR_EINTERNAL : HR_ETOOBIG, "%s: the answer is larger than %zu bytes", what, r->max);
    else if (a == ATTEMPT_FINAL && r->status == 0) hr_fail(err, HR_EINTERNAL, "%s: %s", what, cerr);
    else if (r->status == 0)
        hr_fail(err, HR_EIO, "no answer from object store %s after %d attempt%s: %s", s->endpoint, tries,
                tries > 1 ? "s" : "", cerr);
    else if (a == ATTEMPT_TRANSIENT && r->status < 500) /* a status, then the body cut short */
        hr_fail(err, HR_EIO, "object store %s answered %ld to %s %s but the transfer failed after %d attempt%s: %s",
                s->endpoint, r->status, r->method, what, tries, tries > 1 ? "s" : "", cerr);
    else if (r->status == 501)
        hr_fail(err, HR_EINVAL, "object store %s does not implement %s %s%s (501 %s)", s->endpoint, r->method, what,
                r->if_absent ? " with If-None-Match (conditional writes)" : "", code[0] ? code : "NotImplemented");
    else if (r->status >= 500)
        hr_fail(err, HR_EIO, "object store answered %ld%s%s%s after %d attempt%s (%s %s)", r->status,
                code[0] ? " (" : "", code, code[0] ? ")" : "", tries, tries > 1 ? "s" : "", r->method, what);
    else if (r->status >= 200 && r->status <= 299) rc = 0;
    else if ((r->status == 412 || (s->azure && r->status == 409)) && r->if_absent) rc = 0, r->status = 412;
    else if (r->status == 404)
        hr_fail(err, HR_ENOTFOUND, "%s/%s%s%s: not found (%s)", s->bucket, s->prefix, *s->prefix ? "/" : "", what,
                code[0] ? code : "404");
    else if (r->status == 401 || r->status == 403)
        hr_fail(err, HR_EINVAL, "object store refused the request (%ld %s): check the %s", r->status,
                code[0] ? code : "AccessDenied",
                s->azure ? "account, its key or the SAS token" : "access key and secret key");
    else if (r->status == 416)
        hr_fail(err, HR_EINVAL, "%s: range %s is past the end of the object", what, r->range + 6);
    else
        hr_fail(err, HR_EINVAL, "object store answered %ld (%s) to %s %s", r->status, code[0] ? code : "?", r->method,
                what);
    buf_free(&u);
    return rc;
}

static int check_key(const char *key, hr_err_t *err) {
    size_t n = key ? strlen(key) : 0;
    if (!n || n > KEY_MAX) return hr_fail(err, HR_EINVAL, "an object key has 1 to %d bytes", KEY_MAX);
    return 0;
}

/* ---------------------------------------------------------------- operations */

/* The SHA-256 of n bytes at p, or (f) of the file's n bytes from its position. */
static int sha256_hex(const void *p, size_t n, FILE *f, char out[65], hr_err_t *err) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned mdn = 0;
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    if (ok && p) ok = EVP_DigestUpdate(ctx, p, n);
    if (ok && f) {
        unsigned char chunk[65536];
        size_t k, left = n;
        while (ok && left && (k = fread(chunk, 1, left < sizeof chunk ? left : sizeof chunk, f)) > 0)
            ok = EVP_DigestUpdate(ctx, chunk, k), left -= k;
        if (ferror(f)) return EVP_MD_CTX_free(ctx), hr_fail(err, HR_EIO, "cannot read: %s", strerror(errno));
    }
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdn) && mdn == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok) return hr_fail(err, HR_ENOMEM, "cannot compute SHA-256");
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* Runs the put r: conditional unless the store said it cannot, and then once more
 * plain when its answer is 501 to the condition. 0 (r->status says 412), or -1. */
static int perform_put(objstore_t *s, req_t *r, hr_err_t *err) {
    r->if_absent = r->if_absent && !atomic_load(&s->no_if_absent);
    hr_err_t e = {0};
    if (perform(s, r, &e) == 0) return 0;
    if (r->status != 501 || !r->if_absent) return *err = e, -1;
    if (!atomic_exchange(&s->no_if_absent, 1))
        log_warn("objstore.no_conditional_writes",
                 "endpoint=%s msg=\"the store answers 501 to If-None-Match: puts go plain (block keys are unique by "
                 "construction and the catalog decides what is published, so nothing relies on it)\"",
                 s->endpoint);
    r->if_absent = 0;
    return perform(s, r, err);
}

int objstore_put(objstore_t *s, const char *key, const void *data, size_t n, int flags, hr_err_t *err) {
    if (check_key(key, err)) return -1;
    req_t r = {
        .method = "PUT", .key = key, .data = data, .n = n, .if_absent = flags & OBJSTORE_IF_ABSENT, .blob = s->azure};
    if (sha256_hex(data, n, NULL, r.sha, err) || perform_put(s, &r, err)) return -1;
    return r.status == 412 ? 1 : 0;
}

/* ---------------------------------------------------------------- multipart uploads */

/* POST KEY?uploads=: a new multipart upload's id, query-encoded into qid. */
static int mp_start(objstore_t *s, const char *key, buf_t *qid, hr_err_t *err) {
    buf_t ans, id;
    buf_init(&ans), buf_init(&id);
    req_t r = {.method = "POST", .key = key, .query = "uploads=", .out = &ans, .max = 65536};
    const char *v;
    size_t vn;
    int rc = perform(s, &r, err);
    if (rc == 0 &&
        (!ans.data || !xml_find((const char *)ans.data, (const char *)ans.data + ans.len, "UploadId", &v, &vn) || !vn ||
         objstore_xml_unescape(&id, v, vn)))
        rc = hr_fail(err, HR_EINTERNAL, "%s: the store started a multipart upload without an <UploadId>", key);
    if (rc == 0) objstore_encode(qid, (const char *)id.data, id.len, 0);
    if (rc == 0 && qid->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    buf_free(&ans), buf_free(&id);
    return rc;
}

/* PUT KEY?partNumber=N&uploadId=ID: the file's n bytes from off, retried as any put;
 * its ETag appended to etags as CompleteMultipartUpload lists it. */
static int mp_part(objstore_t *s, const char *key, const char *qid, int part, FILE *f, uint64_t off, uint64_t n,
                   buf_t *etags, hr_err_t *err) {
    char q[600];
    if (snprintf(q, sizeof q, "partNumber=%d&uploadId=%s", part, qid) >= (int)sizeof q)
        return hr_fail(err, HR_EINTERNAL, "%s: an upload id too long to send", key);
    req_t r = {.method = "PUT", .key = key, .query = q, .f = f, .off = off, .n = (size_t)n};
    if (fseeko(f, (off_t)off, SEEK_SET)) return hr_fail(err, HR_EIO, "cannot seek: %s", strerror(errno));
    if (sha256_hex(NULL, (size_t)n, f, r.sha, err) || perform(s, &r, err)) return -1;
    if (!r.etag[0]) return hr_fail(err, HR_EINTERNAL, "%s: part %d stored without an ETag", key, part);
    buf_printf(etags, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", part, r.etag);
    return etags->oom ? hr_fail(err, HR_ENOMEM, "out of memory") : 0;
}

/* POST KEY?uploadId=ID with the parts: the object appears whole. S3 may answer 200 and
 * put its error in the body, which is then the error. */
static int mp_complete(objstore_t *s, const char *key, const char *qid, const buf_t *etags, hr_err_t *err) {
    char q[600];
    buf_t body, ans;
    buf_init(&body), buf_init(&ans);
    snprintf(q, sizeof q, "uploadId=%s", qid);
    buf_printf(&body, "<CompleteMultipartUpload>%.*s</CompleteMultipartUpload>", (int)etags->len,
               etags->data ? (const char *)etags->data : "");
    req_t r = {.method = "POST", .key = key, .query = q, .data = body.data, .n = body.len, .out = &ans, .max = 65536};
    int rc = body.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : sha256_hex(body.data, body.len, NULL, r.sha, err);
    if (rc == 0) rc = perform(s, &r, err);
    const char *v;
    size_t vn;
    if (rc == 0 && ans.data && memmem(ans.data, ans.len, "<Error>", 7)) {
        int found = xml_find((const char *)ans.data, (const char *)ans.data + ans.len, "Code", &v, &vn);
        rc = hr_fail(err, HR_EIO, "%s: completing the multipart upload failed (%.*s)", key, found ? (int)vn : 1,
                     found ? v : "?");
    }
    buf_free(&body), buf_free(&ans);
    return rc;
}

/* DELETE KEY?uploadId=ID: the parts stored so far are dropped (best effort: a stale
 * upload left behind is what objstore_abort_stale is for). */
static void mp_abort(objstore_t *s, const char *key, const char *qid) {
    char q[600];
    hr_err_t e = {0};
    snprintf(q, sizeof q, "uploadId=%s", qid);
    req_t r = {.method = "DELETE", .key = key, .query = q};
    if (perform(s, &r, &e))
        log_warn("objstore.multipart_abort_failed", "key=%s err=\"%s\" (objstore_abort_stale removes it later)", key,
                 e.msg);
}

/* The file f of size bytes as a multipart upload: parts of part_size (each retried as
 * any request is), completed, or aborted on the first failure. */
static int put_multipart(objstore_t *s, const char *key, FILE *f, uint64_t size, hr_err_t *err) {
    uint64_t part = s->part_size;
    while ((size + part - 1) / part > PARTS_MAX) part *= 2;
    buf_t qid, etags;
    buf_init(&qid), buf_init(&etags);
    int rc = mp_start(s, key, &qid, err);
    if (rc == 0) buf_putc(&qid, 0);
    for (uint64_t off = 0, i = 1; rc == 0 && off < size; off += part, i++)
        rc =
            mp_part(s, key, (const char *)qid.data, (int)i, f, off, size - off < part ? size - off : part, &etags, err);
    if (rc == 0) rc = mp_complete(s, key, (const char *)qid.data, &etags, err);
    if (rc && qid.len) mp_abort(s, key, (const char *)qid.data);
    buf_free(&qid), buf_free(&etags);
    return rc;
}

/* One <Upload> of a ListMultipartUploads page: aborted when begun before cutoff. */
static int stale_upload(objstore_t *s, const char *u, const char *ue, size_t skip, time_t cutoff, size_t *aborted,
                        hr_err_t *err) {
    const char *k, *id, *when;
    size_t kn, idn, whenn;
    if (!xml_find(u, ue, "Key", &k, &kn) || !xml_find(u, ue, "UploadId", &id, &idn) ||
        !xml_find(u, ue, "Initiated", &when, &whenn))
        return hr_fail(err, HR_EINTERNAL, "object store: an <Upload> without <Key>, <UploadId> or <Initiated>");
    char t[40];
    struct tm tm = {0};
    snprintf(t, sizeof t, "%.*s", (int)(whenn < 39 ? whenn : 39), when);
    if (!strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) || timegm(&tm) >= cutoff) return 0;
    buf_t key, rawid, qid;
    buf_init(&key), buf_init(&rawid), buf_init(&qid);
    int rc = objstore_xml_unescape(&key, k, kn) || objstore_xml_unescape(&rawid, id, idn) ? -1 : 0;
    if (rc == 0) objstore_encode(&qid, (const char *)rawid.data, rawid.len, 0), buf_putc(&qid, 0), buf_putc(&key, 0);
    if (rc || key.oom || qid.oom || key.len - 1 < skip) {
        rc = hr_fail(err, HR_EINTERNAL, "object store: a bad <Upload> in the multipart listing");
    } else {
        mp_abort(s, (const char *)key.data + skip, (const char *)qid.data);
        log_info("objstore.stale_multipart_aborted", "key=%s initiated=%s", (const char *)key.data + skip, t);
        (*aborted)++;
    }
    buf_free(&key), buf_free(&rawid), buf_free(&qid);
    return rc;
}

int objstore_abort_stale(objstore_t *s, const char *prefix, int64_t max_age_s, size_t *aborted, hr_err_t *err) {
    if (s->azure) return *aborted = 0, 0; /* Azure drops a blob's uncommitted blocks after a week itself */
    buf_t full, q, ans, kmark, umark;
    buf_init(&full), buf_init(&q), buf_init(&ans), buf_init(&kmark), buf_init(&umark);
    if (*s->prefix) buf_printf(&full, "%s/", s->prefix);
    size_t skip = full.len;
    buf_append(&full, prefix, strlen(prefix));
    time_t cutoff = time(NULL) - (time_t)max_age_s;
    *aborted = 0;
    int rc = 0, more = 1;
    while (rc == 0 && more) {
        q.len = 0, ans.len = 0;
        if (kmark.len) { /* the canonical query: names in byte order */
            buf_printf(&q, "key-marker=");
            objstore_encode(&q, (const char *)kmark.data, kmark.len, 0);
            buf_putc(&q, '&');
        }
        buf_printf(&q, "prefix=");
        objstore_encode(&q, (const char *)full.data, full.len, 0);
        if (umark.len) {
            buf_printf(&q, "&upload-id-marker=");
            objstore_encode(&q, (const char *)umark.data, umark.len, 0);
        }
        buf_printf(&q, "&uploads=");
        buf_putc(&q, 0);
        req_t r = {.method = "GET", .query = (const char *)q.data, .out = &ans, .max = LIST_ANSWER_MAX};
        rc = q.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : perform(s, &r, err);
        const char *p = ans.data ? (const char *)ans.data : "", *end = p + ans.len, *u, *v;
        size_t vn;
        for (const char *at = p; rc == 0 && (u = memmem(at, (size_t)(end - at), "<Upload>", 8)); at = u + 8) {
            const char *ue = memmem(u, (size_t)(end - u), "</Upload>", 9);
            if (!ue) rc = hr_fail(err, HR_EINTERNAL, "object store: an unterminated <Upload>");
            else rc = stale_upload(s, u, ue, skip, cutoff, aborted, err);
        }
        more = rc == 0 && xml_find(p, end, "IsTruncated", &v, &vn) && vn == 4 && !memcmp(v, "true", 4);
        kmark.len = umark.len = 0;
        if (more && xml_find(p, end, "NextKeyMarker", &v, &vn)) objstore_xml_unescape(&kmark, v, vn);
        if (more && xml_find(p, end, "NextUploadIdMarker", &v, &vn)) objstore_xml_unescape(&umark, v, vn);
        if (more && !kmark.len) rc = hr_fail(err, HR_EINTERNAL, "object store: a truncated listing without a marker");
    }
    buf_free(&full), buf_free(&q), buf_free(&ans), buf_free(&kmark), buf_free(&umark);
    return rc;
}

/* Azure's way: Put Block per part (its id in the query), then Put Block List naming them
 * in order. Nothing to abort on failure: uncommitted blocks never become the blob. */
static int put_blocks(objstore_t *s, const char *key, FILE *f, uint64_t size, hr_err_t *err) {
    uint64_t part = s->part_size;
    while ((size + part - 1) / part > PARTS_MAX) part *= 2;
    buf_t list, id, q;
    buf_init(&list), buf_init(&id), buf_init(&q);
    buf_printf(&list, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
    int rc = 0;
    for (uint64_t off = 0, i = 1; rc == 0 && off < size; off += part, i++) {
        uint64_t n = size - off < part ? size - off : part;
        id.len = q.len = 0;
        azblob_block_id((int)i, &id);
        buf_printf(&q, "blockid=");
        objstore_encode(&q, (const char *)id.data, id.len, 0);
        buf_printf(&q, "&comp=block");
        buf_putc(&q, 0);
        req_t r = {.method = "PUT", .key = key, .query = (const char *)q.data, .f = f, .off = off, .n = (size_t)n};
        rc = q.oom || id.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : perform(s, &r, err);
        buf_printf(&list, "<Latest>%.*s</Latest>", (int)id.len, (const char *)id.data);
    }
    buf_printf(&list, "</BlockList>");
    req_t r = {.method = "PUT", .key = key, .query = "comp=blocklist", .data = list.data, .n = list.len};
    if (rc == 0) rc = list.oom ? hr_fail(err, HR_ENOMEM, "out of memory") : perform(s, &r, err);
    buf_free(&list), buf_free(&id), buf_free(&q);
    return rc;
}

int objstore_put_file(objstore_t *s, const char *key, const char *path, int flags, hr_err_t *err) {
    if (check_key(key, err)) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return hr_fail(err, errno == ENOENT ? HR_ENOTFOUND : HR_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    req_t r = {.method = "PUT", .key = key, .f = f, .if_absent = flags & OBJSTORE_IF_ABSENT, .blob = s->azure};
    int rc = -1;
    if (fstat(fileno(f), &st)) hr_fail(err, HR_EIO, "%s: %s", path, strerror(errno));
    else if ((uint64_t)st.st_size > s->multipart_threshold)
        rc = (s->azure ? put_blocks : put_multipart)(s, key, f, (uint64_t)st.st_size, err);
    else if ((r.n = (size_t)st.st_size), sha256_hex(NULL, r.n, f, r.sha, err)) (void)0;
    else if (perform_put(s, &r, err) == 0) rc = r.status == 412 ? 1 : 0;
    fclose(f);
    return rc;
}

int objstore_get_ranges(objstore_t *s, const char *key, const objstore_range_t *rg, size_t n, buf_t *out,
                        hr_err_t *err) {
    if (check_key(key, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (rg[i].len == 0 || rg[i].off + rg[i].len < rg[i].off)
            return hr_fail(err, HR_EINVAL, "%s: range %zu is empty or wraps", key, i);
        req_t r = {.method = "GET", .key = key, .out = out, .max = out->len + rg[i].len};
        snprintf(r.range, sizeof r.range, "bytes=%llu-%llu", (unsigned long long)rg[i].off,
                 (unsigned long long)(rg[i].off + rg[i].len - 1));
        size_t before = out->len;
        if (perform(s, &r, err)) return -1;
        /* A 200 sends the whole object (a server that ignores Range) and a 206 ends early at
         * the object's end: either way not the bytes asked for. */
        if (r.status != 206 || out->len - before != rg[i].len) {
            size_t got = out->len - before;
            out->len = before;
            return hr_fail(err, HR_EINVAL, "%s: range %s is past the end of the object (got %zu of %llu bytes)", key,
                           r.range + 6, got, (unsigned long long)rg[i].len);
        }
    }
    return 0;
}

int objstore_get(objstore_t *s, const char *key, size_t max, buf_t *out, hr_err_t *err) {
    if (check_key(key, err)) return -1;
    req_t r = {.method = "GET", .key = key, .out = out, .max = max > SIZE_MAX - out->len ? SIZE_MAX : out->len + max};
    return perform(s, &r, err);
}

int objstore_head(objstore_t *s, const char *key, uint64_t *size, hr_err_t *err) {
    if (check_key(key, err)) return -1;
    req_t r = {.method = "HEAD", .key = key};
    if (perform(s, &r, err)) return -1;
    *size = r.length;
    return 0;
}

int objstore_delete(objstore_t *s, const char *key, hr_err_t *err) {
    if (check_key(key, err)) return -1;
    req_t r = {.method = "DELETE", .key = key};
    hr_err_t e = {0};
    if (perform(s, &r, &e) == 0) return 0;
    if (s->azure && e.code == HR_ENOTFOUND) return 0; /* as S3 answers it: gone is gone */
    *err = e;
    return -1;
}

/* One page of a listing: calls fn per <Contents>, and leaves the next page's token in
 * *next (or empties it on the last page). 1 when fn stopped, 0 to go on, -1. */
static int list_page(const buf_t *ans, size_t skip, objstore_list_fn fn, void *ctx, buf_t *next, hr_err_t *err) {
    const char *p = (const char *)ans->data, *end = p + ans->len, *v;
    size_t vn;
    buf_t key;
    buf_init(&key);
    int rc = 0;
    next->len = 0;
    const char *c;
    while (rc == 0 && (c = memmem(p, (size_t)(end - p), "<Contents>", 10))) {
        const char *ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
        const char *sv;
        size_t sn;
        if (!ce || !xml_find(c, ce, "Key", &v, &vn) || !xml_find(c, ce, "Size", &sv, &sn)) {
            rc = hr_fail(err, HR_EINTERNAL, "object store listing: a <Contents> without <Key> or <Size>");
            break;
        }
        key.len = 0;
        char num[24];
        snprintf(num, sizeof num, "%.*s", (int)(sn < 23 ? sn : 23), sv);
        char *numend;
        unsigned long long size = strtoull(num, &numend, 10);
        if (objstore_xml_unescape(&key, v, vn) || *numend || !sn) {
            rc = hr_fail(err, key.oom ? HR_ENOMEM : HR_EINTERNAL, "object store listing: a bad <Key> or <Size>");
            break;
        }
        buf_putc(&key, 0);
        if (key.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else if (key.len - 1 < skip) rc = hr_fail(err, HR_EINTERNAL, "object store listing: a key outside the prefix");
        else if (fn(ctx, (const char *)key.data + skip, size)) rc = 1;
        p = ce + 11;
    }
    buf_free(&key);
    p = (const char *)ans->data;
    if (rc == 0 && xml_find(p, end, "IsTruncated", &v, &vn) && vn == 4 && !memcmp(v, "true", 4)) {
        if (!xml_find(p, end, "NextContinuationToken", &v, &vn) || !vn || objstore_xml_unescape(next, v, vn))
            rc = hr_fail(err, HR_EINTERNAL, "object store listing: truncated without a continuation token");
    }
    return rc;
}

/* A listing page's query: ListObjectsV2's canonical one (names in byte order, values
 * encoded), or List Blobs'; token: where the last page ended ("" for the first). */
static void list_query(const objstore_t *s, const buf_t *token, const buf_t *full, buf_t *q) {
    const char *first = s->azure ? "comp=list" : "", *tok = s->azure ? "&marker=" : "continuation-token=";
    buf_printf(q, "%s", first);
    if (token->len) {
        buf_printf(q, "%s", tok);
        objstore_encode(q, (const char *)token->data, token->len, 0);
        if (!s->azure) buf_putc(q, '&');
    }
    if (s->azure) buf_printf(q, "&maxresults=%d&prefix=", s->list_page);
    else buf_printf(q, "list-type=2&max-keys=%d&prefix=", s->list_page);
    objstore_encode(q, (const char *)full->data, full->len, 0);
    if (s->azure) buf_printf(q, "&restype=container");
    buf_putc(q, 0);
}

int objstore_list(objstore_t *s, const char *prefix, objstore_list_fn fn, void *ctx, hr_err_t *err) {
    buf_t full, q, ans, token;
    buf_init(&full), buf_init(&q), buf_init(&ans), buf_init(&token);
    if (*s->prefix) buf_printf(&full, "%s/", s->prefix);
    size_t skip = full.len;
    buf_append(&full, prefix, strlen(prefix));
    int rc = 0;
    do {
        q.len = 0, ans.len = 0;
        list_query(s, &token, &full, &q);
        if (q.oom || full.oom) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        req_t r = {.method = "GET", .query = (const char *)q.data, .out = &ans, .max = LIST_ANSWER_MAX};
        rc = perform(s, &r, err);
        if (rc == 0 && s->azure)
            rc = objstore_azure_list_page(ans.data ? (const char *)ans.data : "", ans.len, skip, fn, ctx, &token, err);
        else if (rc == 0) rc = list_page(&ans, skip, fn, ctx, &token, err);
    } while (rc == 0 && token.len);
    buf_free(&full), buf_free(&q), buf_free(&ans), buf_free(&token);
    return rc < 0 ? -1 : 0;
}
