/* main.c - the hearth binary: dispatches the subcommands.
 *
 * One executable is the server (`hearth [serve] [flags]`, server/serve.h) and its
 * command-line clients (`push`, `query`, `check`, `objstore`, cli/cli.h). This file is the only
 * one that knows both sides, so it sits above them: the CLI talks to a server over
 * HTTP (wire/client.h) and never includes server/, and the server never includes cli/. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "server/config.h"
#include "server/serve.h"
#include "server/version.h"
#include "wire/client.h"

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "serve";
    client_global_init(); /* before any thread: the scraper and the CLI both use libcurl */
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("hearth %s\n", HEARTH_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "push")) return cli_push(argc - 1, argv + 1);
    if (!strcmp(cmd, "query")) return cli_query(argc - 1, argv + 1);
    if (!strcmp(cmd, "check")) return cli_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "objstore")) return cli_objstore(argc - 1, argv + 1);
    if (!strcmp(cmd, "help")) {
        config_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "serve") && strncmp(cmd, "-", 1)) {
        fprintf(stderr,
                "hearth: unknown command `%s`: use serve, push, query, check, objstore or version (hearth --help)\n",
                cmd);
        return 2;
    }
    return serve_main(argc, argv);
}
