/* auth.c - see auth.h. */
#include "server/auth.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base64.h"
#include "common/vec.h"
#include "common/labels.h"

typedef struct {
    int basic;
    char secret[512]; /* the token, or user:password */
    size_t len;
    char tenant[129];
    role_t role;
} cred_t;

struct auth {
    cred_t *c;
    size_t n, cap;
};

size_t auth_count(const auth_t *a) { return a ? a->n : 0; }

void auth_free(auth_t *a) {
    if (!a) return;
    /* Credentials should not linger in freed memory. */
    if (a->c) memset(a->c, 0, a->cap * sizeof *a->c);
    free(a->c);
    free(a);
}

static int parse_line(char *line, cred_t *c, hr_err_t *err, const char *path, int lineno) {
    char kind[16], secret[512], tenant[129], role[16];
    if (sscanf(line, "%15s %511s %128s %15s", kind, secret, tenant, role) != 4)
        return hr_fail(err, HR_EINVAL, "%s:%d: want `bearer|basic SECRET TENANT ROLE`", path, lineno);
    memset(c, 0, sizeof *c);
    if (!strcmp(kind, "basic")) c->basic = 1;
    else if (strcmp(kind, "bearer"))
        return hr_fail(err, HR_EINVAL, "%s:%d: kind must be bearer or basic", path, lineno);
    if (c->basic && !strchr(secret, ':'))
        return hr_fail(err, HR_EINVAL, "%s:%d: basic credentials are USER:PASSWORD", path, lineno);
    if (!tenant_id_valid(tenant)) return hr_fail(err, HR_EINVAL, "%s:%d: bad tenant id", path, lineno);
    if (!strcmp(role, "read")) c->role = ROLE_READ;
    else if (!strcmp(role, "write")) c->role = ROLE_WRITE;
    else if (!strcmp(role, "admin")) c->role = ROLE_ADMIN;
    else return hr_fail(err, HR_EINVAL, "%s:%d: role must be read, write or admin", path, lineno);
    memcpy(c->secret, secret, sizeof c->secret);
    c->len = strlen(c->secret);
    memcpy(c->tenant, tenant, sizeof c->tenant);
    return 0;
}

auth_t *auth_load(const char *path, hr_err_t *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        hr_fail(err, HR_EINVAL, "cannot read auth file %s", path);
        return NULL;
    }
    auth_t *a = calloc(1, sizeof *a);
    char line[1024];
    int lineno = 0, rc = a ? 0 : -1;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p) continue;
        if (VEC_RESERVE(a->c, a->cap, a->n + 1)) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else if ((rc = parse_line(p, &a->c[a->n], err, path, lineno)) == 0) a->n++;
    }
    memset(line, 0, sizeof line);
    fclose(f);
    if (rc == 0 && a->n == 0) rc = hr_fail(err, HR_EINVAL, "auth file %s holds no credentials", path);
    if (rc) {
        auth_free(a);
        return NULL;
    }
    return a;
}

/* Equal in time that depends only on the lengths, never on where they differ. */
static int same(const char *x, size_t xn, const char *y, size_t yn) {
    size_t n = xn > yn ? xn : yn;
    unsigned diff = (unsigned)(xn ^ yn);
    for (size_t i = 0; i < n; i++) diff |= (unsigned)(uint8_t)(i < xn ? x[i] : 0) ^ (uint8_t)(i < yn ? y[i] : 0);
    return diff == 0;
}

int auth_check(const auth_t *a, const char *h, char *tenant, size_t tenant_len, role_t *role) {
    if (!a || !h) return -1;
    int basic;
    if (!strncasecmp(h, "Bearer ", 7)) basic = 0;
    else if (!strncasecmp(h, "Basic ", 6)) basic = 1;
    else return -1;
    const char *v = h + (basic ? 6 : 7);
    while (*v == ' ') v++;
    uint8_t *dec = NULL;
    size_t dn = strlen(v);
    const char *secret = v;
    if (basic) {
        if (base64_decode(v, dn, &dec, &dn)) return -1;
        secret = (const char *)dec;
    }
    const cred_t *match = NULL;
    for (size_t i = 0; i < a->n; i++) /* check every one: no early exit */
        if (a->c[i].basic == basic && same(a->c[i].secret, a->c[i].len, secret, dn) && !match) match = &a->c[i];
    if (dec) {
        memset(dec, 0, dn);
        free(dec);
    }
    if (!match) return -1;
    snprintf(tenant, tenant_len, "%s", match->tenant);
    *role = match->role;
    return 0;
}
