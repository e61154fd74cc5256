/* main.c - runs every unit test; argv[1] is the shared testdata directory. */
#include <stdlib.h>

#include "tests/unit/unit.h"

unit_t U;

int main(int argc, char **argv) {
    U.testdata = argc > 1 ? argv[1] : "../shared/testdata";
    snprintf(U.tmpdir, sizeof U.tmpdir, "/tmp/hearth-unit-XXXXXX");
    if (!mkdtemp(U.tmpdir)) return 2;
    int tests_ok = 0, tests_bad = 0;
#define RUN(name)                                                                    \
    {                                                                                \
        int before = U.failed;                                                       \
        name();                                                                      \
        fprintf(stderr, "%s %s\n", U.failed == before ? "ok  " : "FAIL", #name);      \
        if (U.failed == before) tests_ok++;                                          \
        else tests_bad++;                                                            \
    }
    UNIT_TESTS(RUN)
#undef RUN
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", U.tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", U.tmpdir);
    fprintf(stderr, "%d checks passed, %d failed\n", U.passed, U.failed);
    printf("unit: %d passed, %d failed\n", tests_ok, tests_bad);
    return U.failed ? 1 : 0;
}
