/* fuzz_push.c - libFuzzer harness: push.v1 bodies, binary and JSON (also Parca's). */
#include "ingest/push.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    ingest_limits_t lim = {8 << 20, 1 << 20, 64, NULL, 2048};
    for (int enc = PUSH_PROTO; enc <= PUSH_PARCA_PROTO; enc++) {
        batch_t b;
        if (batch_init(&b)) return 0;
        hr_err_t err = {0};
        push_decode(data, n, (push_encoding_t)enc, &lim, 1, &b, &err);
        batch_destroy(&b);
    }
    return 0;
}
