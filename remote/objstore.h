/* objstore.h - a client for S3-compatible object stores (AWS S3, Ceph RGW, ...).
 *
 * The building block of the cluster mode: immutable blocks as objects, read back by
 * byte range. `hearth objstore` (cli/objstore.c) drives it from the command line and
 * the integration tests.
 *
 * A store is opened from a URL,
 *     s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&region=us-east-1]
 *     azblob://CONTAINER[/PREFIX]?endpoint=https://ACCOUNT.blob.core.windows.net[&account=A]
 * and every key below is relative to PREFIX (the object is PREFIX/KEY). S3 requests are
 * path-style (ENDPOINT/BUCKET/PREFIX/KEY) and signed with AWS Signature V4 by libcurl;
 * Azure Blob Storage's (ENDPOINT/CONTAINER/PREFIX/KEY) carry a Shared Key signature
 * (azblob.h) or a SAS token, and the same calls map to its Put Blob, Get Blob, List
 * Blobs and Put Block (List).
 *
 * Errors follow common/err.h, with one rule for callers: HR_EIO is the only transient
 * code (the store answered 5xx, could not be reached, or stalled past its timeout;
 * worth retrying later, an HTTP 503 to Hearth's own clients). The client has already
 * retried those a bounded number of times before it reports one. Everything else is
 * permanent: HR_ENOTFOUND (no such key or bucket), HR_EINVAL (a bad argument, a range
 * past the end of the object, or credentials the store refused: messages name the S3
 * error code and never carry the secret), HR_ENOMEM, HR_EINTERNAL (an answer that
 * makes no sense, e.g. a wrong byte count).
 *
 * Thread safety: an objstore_t is immutable after objstore_open, so any number of
 * threads may call it at once. Each call borrows a libcurl easy handle from a small
 * pool under a mutex (an easy handle must never be used by two threads at once) and
 * returns it afterwards, so sequential calls reuse its kept-alive connection. The
 * process must have called curl_global_init (client_global_init, wire/client.h) before
 * any thread starts. */
#ifndef HEARTH_OBJSTORE_H
#define HEARTH_OBJSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

typedef struct objstore objstore_t;

typedef struct {
    const char *url;              /* s3://bucket/prefix?endpoint=...&region=... (required) */
    const char *access_key;       /* NULL: $AWS_ACCESS_KEY_ID */
    const char *secret_key;       /* NULL: $AWS_SECRET_ACCESS_KEY; copied, wiped at objstore_free */
    long connect_timeout_ms;      /* 0: 5000 */
    long stall_timeout_ms;        /* a transfer moving under 1 KiB/s this long fails; 0: 30000 */
    long timeout_ms;              /* whole attempt; 0: none (the stall timeout bounds it) */
    int retries;                  /* extra attempts after a transient failure; 0: 2, <0: none */
    int list_page;                /* max-keys of one ListObjectsV2 page; 0: 1000 */
    uint64_t multipart_threshold; /* objstore_put_file of a larger file goes up in parts; 0: 64 MiB
                                   * (at least 5 MiB, S3's smallest part) */
} objstore_config_t;

/* Parses cfg->url and keeps copies of what it needs (cfg may go away afterwards).
 * Nothing is sent yet: a wrong endpoint or key shows at the first request. NULL with
 * err (HR_EINVAL naming the bad part, HR_ENOMEM) on failure. */
objstore_t *objstore_open(const objstore_config_t *cfg, hr_err_t *err);
/* Closes the pooled connections and wipes the secret. NULL is fine. */
void objstore_free(objstore_t *s);

enum { OBJSTORE_IF_ABSENT = 1 }; /* flags of the puts: create only (If-None-Match: *) */

/* Stores n bytes (borrowed for the call) as key. Returns 0 when stored; 1 when flags
 * has OBJSTORE_IF_ABSENT and key exists already (nothing written); -1 with err.
 * A conditional put retried after a lost answer may find the object its own first
 * attempt created and return 1: a caller that must know compares the content.
 * OBJSTORE_IF_ABSENT is a safety, not a dependency: a store that answers it 501 (Swift's
 * S3 API, older MinIO) gets plain puts from then on, logged once, so callers use it
 * only for keys unique by construction. A 501 is never retried. */
