/* push.h - Pyroscope's push API payload: push.v1.PushRequest.
 *
 * A request holds series, each a label set plus raw pprof samples. It arrives as
 * binary protobuf (application/proto, decoded by protobuf-c from wire/push.proto)
 * or as protojson (application/json: {"series":[{"labels":[{"name","value"}],
 * "samples":[{"rawProfile":"<base64>","ID":"..."}]}]}). Both decode through the
 * same path into a batch. The `__name__` label names the profile (process_cpu,
 * memory, ...); other `__`-prefixed labels are Pyroscope-internal and not stored; a
 * series without service_name gets "unknown_service", as OpenTelemetry does.
 *
 * Parca's WriteRaw (parca.profilestore.v1alpha1.WriteRawRequest, binary over gRPC, or
 * JSON through its HTTP gateway, POST /api/profiles/writeraw) is the same shape with
 * labels nested one level deeper ({"labels":{"labels":[...]}}) and a required
 * __name__. Its `normalized` flag says the addresses are already the files' own:
 * their mappings are then stored with no range (start = limit = offset = 0), which is
 * pprof's sign for addresses the symbolizer takes as they are. Its deprecated
 * `tenant` field is refused when set (X-Scope-OrgID names the tenant). */
#ifndef HEARTH_PUSH_H
#define HEARTH_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/format.h"
#include "ingest/request.h"
#include "storage/batch.h"

typedef enum { PUSH_PROTO = 0, PUSH_JSON = 1, PUSH_PARCA_JSON = 2, PUSH_PARCA_PROTO = 3 } push_encoding_t;

int push_decode(const uint8_t *body, size_t n, push_encoding_t enc, const ingest_limits_t *lim, int64_t now_ns,
                batch_t *b, hr_err_t *err);

/* The ingest formats (format.h) of push.v1 in binary protobuf and in JSON, and of
 * Parca's WriteRaw in protobuf and JSON: the body holds its own series, so the request's name and
 * labels are not read. */
int push_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
int push_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
int parca_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
int parca_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);

#endif
