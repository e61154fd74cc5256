/* fuzz_querier.c - libFuzzer harness: Connect querier request bodies, as proto3 JSON
 * (pbjson, lenient and strict) and as binary (protobuf-c into an arena, then walked for
 * unknown fields as the server does), then re-encoded both ways. */
#include "common/arena.h"
#include "common/pbjson.h"
#include "wire/adhocprofiles.pb-c.h"
#include "wire/querier.pb-c.h"
#include "wire/recording_rules.pb-c.h"
#include "wire/settings.pb-c.h"

static const ProtobufCMessageDescriptor *const DESCS[] = {
    &querier__v1__profile_types_request__descriptor,
    &querier__v1__label_values_request__descriptor,
    &querier__v1__series_request__descriptor,
    &querier__v1__select_merge_stacktraces_request__descriptor,
    &querier__v1__select_series_request__descriptor,
    &querier__v1__analyze_query_request__descriptor,
    &querier__v1__select_merge_stacktraces_response__descriptor, /* nested messages, bytes */
    &querier__v1__select_series_response__descriptor,            /* doubles */
    &settings__v1__set_settings_request__descriptor,
    &adhocprofiles__v1__ad_hoc_profiles_upload_request__descriptor,
    &adhocprofiles__v1__ad_hoc_profiles_diff_request__descriptor,
    &settings__v1__upsert_recording_rule_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    for (size_t i = 0; i < sizeof DESCS / sizeof *DESCS; i++) {
        arena_t *ar = arena_new();
        if (!ar) return 0;
        hr_err_t err = {0};
        ProtobufCAllocator al = arena_pb_allocator(ar);
        const ProtobufCMessage *ms[3] = {pbjson_decode(DESCS[i], (const char *)data, n, ar, 0, &err),
                                         protobuf_c_message_unpack(DESCS[i], &al, n, data),
                                         pbjson_decode(DESCS[i], (const char *)data, n, ar, PBJSON_STRICT, &err)};
        char which[200];
        if (ms[1]) pb_unknown_field(ms[1], which, sizeof which);
        for (int k = 0; k < 3; k++) {
            if (!ms[k]) continue;
            buf_t b;
            buf_init(&b);
            pbjson_encode(ms[k], &b);
            buf_free(&b);
            uint8_t *p = arena_alloc(ar, protobuf_c_message_get_packed_size(ms[k]));
            if (p) protobuf_c_message_pack(ms[k], p);
        }
        arena_free(ar);
    }
    return 0;
}
