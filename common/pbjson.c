/* pbjson.c - see pbjson.h. */
#include "common/pbjson.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/base64.h"
#include "common/jsonw.h"

/* ---- field access ---- */

static void *member(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) { return (char *)m + f->offset; }

size_t pbjson_elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM: return 4;
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 8;
    }
}

/* proto3 JSON name: lowerCamelCase of the field name ("profile_typeID" -> "profileTypeID"). */
static void json_name(const char *name, char *out, size_t cap) {
    size_t k = 0;
    int up = 0;
    for (const char *p = name; *p && k + 1 < cap; p++) {
        if (*p == '_') {
            up = 1;
            continue;
        }
        out[k++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        up = 0;
    }
    out[k] = 0;
}

/* ---- encoding ---- */

static int encode_msg(const ProtobufCMessage *m, buf_t *out);

static void encode_value(const ProtobufCFieldDescriptor *f, const void *p, buf_t *out) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: buf_printf(out, "%" PRId32, *(const int32_t *)p); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: buf_printf(out, "%" PRIu32, *(const uint32_t *)p); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: buf_printf(out, "\"%" PRId64 "\"", *(const int64_t *)p); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: buf_printf(out, "\"%" PRIu64 "\"", *(const uint64_t *)p); break;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d = f->type == PROTOBUF_C_TYPE_FLOAT ? *(const float *)p : *(const double *)p;
        if (isnan(d)) buf_printf(out, "\"NaN\"");
        else if (isinf(d)) buf_printf(out, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        else buf_printf(out, "%.17g", d);
        break;
    }
    case PROTOBUF_C_TYPE_BOOL: buf_printf(out, *(const protobuf_c_boolean *)p ? "true" : "false"); break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        if (v) jsonw_str(out, v->name);
        else buf_printf(out, "%d", *(const int *)p);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: jsonw_str(out, *(char *const *)p ? *(char *const *)p : ""); break;
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        buf_putc(out, '"');
        base64_encode(b->data, b->len, out);
        buf_putc(out, '"');
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: encode_msg(*(ProtobufCMessage *const *)p, out); break;
    }
}

static int is_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)((const char *)m + f->quantifier_offset) == f->id;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) return *(ProtobufCMessage *const *)member(m, f) != NULL;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset && f->type != PROTOBUF_C_TYPE_STRING)
        return *(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset);
    return 1;
}

static int encode_msg(const ProtobufCMessage *m, buf_t *out) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    int first = 1;
    char name[128];
    buf_putc(out, '{');
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label != PROTOBUF_C_LABEL_REPEATED && !is_set(m, f)) continue;
        json_name(f->name, name, sizeof name);
        buf_printf(out, "%s\"%s\":", first ? "" : ",", name);
        first = 0;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            encode_value(f, member(m, f), out);
            continue;
        }
        size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
        const char *arr = *(char *const *)member(m, f);
        buf_putc(out, '[');
        for (size_t k = 0; k < n; k++) {
            if (k) buf_putc(out, ',');
            encode_value(f, arr + k * pbjson_elem_size(f->type), out);
        }
        buf_putc(out, ']');
    }
    buf_putc(out, '}');
    return out->oom ? -1 : 0;
}

int pbjson_encode(const ProtobufCMessage *msg, buf_t *out) { return encode_msg(msg, out); }

/* ---- decoding ---- */

typedef struct {
    arena_t *arena;
    hr_err_t *err;
    int strict; /* PBJSON_STRICT: an unknown key is an error */
} dctx_t;

static ProtobufCMessage *decode_msg(dctx_t *c, const ProtobufCMessageDescriptor *d, json_t *obj);

/* An integer from a JSON number or a decimal string; -1 if it is neither, has a
 * fraction or does not fit in 64 bits. */
static int get_int(json_t *v, int64_t *out) {
    if (json_is_integer(v)) return *out = json_integer_value(v), 0;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || !(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return -1;
        return *out = (int64_t)d, 0;
    }
    if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        errno = 0;
        long long n = strtoll(s, &end, 10);
        if (*s && !*end && errno != ERANGE) return *out = n, 0;
    }
    return -1;
}

/* An unsigned 64-bit integer: as get_int, but a decimal string may pass INT64_MAX
 * (addresses of kernel mappings do). */
static int get_uint(json_t *v, uint64_t *out) {
    if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        errno = 0;
        unsigned long long n = strtoull(s, &end, 10);
        if (*s && *s != '-' && !*end && errno != ERANGE) return *out = n, 0;
        return -1;
    }
    int64_t n;
    if (get_int(v, &n) || n < 0) return -1;
    return *out = (uint64_t)n, 0;
}

