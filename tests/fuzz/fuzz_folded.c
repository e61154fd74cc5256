/* fuzz_folded.c - libFuzzer harness: folded and lines text. */
#include "ingest/folded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    for (int lines = 0; lines < 2; lines++) {
        batch_t b;
        if (batch_init(&b)) return 0;
        labels_t l;
        labels_init(&l);
        batch_profile_t *p = batch_profile(&b, "t:a:b:c:d", &l, 1, 0);
        hr_err_t err = {0};
        if (p) folded_decode((const char *)data, n, lines, 3, &b, p, &err);
        batch_destroy(&b);
    }
    return 0;
}
