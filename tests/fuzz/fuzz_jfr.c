/* fuzz_jfr.c - libFuzzer harness: JFR recordings (metadata, constant pools, events). */
#include "ingest/jfr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    batch_t b;
    if (batch_init(&b)) return 0;
    labels_t l;
    labels_init(&l);
    jfr_opts_t o = {.base = &l, .time_ns = 1, .max_decompressed = 8 << 20, .max_samples = 1 << 20};
    hr_err_t err = {0};
    jfr_decode(data, n, &o, &b, &err);
    batch_destroy(&b);
    labels_destroy(&l);
    return 0;
}
