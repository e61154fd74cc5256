/* sniff.c - see sniff.h. */
#include "ingest/sniff.h"

#include <string.h>
#include <zlib.h>

#include "wire/gzip.h"

static const uint8_t JFR_MAGIC[4] = {'F', 'L', 'R', 0};

/* The first bytes of a gzip stream, inflated (at most n); returns how many. */
static size_t gunzip_prefix(const uint8_t *p, size_t len, uint8_t *out, size_t n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)(len > 65536 ? 65536 : len);
    z.next_out = out;
    z.avail_out = (uInt)n;
    inflate(&z, Z_SYNC_FLUSH);
    size_t got = n - z.avail_out;
    inflateEnd(&z);
    return got;
}

/* Text: no control bytes but tab and line ends in the first 4 KiB. */
static int looks_textual(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n && i < 4096; i++)
        if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20) || p[i] == 0x7f) return 0;
    return 1;
}

ingest_format_t ingest_sniff(const uint8_t *p, size_t n) {
    uint8_t head[4];
    if (gz_is_gzip(p, n)) {
        size_t k = gunzip_prefix(p, n, head, sizeof head);
        return k == 4 && !memcmp(head, JFR_MAGIC, 4) ? INGEST_JFR : INGEST_PPROF;
    }
    if (n >= 4 && !memcmp(p, JFR_MAGIC, 4)) return INGEST_JFR;
    return looks_textual(p, n) ? INGEST_FOLDED : INGEST_PPROF;
}
