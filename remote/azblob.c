/* azblob.c - see azblob.h. */
#include "remote/azblob.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/base64.h"

/* The standard headers of the string to sign, in its order. */
static const char *const STANDARD[] = {
    "Content-Encoding",  "Content-Language", "Content-Length", "Content-MD5",         "Content-Type", "Date",
    "If-Modified-Since", "If-Match",         "If-None-Match",  "If-Unmodified-Since", "Range"};

static const char *header(const azblob_header_t *h, size_t nh, const char *name) {
    for (size_t i = 0; i < nh; i++)
        if (!strcasecmp(h[i].name, name)) return h[i].value;
    return "";
}

static int cmp_header(const void *a, const void *b) {
    return strcasecmp(((const azblob_header_t *)a)->name, ((const azblob_header_t *)b)->name);
}

/* The request's x-ms-* headers, lowercase and sorted, "name:value\n" each. */
static int canonical_headers(const azblob_header_t *h, size_t nh, buf_t *out) {
    azblob_header_t *ms = calloc(nh ? nh : 1, sizeof *ms);
    if (!ms) return -1;
    size_t n = 0;
    for (size_t i = 0; i < nh; i++)
        if (!strncasecmp(h[i].name, "x-ms-", 5)) ms[n++] = h[i];
    qsort(ms, n, sizeof *ms, cmp_header);
    for (size_t i = 0; i < n; i++) {
        for (const char *c = ms[i].name; *c; c++) buf_putc(out, (uint8_t)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c));
        buf_printf(out, ":%s\n", ms[i].value);
    }
    free(ms);
    return 0;
}

static int hexval(int c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decodes [s, s+n) onto out ('+' is a space, as the service reads it). */
static int decode(const char *s, size_t n, buf_t *out) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            buf_putc(out, ' ');
        } else if (s[i] != '%') {
            buf_putc(out, (uint8_t)s[i]);
        } else {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
            if (lo < 0) return -1;
            buf_putc(out, (uint8_t)(hi * 16 + lo));
            i += 2;
        }
    }
    return 0;
}

typedef struct {
    char *name;
    const char *value;
    size_t vn;
} param_t;

static int cmp_param(const void *a, const void *b) {
    return strcmp(((const param_t *)a)->name, ((const param_t *)b)->name);
}

/* "\nname:value" per query parameter, names lowercase and sorted, values decoded. */
static int canonical_query(const char *q, buf_t *out) {
    size_t cap = 1;
    for (const char *c = q; *c; c++) cap += *c == '&';
    param_t *p = calloc(cap, sizeof *p);
    if (!p) return -1;
    size_t n = 0;
    int rc = 0;
    for (const char *c = q; *c && rc == 0;) {
        size_t len = strcspn(c, "&"), nl = strcspn(c, "=");
        if (nl > len) nl = len;
        if (!(p[n].name = strndup(c, nl))) rc = -1;
        for (char *x = p[n].name; x && *x; x++) *x = (char)(*x >= 'A' && *x <= 'Z' ? *x + 32 : *x);
        p[n].value = c + nl + (nl < len), p[n].vn = len - nl - (nl < len);
        n++;
        c += len + (c[len] == '&');
    }
    if (rc == 0) qsort(p, n, sizeof *p, cmp_param);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        buf_printf(out, "\n%s:", p[i].name);
        rc = decode(p[i].value, p[i].vn, out);
    }
    for (size_t i = 0; i < n; i++) free(p[i].name);
    free(p);
    return rc;
}

int azblob_sign(const char *account, const uint8_t *key, size_t keylen, const char *method, const char *path,
                const char *query, uint64_t content_length, const azblob_header_t *h, size_t nh, buf_t *out,
                hr_err_t *err) {
    buf_t s;
    buf_init(&s);
    buf_printf(&s, "%s\n", method);
    for (size_t i = 0; i < sizeof STANDARD / sizeof *STANDARD; i++) {
        if (!strcmp(STANDARD[i], "Content-Length")) {
            if (content_length) buf_printf(&s, "%llu", (unsigned long long)content_length);
        } else {
            buf_printf(&s, "%s", header(h, nh, STANDARD[i]));
        }
        buf_putc(&s, '\n');
    }
    int rc = canonical_headers(h, nh, &s);
    buf_printf(&s, "/%s%s", account, path);
    if (rc == 0 && query && *query && canonical_query(query, &s))
        rc = hr_fail(err, HR_EINVAL, "azure: a query parameter does not decode");
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    if (rc == 0 && (s.oom || !HMAC(EVP_sha256(), key, (int)keylen, s.data, s.len, mac, &maclen)))
        rc = hr_fail(err, HR_ENOMEM, "azure: cannot sign the request");
    if (rc == 0) {
        buf_printf(out, "SharedKey %s:", account);
        base64_encode(mac, maclen, out);
        if (out->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    } else if (!err->code) {
        hr_fail(err, HR_ENOMEM, "out of memory");
    }
    buf_free(&s);
    return rc;
}

void azblob_date(int64_t unix_s, char *out, size_t cap) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    static const char *const DAYS[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const MONTHS[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", DAYS[tm.tm_wday], tm.tm_mday, MONTHS[tm.tm_mon],
             tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void azblob_block_id(int part, buf_t *out) {
    char id[16];
    snprintf(id, sizeof id, "part-%06d", part);
    base64_encode((const uint8_t *)id, strlen(id), out);
}
