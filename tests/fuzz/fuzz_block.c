/* fuzz_block.c - libFuzzer harness: block files and symbol tables from untrusted bytes. */
#include "storage/block.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    hr_err_t err = {0};
    segment_free(block_decode(data, n, &err));
    symtab_free(symtab_decode(data, n, &err));
    return 0;
}
