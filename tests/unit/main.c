/* main.c - runs every unit test; argv[1] is the shared testdata directory. */
#include <stdlib.h>

#include "tests/unit/unit.h"

unit_t U;

int main(int argc, char **argv) {
    U.testdata = argc > 1 ? argv[1] : "../shared/testdata";
    snprintf(U.tmpdir, sizeof U.tmpdir, "/tmp/hearth-unit-XXXXXX");
    if (!mkdtemp(U.tmpdir)) return 2;
    int tests_ok = 0, tests_bad = 0;
#define RUN(name)                                                                                                      \
    {                                                                                                                  \
        int before = U.failed;                                                                                         \
        name();                                                                                                        \
        fprintf(stderr, "%s %s\n", U.failed == before ? "ok  " : "FAIL", #name);                                       \
        if (U.failed == before) tests_ok++;                                                                            \
        else tests_bad++;                                                                                              \
    }
    UNIT_TESTS(RUN)
#undef RUN
    return unit_finish("unit", tests_ok, tests_bad);
}
