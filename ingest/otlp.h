/* otlp.h - OpenTelemetry profiles (OTLP, opentelemetry-proto v1.10 v1development)
 * into a batch.
 *
 * An ExportProfilesServiceRequest (wire/otlp_profiles.proto) arrives as protobuf or
 * OTLP JSON, gzipped or not; JSON is read into the same protobuf-c structs
 * (common/pbjson.h), so one conversion serves both. Every table lives in the
 * request's one ProfilesDictionary, and every reference into it is an index from
 * the wire: each is checked against the table before it is followed.
 *
 * Each Profile becomes one batch profile per label set, of one profile type, as
 * Pyroscope maps them (its pkg/ingester/otlp):
 *   - labels: the resource's, then the scope's, then the profile's attributes with a
 *     string value (the first of a name wins), names with anything but letters,
 *     digits and `_` turned into `_` (service.name -> service_name); service_name
 *     defaults to "unknown_service" (":" and process.executable.name when there is
 *     one). Sample attributes split a profile into series exactly as pprof sample
 *     labels do (pprof.h): trace links and keys with more than
 *     PPROF_MAX_SERIES_LABEL_VALUES values stay off the series labels; a sample's
 *     service.name moves it to that service;
 *   - type: NAME:TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT with NAME by pprof's rules
 *     (ptype_name); the eBPF profiler's samples:count with a cpu:nanoseconds period
 *     becomes process_cpu:cpu:nanoseconds:cpu:nanoseconds, values times the period,
 *     unless the same scope also carries a cpu:nanoseconds profile (a converted
 *     pprof, whose samples type is kept as pprof keeps it);
 *   - a sample's value is the sum of its values (one per event in v1.10), or the
 *     number of its timestamps when it has no values; its stack is read leaf first;
 *     its link's span id makes it a span sample, as a pprof span_id label does;
 *   - time: time_unix_nano (now when unset or in 1970), duration_nano (10 s when
 *     unset, as Pyroscope);
 *   - a mapping keeps its build id: the attribute process.executable.build_id.gnu,
 *     else .go, else .htlhash, where pprof's Mapping.build_id goes; a kernel frame
 *     (profile.frame.type "kernel") gets a copy of its mapping named "[kernel] FILE".
 *
 * A profile with a structural fault (an index out of range, a sample without
 * values, values and timestamps that disagree) is left out whole and counted in
 * the partial result; a request whose every profile is faulty, or whose dictionary
 * or attributes cannot be read, is refused (HR_EINVAL). Label limits refuse the
 * whole request, as for every format. */
#ifndef HEARTH_OTLP_H
#define HEARTH_OTLP_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "ingest/request.h"
#include "storage/batch.h"

typedef enum { OTLP_PROTO = 0, OTLP_JSON = 1 } otlp_encoding_t;

/* Decode memory is charged to lim's budget before anything is unpacked: for
 * protobuf, what unpacking allocates, counted from the wire (otlp_unpack_cost); for
 * JSON, this many bytes per byte of text, about what a JSON tree and its protobuf-c
 * copy take for small values. */
#define OTLP_JSON_DECODE_FACTOR 48

/* An upper bound of what protobuf-c allocates unpacking the n bytes at p as a message
 * of type d (each message, string, array and unknown field, with allocator overhead),
 * walked from the wire without allocating. 0, or -1 with err for a malformed wire. */
int otlp_unpack_cost(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, size_t *cost, hr_err_t *err);

/* Decodes one request (body: n bytes, gzipped or not) into b under lim, received at
 * now_ns. partial (may be NULL) gets what was left out. 0, or -1 with err. */
int otlp_decode(const uint8_t *body, size_t n, otlp_encoding_t enc, const ingest_limits_t *lim, int64_t now_ns,
                batch_t *b, ingest_partial_t *partial, hr_err_t *err);

/* The ingest formats (format.h) of OTLP profiles in protobuf and in JSON: the body
 * names its own series; r->partial receives the partial result. */
int otlp_ingest_proto(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);
int otlp_ingest_json(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err);

#endif
