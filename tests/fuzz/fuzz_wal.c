/* fuzz_wal.c - libFuzzer harness: WAL segment framing and the ingest records in it.
 *
 * The input is written as a segment file and read back by wal_verify; it is also
 * decoded as one record payload and, when that parses, run through ingest. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ingest/request.h"
#include "storage/wal.h"

static char dir[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/hearth-fuzz-wal-%d", (int)getpid());
        char cmd[128];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
        if (system(cmd) != 0) return 0;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/00000001.wal", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
        wal_scan_t ws;
        hr_err_t err = {0};
        wal_verify(dir, &ws, &err);
    }
    ingest_request_t r;
    hr_err_t err = {0};
    if (ingest_request_decode(data, n, &r, &err) == 0) {
        ingest_limits_t lim = {8 << 20, 1 << 20, 64, NULL, 2048};
        batch_t b;
        if (batch_init(&b) == 0) {
            ingest_to_batch(&r, &lim, &b, &err);
            batch_destroy(&b);
        }
    }
    return 0;
}
