/* format.h - the ingest formats: one table row per format Hearth reads.
 *
 * A row says what a format is called, its code in the WAL record (request.h), how
 * to tell it from its bytes when an upload does not name it, and its decoder.
 * Everything that picks or runs a format goes through the table (format.c):
 * `/ingest?format=` and sniffing (server/ingest_api.c, `hearth push`), the WAL
 * record's check, and ingest_to_batch. The endpoints that receive a format are
 * routes (server/routes.c); push.v1 and Parca bodies are told by their endpoint.
 *
 * Adding a format:
 *   1. ingest/NAME.c and NAME.h: the decoder, with the table's signature
 *      (ingest_decode_fn), and a sniffer if the bytes can tell the format;
 *   2. its WAL code: the next unused number in ingest_format_t (request.h), also
 *      listed in storage/format/wal.md;
 *   3. one row in FORMATS (format.c). */
#ifndef HEARTH_FORMAT_H
#define HEARTH_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "ingest/request.h"
#include "storage/batch.h"

/* What sniffers look at, computed once per upload. */
typedef struct {
    const uint8_t *p; /* the upload as received */
    size_t n;
    int gzipped;     /* p is a gzip stream */
    uint8_t head[4]; /* the first bytes of the content (inflated when gzipped) */
    size_t nhead;
    int textual; /* no control bytes but tab and line ends in p's first 4 KiB */
} ingest_peek_t;

/* How sure a sniffer is; the surest row wins, the earlier one on a tie. */
typedef enum {
    SNIFF_NO = 0,
    SNIFF_MAYBE = 1, /* the bytes can be read as this format (a fallback) */
    SNIFF_SURE = 2   /* a magic number says so */
} ingest_sniff_t;

/* Decodes r (of the row's format) into b, under lim; 0, or -1 with err. */
typedef int (*ingest_decode_fn)(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);

typedef struct {
    ingest_format_t code; /* 0 for a name Pyroscope knows that Hearth does not read */
    const char *name;     /* for people: `hearth push` passes it as format= */
    const char *aliases;  /* the `/ingest?format=` values, space-separated; NULL: not named there */
    int needs_body;       /* an empty body holds no profile: refused (HR_EUNPROC) before decoding */
    ingest_sniff_t (*sniff)(const ingest_peek_t *pk); /* NULL: never guessed from the bytes */
    ingest_decode_fn decode;                          /* NULL when not read (code 0) */
} ingest_format_desc_t;

/* The row of a WAL code; NULL for a code no format has. */
const ingest_format_desc_t *ingest_format_of(ingest_format_t code);
/* The row a `/ingest?format=` value names (its decode is NULL for a format Hearth
 * does not read yet), or NULL for a name no row has. */
const ingest_format_desc_t *ingest_format_named(const char *name);
/* The names of the formats `/ingest?format=` takes and Hearth reads, in table order,
 * as "a, b or c" (for a refusal's message). */
void ingest_format_names(buf_t *out);
/* The format of an upload that does not name one (`/ingest` without `format`,
 * `hearth push` without --format), from its bytes: JFR by its magic (gzipped or
 * not), pprof when gzipped or binary, folded when text (and when empty). Pyroscope
 * reads an unnamed format as folded, so a gzipped pprof sent bare would fail as
 * "not valid UTF-8": the bytes decide instead. Never NULL. */
const ingest_format_desc_t *ingest_sniff(const uint8_t *p, size_t n);

#endif