static int decode_value(dctx_t *c, const ProtobufCFieldDescriptor *f, json_t *v, void *p) {
    int64_t n;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (get_int(v, &n) || n < INT32_MIN || n > UINT32_MAX) return -1;
        *(int32_t *)p = (int32_t)n;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (get_int(v, &n)) return -1;
        *(int64_t *)p = n;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return get_uint(v, (uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d;
        if (json_is_number(v)) d = json_number_value(v);
        else if (json_is_string(v) && !strcmp(json_string_value(v), "NaN")) d = NAN;
        else if (json_is_string(v) && !strcmp(json_string_value(v), "Infinity")) d = INFINITY;
        else if (json_is_string(v) && !strcmp(json_string_value(v), "-Infinity")) d = -INFINITY;
        else if (json_is_string(v)) {
            char *end;
            d = strtod(json_string_value(v), &end);
            if (*end || end == json_string_value(v)) return -1;
        } else return -1;
        if (f->type == PROTOBUF_C_TYPE_FLOAT) *(float *)p = (float)d;
        else *(double *)p = d;
        return 0;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) return -1;
        *(protobuf_c_boolean *)p = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        if (json_is_string(v)) {
            const ProtobufCEnumValue *e =
                protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
            if (!e) return -1;
            *(int *)p = e->value;
            return 0;
        }
        if (get_int(v, &n) || n < INT32_MIN || n > INT32_MAX) return -1;
        *(int *)p = (int)n;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v)) return -1;
        size_t len = json_string_length(v);
        char *s = arena_alloc(c->arena, len + 1);
        if (!s) return -1;
        memcpy(s, json_string_value(v), len);
        *(char **)p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        uint8_t *raw;
        size_t len;
        if (!json_is_string(v) || base64_decode(json_string_value(v), json_string_length(v), &raw, &len)) return -1;
        uint8_t *d = arena_alloc(c->arena, len);
        if (d) memcpy(d, raw, len);
        free(raw);
        if (!d) return -1;
        *(ProtobufCBinaryData *)p = (ProtobufCBinaryData){len, d};
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!json_is_object(v)) return -1;
        return (*(ProtobufCMessage **)p = decode_msg(c, f->descriptor, v)) ? 0 : -1;
    }
    return -1;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *key) {
    char name[128];
    for (unsigned i = 0; i < d->n_fields; i++) {
        json_name(d->fields[i].name, name, sizeof name);
        if (!strcmp(key, name) || !strcmp(key, d->fields[i].name)) return &d->fields[i];
    }
    return NULL;
}

static int decode_field(dctx_t *c, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, json_t *v) {
    if (json_is_null(v)) return 0;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        if (decode_value(c, f, v, member(m, f))) return -1;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
        else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset && f->type != PROTOBUF_C_TYPE_STRING &&
                 f->type != PROTOBUF_C_TYPE_MESSAGE)
            *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
        return 0;
    }
    if (!json_is_array(v)) return -1;
    size_t n = json_array_size(v), es = pbjson_elem_size(f->type);
    char *arr = arena_alloc(c->arena, n * es);
    if (!arr) return -1;
    for (size_t k = 0; k < n; k++)
        if (decode_value(c, f, json_array_get(v, k), arr + k * es)) return -1;
    *(char **)member(m, f) = arr;
    *(size_t *)((char *)m + f->quantifier_offset) = n;
    return 0;
}

static ProtobufCMessage *decode_msg(dctx_t *c, const ProtobufCMessageDescriptor *d, json_t *obj) {
    ProtobufCMessage *m = arena_alloc(c->arena, d->sizeof_message);
    if (!m) return NULL;
    protobuf_c_message_init(d, m);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        const ProtobufCFieldDescriptor *f = find_field(d, key);
        if (!f && c->strict) {
            hr_fail(c->err, HR_EINVAL, "field `%s` of %s is not one Hearth implements (refused, not ignored)", key,
                    d->name);
            return NULL;
        }
        if (!f) continue;
        if (decode_field(c, m, f, v)) {
            if (!c->err->code) hr_fail(c->err, HR_EINVAL, "bad value for field `%s` of %s", key, d->short_name);
            return NULL;
        }
    }
    return m;
}

ProtobufCMessage *pbjson_decode(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, arena_t *arena,
                                int flags, hr_err_t *err) {
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    if (!doc || !json_is_object(doc)) {
        json_decref(doc);
        hr_fail(err, HR_EINVAL, "the body is not a JSON object (%s)", doc ? "wrong type" : je.text);
        return NULL;
    }
    dctx_t c = {arena, err, (flags & PBJSON_STRICT) != 0};
    ProtobufCMessage *m = decode_msg(&c, desc, doc);
    json_decref(doc);
    if (!m && !err->code) hr_fail(err, HR_ENOMEM, "out of memory decoding JSON");
    return m;
}

int pb_unknown_field(const ProtobufCMessage *m, char *out, size_t n) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (m->n_unknown_fields) {
        snprintf(out, n, "field %u of %s", m->unknown_fields[0].tag, d->name);
        return 1;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const char *at = (const char *)m + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t count = *(const size_t *)((const char *)m + f->quantifier_offset);
            const ProtobufCMessage *const *v = *(const ProtobufCMessage *const *const *)at;
            for (size_t k = 0; k < count; k++)
                if (v[k] && pb_unknown_field(v[k], out, n)) return 1;
        } else {
            const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)at;
            if (sub && pb_unknown_field(sub, out, n)) return 1;
        }
    }
    return 0;
}