int objstore_put(objstore_t *s, const char *key, const void *data, size_t n, int flags, hr_err_t *err);
/* As objstore_put, streaming the file at path: it is read once to hash it (SigV4 signs
 * the body's SHA-256) and again, chunk by chunk, to send it, so it must not change
 * meanwhile. Memory use does not grow with the file. A file over multipart_threshold
 * goes up as a multipart upload: parts of min(threshold, 16 MiB) (more, past 10,000
 * parts), each hashed and sent on its own and retried as any request is, so a stall
 * costs one part, not the file; the upload is aborted when a part or the completion
 * fails. Multipart puts are plain (flags' condition is not sent): callers put them only
 * under keys unique by construction. */
int objstore_put_file(objstore_t *s, const char *key, const char *path, int flags, hr_err_t *err);
/* Aborts the multipart uploads under prefix ("" for all) begun more than max_age_s
 * seconds ago (ListMultipartUploads' Initiated): the parts of a crashed put, which the
 * store keeps, and bills, until aborted. The number aborted in *aborted. */
int objstore_abort_stale(objstore_t *s, const char *prefix, int64_t max_age_s, size_t *aborted, hr_err_t *err);

/* A byte range of an object: len bytes from off (len > 0). */
typedef struct {
    uint64_t off, len;
} objstore_range_t;

/* Reads the n ranges of key, in order, appending exactly sum(len) bytes to out (so
 * range i starts where the lengths before it end). One request per range, over one
 * kept-alive connection. A range that reaches past the end of the object is HR_EINVAL
 * (and out keeps what earlier ranges appended). The caller sizes the ranges (from a
 * block's footer); the answer never writes more than a range asked for. */
int objstore_get_ranges(objstore_t *s, const char *key, const objstore_range_t *r, size_t n, buf_t *out, hr_err_t *err);
/* Appends the whole object to out; an object over max bytes is HR_ETOOBIG. */
int objstore_get(objstore_t *s, const char *key, size_t max, buf_t *out, hr_err_t *err);
/* The object's size in *size. HR_ENOTFOUND when it does not exist. */
int objstore_head(objstore_t *s, const char *key, uint64_t *size, hr_err_t *err);
/* Deletes key; deleting a key that does not exist succeeds (as S3 answers). */
int objstore_delete(objstore_t *s, const char *key, hr_err_t *err);

/* Called once per object of a listing, in key order: key relative to the store's
 * prefix (borrowed for the call) and its size. Nonzero stops the listing. */
typedef int (*objstore_list_fn)(void *ctx, const char *key, uint64_t size);
/* Lists the keys starting with prefix ("" for all), page by page (ListObjectsV2 with
 * its continuation token). Returns 0 when every page was read or fn stopped it. */
int objstore_list(objstore_t *s, const char *prefix, objstore_list_fn fn, void *ctx, hr_err_t *err);

/* Building blocks, public for the unit tests. */
/* Appends s percent-encoded as SigV4 wants (every byte but A-Z a-z 0-9 - _ . ~, and
 * '/' too unless keep_slash), with upper-case hex. */
void objstore_encode(buf_t *out, const char *s, size_t n, int keep_slash);
/* Calls fn(ctx, name + skip, size) for every <Blob> of an Azure List Blobs answer, in
 * order, and leaves its <NextMarker> in next (empty on the last page). 1 when fn
 * stopped, 0, or -1 with err (HR_EINTERNAL for an answer that does not read as one). */
int objstore_azure_list_page(const char *xml, size_t n, size_t skip, objstore_list_fn fn, void *ctx, buf_t *next,
                             hr_err_t *err);
/* Decodes XML's five entities and &#N; / &#xN; in [p, p+n) into out. -1 on a bad one. */
int objstore_xml_unescape(buf_t *out, const char *p, size_t n);

#endif
