/* serve.h - `hearth serve`: the server process from start to clean shutdown.
 *
 * Reads the configuration (flags, HEARTH_* environment, --config file), opens the
 * store, starts HTTP (answering 503 on /ready until replay is done), replays the
 * WAL (ingest/pipeline.h), starts the scrapers and the background cutter, then
 * waits for SIGINT/SIGTERM (SIGHUP reloads --auth-file). */
#ifndef HEARTH_SERVE_H
#define HEARTH_SERVE_H

/* argv as main received it (argv[1] may be `serve` or the first flag). Returns the
 * process exit code: 0 after a clean shutdown or --help/--print-routes, 1 when the
 * server could not start or flush, 2 for bad flags. */
int serve_main(int argc, char **argv);

#endif
