/* connect.h - the Connect protocol's unary calls over HTTP/1.1.
 *
 * A unary Connect call is a POST whose body is the bare request message, binary
 * (application/proto) or proto3 JSON (application/json), optionally gzipped
 * (Content-Encoding: gzip); the reply is the bare response message in the same
 * codec, or an error as JSON {"code", "message"} with the HTTP status Connect maps
 * that code to (connectrpc.com/docs/protocol). Hearth's error bodies also carry its
 * usual "error" key. */
#ifndef HEARTH_CONNECT_H
#define HEARTH_CONNECT_H

#include <protobuf-c/protobuf-c.h>

#include "common/arena.h"
#include "server/http.h"

typedef enum { CONNECT_PROTO, CONNECT_JSON } connect_codec_t;

/* The codec Content-Type names; -1 (and a 415 in resp) for anything else. */
int connect_codec(const http_req_t *req, connect_codec_t *codec, http_resp_t *resp);

/* The checks every unary call of a service makes, in order: the method named after
 * prefix in req's URL must be a row of table (n rows of stride bytes, each starting
 * with its `const char *` name; else 404 naming service), the body within its limit
 * (else 413) and of a Connect codec (into *codec; else 415). The row's index, or -1
 * with the refusal in resp. */
long connect_method(const http_req_t *req, const char *prefix, const char *service, const void *table, size_t n,
                    size_t stride, connect_codec_t *codec, http_resp_t *resp);

/* An error reply; the Connect code follows from the HTTP status. */
void connect_error(http_resp_t *resp, int status, const char *msg);

/* Decodes the body into a message of type desc, allocated in arena. NULL (resp
 * set: 400 for a malformed body, 413 past max_bytes after gunzip) on failure. With
 * strict, a field the message type does not list (a newer client's) is a 400 naming
 * it, in either codec: queries take it, since ignoring a field that narrows the
 * selection (Pyroscope 2.2's span_selector) answers a different question. */
ProtobufCMessage *connect_read(const http_req_t *req, connect_codec_t codec, const ProtobufCMessageDescriptor *desc,
                               size_t max_bytes, int strict, arena_t *arena, http_resp_t *resp);

/* A 200 reply carrying msg in codec. */
void connect_reply(http_resp_t *resp, connect_codec_t codec, const ProtobufCMessage *msg);

#endif
