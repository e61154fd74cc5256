/* gzip.c - see gzip.h. */
#include "wire/gzip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int gz_inflate(const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outlen, hr_err_t *err) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return hr_fail(err, HR_ENOMEM, "zlib init failed");
    size_t cap = n * 4 + 1024, len = 0;
    if (cap > max + 1) cap = max + 1;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        inflateEnd(&z);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    int rc;
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                rc = hr_fail(err, HR_ETOOBIG, "decompressed body exceeds the limit of %zu bytes", max);
                goto done;
            }
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                rc = hr_fail(err, HR_ENOMEM, "out of memory");
                goto done;
            }
            buf = nb;
            cap = ncap;
        }
        z.next_out = buf + len;
        z.avail_out = (uInt)(cap - len);
        int zr = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
        if (zr == Z_STREAM_END) {
            if (z.avail_in == 0) break;
            /* Another gzip member follows (cat a.gz b.gz is valid gzip). */
            if (inflateReset(&z) != Z_OK) {
                rc = hr_fail(err, HR_EUNPROC, "corrupt gzip stream");
                goto done;
            }
            continue;
        }
        if (zr == Z_BUF_ERROR && z.avail_in == 0) {
            rc = hr_fail(err, HR_EUNPROC, "truncated gzip stream (unexpected end of data)");
            goto done;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = hr_fail(err, HR_EUNPROC, "corrupt gzip stream: %s", z.msg ? z.msg : "inflate failed");
            goto done;
        }
    }
    if (len > max) {
        rc = hr_fail(err, HR_ETOOBIG, "decompressed body exceeds the limit of %zu bytes", max);
        goto done;
    }
    inflateEnd(&z);
    *out = buf;
    *outlen = len;
    return 0;
done:
    inflateEnd(&z);
    free(buf);
    return rc;
}

int gz_deflate(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen, hr_err_t *err) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return hr_fail(err, HR_ENOMEM, "zlib init failed");
    size_t cap = deflateBound(&z, (uLong)n);
    uint8_t *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&z);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END) {
        free(buf);
        return hr_fail(err, HR_EINTERNAL, "gzip compression failed");
    }
    *out = buf;
    *outlen = len;
    return 0;
}
