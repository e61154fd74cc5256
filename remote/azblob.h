/* azblob.h - the rules of Azure Blob Storage's REST API that the object store client
 * (objstore.c) follows when its URL is azblob://: Shared Key signing, dates, block
 * ids (the List Blobs answer is read with the S3 listing's XML helpers, objstore.c). Pure functions over strings, so the unit tests check them against
 * the documented examples without a server.
 *
 * Shared Key (learn.microsoft.com, "Authorize with Shared Key"): the string to sign is
 * the verb, eleven standard headers' values (Content-Length empty when 0), the request's
 * x-ms-* headers (lowercase names, sorted, "name:value\n" each), then the canonicalized
 * resource: "/ACCOUNT" + the URI path as sent (with a path-style endpoint such as
 * Azurite's, the account appears there once more) + "\nname:value" per query parameter,
 * names lowercase and sorted, values decoded. The signature is the base64 of its
 * HMAC-SHA256 under the base64-decoded account key. */
#ifndef HEARTH_AZBLOB_H
#define HEARTH_AZBLOB_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

typedef struct {
    const char *name, *value;
} azblob_header_t;

/* The x-ms-version Hearth speaks (supported by Azure and by Azurite 3). */
#define AZBLOB_VERSION "2021-08-06"

/* Appends "SharedKey ACCOUNT:SIGNATURE" for a request to out: method, the encoded URI
 * path, the query as sent (without '?', or NULL), the body's length, and every header
 * the request carries (names in any case). 0, or -1 with err (a query escape that does
 * not decode, no memory). */
int azblob_sign(const char *account, const uint8_t *key, size_t keylen, const char *method, const char *path,
                const char *query, uint64_t content_length, const azblob_header_t *h, size_t nh, buf_t *out,
                hr_err_t *err);

/* The time as x-ms-date wants it (RFC 1123, GMT), into out[cap]. */
void azblob_date(int64_t unix_s, char *out, size_t cap);

/* The block id of part (1-based) of a block blob upload, base64 of a fixed-width
 * decimal (every id of a blob has the same length, as Azure requires). */
void azblob_block_id(int part, buf_t *out);

#endif
