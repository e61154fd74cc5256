/* cli.h - the subcommands besides `serve`: push, query, check, objstore.
 *
 * Each takes its own argv (argv[0] is the subcommand), prints what it did, and
 * returns the process exit code: 0 success, 1 the operation failed or found
 * problems, 2 bad usage. Errors say what to do next. */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

#include <stddef.h>

#include "wire/client.h"

#define CLI_DEFAULT_SERVER "http://127.0.0.1:4040"

int cli_push(int argc, char **argv);
int cli_query(int argc, char **argv);
int cli_check(int argc, char **argv);
/* The S3 client by hand (remote/objstore.h): put, get, head, ls, rm. */
int cli_objstore(int argc, char **argv);

/* Option parsing shared by the subcommands: `--name value`, `--name=value`, and
 * boolean `--name`. Positional arguments are collected in order. */
typedef struct {
    const char *name;
    const char **value; /* receives the text; for booleans, "1" */
    int boolean;
} cli_opt_t;

/* Returns 0, 1 if --help was asked for (usage printed), or 2 after an error. */
int cli_parse(int argc, char **argv, const cli_opt_t *opts, size_t nopts, const char **pos, size_t maxpos, size_t *npos,
              const char *usage);

/* The server from --server, else HEARTH_SERVER, else the default. */
const char *cli_server(const char *flag);
/* Prints, for a request that got no answer, what to check next. */
void cli_hint(const client_resp_t *r);

#endif
