/* auth.h - optional authentication: bearer tokens and HTTP Basic credentials, each
 * bound to a tenant and a role.
 *
 * The auth file (--auth-file) has one credential per line, `#` comments:
 *   bearer TOKEN          TENANT ROLE
 *   basic  USER:PASSWORD  TENANT ROLE
 * ROLE is write (agents: ingest only), read (UI, scripts, Grafana: queries only) or
 * admin (both, plus /api/v1/admin). Credentials are compared in constant time and
 * never logged. SIGHUP reloads the file; a file that fails to parse keeps the old
 * credentials in force. */
#ifndef HEARTH_AUTH_H
#define HEARTH_AUTH_H

#include <stddef.h>

#include "common/err.h"

typedef enum { ROLE_READ = 1, ROLE_WRITE = 2, ROLE_ADMIN = 3 } role_t;

typedef struct auth auth_t;

auth_t *auth_load(const char *path, hr_err_t *err);
void auth_free(auth_t *a);
size_t auth_count(const auth_t *a);

/* Checks an Authorization header value. Returns 0 and fills tenant and role for a
 * known credential, -1 otherwise (missing, malformed or unknown). */
int auth_check(const auth_t *a, const char *authorization, char *tenant, size_t tenant_len, role_t *role);

#endif
