/* fuzz_pprof.c - libFuzzer harness: any bytes through the pprof decoder. */
#include "ingest/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    batch_t b;
    if (batch_init(&b)) return 0;
    labels_t l;
    labels_init(&l);
    labels_set(&l, "service_name", "fuzz");
    pprof_opts_t o = {.base = &l, .now_ns = 1, .max_decompressed = 8 << 20, .max_samples = 1 << 20};
    hr_err_t err = {0};
    pprof_decode(data, n, &o, &b, &err);
    labels_destroy(&l);
    batch_destroy(&b);
    return 0;
}
