/* fuzz_selector.c - libFuzzer harness: selector parsing and matching. */
#include <stdlib.h>
#include <string.h>

#include "query/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return 0;
    memcpy(s, data, n);
    s[n] = 0;
    selector_t sel;
    hr_err_t err = {0};
    if (selector_parse(s, &sel, &err) == 0) {
        labels_t l;
        labels_init(&l);
        labels_set(&l, "service_name", "api");
        labels_set(&l, "env", "prod");
        selector_matches(&sel, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &l);
        labels_destroy(&l);
    }
    selector_destroy(&sel);
    free(s);
    return 0;
}
