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

static int version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("hearth %s\n", HEARTH_VERSION);
    return 0;
}

static int help(int argc, char **argv) {
    (void)argc, (void)argv;
    config_usage(stdout);
    return 0;
}

/* The subcommands: each gets its own argv (argv[0] its name). */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} COMMANDS[] = {
    {"push", cli_push},   {"query", cli_query},   {"check", cli_check}, {"objstore", cli_objstore},
    {"version", version}, {"--version", version}, {"help", help},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof *COMMANDS)

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "serve";
    client_global_init(); /* before any thread: the scraper and the CLI both use libcurl */
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(cmd, COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") && strncmp(cmd, "-", 1)) { /* flags alone: the server */
        fprintf(stderr,
                "hearth: unknown command `%s`: use serve, push, query, check, objstore or version (hearth --help)\n",
                cmd);
        return 2;
    }
    return serve_main(argc, argv);
}
