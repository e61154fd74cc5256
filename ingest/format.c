/* format.c - see format.h. The table is the only list of ingest formats. */
#include "ingest/format.h"

#include <assert.h>
#include <string.h>
#include <zlib.h>

#include "ingest/folded.h"
#include "ingest/jfr.h"
#include "ingest/otlp.h"
#include "ingest/pprof_upload.h"
#include "ingest/push.h"
#include "wire/gzip.h"

/* code, name, `/ingest?format=` values, needs a body, sniffer, decoder (format.h).
 * On a tie, sniffing prefers the earlier row; ingest_format_names lists in table
 * order. An empty pprof would decode as an empty profile, so the row refuses it;
 * empty text is no stacks, and a push body names its own series. */
static const ingest_format_desc_t FORMATS[] = {
    {INGEST_PPROF, "pprof", "pprof", 1, pprof_sniff, pprof_ingest},
    {INGEST_JFR, "jfr", "jfr", 1, jfr_sniff, jfr_ingest},
    {INGEST_FOLDED, "folded", "folded groups collapsed", 0, folded_sniff, folded_ingest},
    {INGEST_LINES, "lines", "lines", 0, NULL, lines_ingest},
    {INGEST_PUSH_PROTO, "push.v1", NULL, 0, NULL, push_ingest_proto},
    {INGEST_PUSH_JSON, "push.v1 JSON", NULL, 0, NULL, push_ingest_json},
    {INGEST_PARCA_JSON, "Parca WriteRaw JSON", NULL, 0, NULL, parca_ingest_json},
    {INGEST_PARCA_PROTO, "Parca WriteRaw", NULL, 0, NULL, parca_ingest_proto},
    /* An empty export is a valid OTLP request (nothing to store). */
    {INGEST_OTLP_PROTO, "OTLP profiles", NULL, 0, NULL, otlp_ingest_proto},
    {INGEST_OTLP_JSON, "OTLP profiles JSON", NULL, 0, NULL, otlp_ingest_json},
    /* Pyroscope's other upload formats: named, so refused as such rather than read as folded. */
    {0, "trie", "trie tree speedscope", 0, NULL, NULL},
};
#define NFORMATS (sizeof FORMATS / sizeof *FORMATS)

const ingest_format_desc_t *ingest_format_of(ingest_format_t code) {
    for (size_t i = 0; i < NFORMATS; i++)
        if (FORMATS[i].code && FORMATS[i].code == code) return &FORMATS[i];
    return NULL;
}

/* 1 when the space-separated list holds word. */
static int listed(const char *list, const char *word) {
    size_t n = strlen(word);
    while (list && *list) {
        size_t k = strcspn(list, " ");
        if (k == n && !strncmp(list, word, n)) return 1;
        list += k;
        list += strspn(list, " ");
    }
    return 0;
}

const ingest_format_desc_t *ingest_format_named(const char *name) {
    for (size_t i = 0; i < NFORMATS; i++)
        if (listed(FORMATS[i].aliases, name)) return &FORMATS[i];
    return NULL;
}

/* A row `/ingest?format=` can name and Hearth reads. */
static int nameable(const ingest_format_desc_t *f) { return f->aliases && f->decode; }

void ingest_format_names(buf_t *out) {
    size_t n = 0, k = 0;
    for (size_t i = 0; i < NFORMATS; i++) n += nameable(&FORMATS[i]);
    for (size_t i = 0; i < NFORMATS; i++) {
        if (!nameable(&FORMATS[i])) continue;
        buf_printf(out, "%s%s", k == 0 ? "" : k + 1 == n ? " or " : ", ", FORMATS[i].name);
        k++;
    }
}

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

static int looks_textual(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n && i < 4096; i++)
        if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20) || p[i] == 0x7f) return 0;
    return 1;
}

const ingest_format_desc_t *ingest_sniff(const uint8_t *p, size_t n) {
    ingest_peek_t pk = {.p = p, .n = n, .gzipped = gz_is_gzip(p, n), .textual = looks_textual(p, n)};
    if (pk.gzipped) {
        pk.nhead = gunzip_prefix(p, n, pk.head, sizeof pk.head);
    } else {
        pk.nhead = n < sizeof pk.head ? n : sizeof pk.head;
        if (pk.nhead) memcpy(pk.head, p, pk.nhead);
    }
    const ingest_format_desc_t *best = NULL;
    ingest_sniff_t best_score = SNIFF_NO;
    for (size_t i = 0; i < NFORMATS; i++) {
        ingest_sniff_t s = FORMATS[i].sniff ? FORMATS[i].sniff(&pk) : SNIFF_NO;
        if (s > best_score) best = &FORMATS[i], best_score = s;
    }
    assert(best); /* every upload is text (folded) or not (pprof) */
    return best;
}
