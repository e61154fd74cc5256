/* unit.c - the helpers unit.h declares, shared by the unit tests (main.c) and the
 * allocation-failure tests (tests/oom/). */
#include <stdlib.h>
#include <sys/stat.h>

#include "tests/unit/unit.h"

unsigned char *unit_read(const char *rel, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", U.testdata, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "missing test file %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc((size_t)len + 1);
    if (!d || fread(d, 1, (size_t)len, f) != (size_t)len) exit(2);
    fclose(f);
    *n = (size_t)len;
    return d;
}

void unit_rmtree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int unit_finish(const char *suite, int ok, int bad) {
    unit_rmtree(U.tmpdir);
    fprintf(stderr, "%d checks passed, %d failed\n", U.passed, U.failed);
    printf("%s: %d passed, %d failed\n", suite, ok, bad);
    return U.failed ? 1 : 0;
}

void unit_tmpdir(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", U.tmpdir, name);
    mkdir(out, 0755);
}
