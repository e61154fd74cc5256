/* main.c - runs the unit tests: `unit-tests [TESTDATA] [-k SUBSTRING]...`. TESTDATA is the
 * shared testdata directory (default ../shared/testdata); with -k only the tests whose
 * name holds one of the substrings run (e.g. -k functab -k symdict). */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit.h"

unit_t U;

#define MAX_FILTERS 16

/* 1 when name is selected by filters[0..n) (every test without filters). */
static int selected(const char *name, char *const *filters, int n) {
    for (int i = 0; i < n; i++)
        if (strstr(name, filters[i])) return 1;
    return n == 0;
}

int main(int argc, char **argv) {
    char *filters[MAX_FILTERS];
    int nfilters = 0;
    U.testdata = "../shared/testdata";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-k") && i + 1 < argc && nfilters < MAX_FILTERS) filters[nfilters++] = argv[++i];
        else if (argv[i][0] != '-') U.testdata = argv[i];
        else return fprintf(stderr, "usage: %s [TESTDATA] [-k SUBSTRING]...\n", argv[0]), 2;
    }
    snprintf(U.tmpdir, sizeof U.tmpdir, "/tmp/hearth-unit-XXXXXX");
    if (!mkdtemp(U.tmpdir)) return 2;
    int tests_ok = 0, tests_bad = 0;
#define RUN(name)                                                                                                      \
    if (selected(#name, filters, nfilters)) {                                                                          \
        int before = U.failed;                                                                                         \
        name();                                                                                                        \
        fprintf(stderr, "%s %s\n", U.failed == before ? "ok  " : "FAIL", #name);                                       \
        if (U.failed == before) tests_ok++;                                                                            \
        else tests_bad++;                                                                                              \
    }
    UNIT_TESTS(RUN)
#undef RUN
    if (nfilters && !tests_ok && !tests_bad) return fprintf(stderr, "no unit test matches the -k filters\n"), 2;
    return unit_finish("unit", tests_ok, tests_bad);
}
