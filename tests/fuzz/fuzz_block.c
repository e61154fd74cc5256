/* fuzz_block.c - libFuzzer harness: block files, symbol and function tables and merge shares from untrusted bytes. */
#include "storage/block.h"
#include "query/share.h"
#include "storage/functab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    hr_err_t err = {0};
    segment_free(block_decode(data, n, &err));
    symtab_free(symtab_decode(data, n, &err));
    static const uint32_t series[4] = {1, 2, 3, 4};
    functab_free(functab_decode(data, n, series, n ? data[0] % 5 : 0, &err)); /* a FUNCS section */
    share_t s;
    share_decode(data, n, &s, &err); /* a peer's merge share */
    share_destroy(&s);
    return 0;
}
