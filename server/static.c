/* static.c - serves the web UI's files from --web-dir. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/app.h"
#include "common/fsutil.h"

static const char *content_type(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
    if (!strcmp(dot, ".svg")) return "image/svg+xml";
    if (!strcmp(dot, ".png")) return "image/png";
    if (!strcmp(dot, ".json")) return "application/json";
    return "application/octet-stream";
}

void static_serve(app_t *a, http_req_t *req, http_resp_t *resp) {
    const char *url = req->url;
    if (strstr(url, "..")) return http_error(resp, 400, "bad path");
    /* The UI is one page: its views (/, /embed, ...) all load index.html. */
    const char *file = (!strcmp(url, "/") || !strcmp(url, "/embed")) ? "/index.html" : url;
    char path[4096];
    snprintf(path, sizeof path, "%s%s", a->cfg.web_dir, file);
    uint8_t *data;
    size_t n;
    hr_err_t err = {0};
    if (fs_read_file(path, 64 << 20, &data, &n, &err)) return http_error(resp, 404, "not found: %s", url);
    buf_t b = {data, n, n, 0};
    http_reply(resp, 200, content_type(file), &b);
}
