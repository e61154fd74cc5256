/* pbjson.h - proto3 JSON for any protobuf-c message, driven by its descriptor.
 *
 * Connect serves every RPC in both application/proto and application/json; with
 * this, a handler reads and writes only protobuf-c structs and the JSON side
 * follows the proto3 mapping: lowerCamelCase names (the original field names are
 * accepted too), 64-bit integers as strings (numbers accepted), enums by name (or
 * number), bytes as base64. Encoding writes every field, defaults included, except
 * unset message and optional fields. */
#ifndef HEARTH_PBJSON_H
#define HEARTH_PBJSON_H

#include <protobuf-c/protobuf-c.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/err.h"

/* The bytes protobuf-c gives one value of a field of type t: a repeated field's array
 * stride (a pointer for strings and messages). */
size_t pbjson_elem_size(ProtobufCType t);

int pbjson_encode(const ProtobufCMessage *msg, buf_t *out);

/* Decodes JSON text into a new message of type desc, allocated (with everything
 * it points to) in arena. Unknown fields are ignored, or with PBJSON_STRICT an
 * HR_EINVAL naming the field (a query that ignored a field it does not know would
 * answer another question); a value of the wrong JSON type is an HR_EINVAL naming the
 * field. NULL on error. */
enum { PBJSON_STRICT = 1 };
ProtobufCMessage *pbjson_decode(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, arena_t *arena,
                                int flags, hr_err_t *err);

/* The first field, in m or any message inside it, that the descriptors do not list
 * (protobuf-c keeps those in unknown_fields when it unpacks): 1 with "field N of
 * MESSAGE" in out, else 0. */
int pb_unknown_field(const ProtobufCMessage *m, char *out, size_t n);

#endif
