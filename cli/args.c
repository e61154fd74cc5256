/* args.c - option parsing and the server address for the subcommands; see cli.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_parse(int argc, char **argv, const cli_opt_t *opts, size_t nopts, const char **pos, size_t maxpos, size_t *npos,
              const char *usage) {
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) || !a[2]) {
            if (*npos == maxpos) {
                fprintf(stderr, "hearth %s: unexpected argument `%s` (see hearth %s --help)\n", argv[0], a, argv[0]);
                return 2;
            }
            pos[(*npos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        const cli_opt_t *o = NULL;
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == nl && !strncmp(opts[k].name, a + 2, nl)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "hearth %s: unknown flag `%s` (see hearth %s --help)\n", argv[0], a, argv[0]);
            return 2;
        }
        if (o->boolean) {
            *o->value = "1";
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "hearth %s: --%s needs a value\n", argv[0], o->name);
            return 2;
        }
        *o->value = v;
    }
    return 0;
}

const char *cli_server(const char *flag) {
    if (flag) return flag;
    const char *e = getenv("HEARTH_SERVER");
    return e && *e ? e : CLI_DEFAULT_SERVER;
}

void cli_hint(const client_resp_t *r) {
    if (r->status == 0) fprintf(stderr, "  is the server running? set --server or HEARTH_SERVER\n");
}
