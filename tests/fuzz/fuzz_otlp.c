/* fuzz_otlp.c - libFuzzer harness: OTLP profiles requests, protobuf and JSON. */
#include "ingest/otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    ingest_limits_t lim = {.max_decompressed = 8 << 20,
                           .max_samples = 1 << 20,
                           .max_labels = 64,
                           .decode_budget = NULL,
                           .max_label_value_bytes = 2048};
    for (int enc = OTLP_PROTO; enc <= OTLP_JSON; enc++) {
        batch_t b;
        if (batch_init(&b)) return 0;
        hr_err_t err = {0};
        ingest_partial_t part;
        otlp_decode(data, n, (otlp_encoding_t)enc, &lim, 1, &b, &part, &err);
        batch_destroy(&b);
    }
    return 0;
}
