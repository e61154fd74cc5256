/* fuzz_multipart.c - libFuzzer harness: multipart/form-data uploads through the real HTTP
 * layer (server/http.c on libmicrohttpd's post processor), over a loopback socket.
 *
 * Input: the first line is the boundary (as a client would put it in Content-Type),
 * the rest is the body. The handler reports every field it got, so the code that
 * collects fields (names, sizes, limits) runs on whatever the parser produced. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "server/http.h"

/* Connections end asynchronously in MHD's threads: leak checks between inputs would
 * see their buffers in flight. ASan still checks every access. */
int __lsan_is_turned_off(void) { return 1; }

static int port;

static void handler(void *app, http_req_t *req, http_resp_t *resp) {
    (void)app;
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "multipart=%d fields=%zu\n", req->multipart, req->nfields);
    for (size_t i = 0; i < req->nfields; i++) buf_printf(&b, "%s %zu\n", req->fields[i].name, req->fields[i].data.len);
    const http_field_t *p = http_field(req, "profile");
    if (p) buf_printf(&b, "profile %zu\n", p->data.len);
    http_reply(resp, 200, "text/plain", &b);
}

static int admit(void *app, http_req_t *req, http_resp_t *resp) {
    (void)app, (void)req, (void)resp;
    return 0;
}

static void release(void *app, http_req_t *req) { (void)app, (void)req; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    log_set_level(LOG_ERROR);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) || getsockname(s, (struct sockaddr *)&sa, &len)) return 1;
    port = ntohs(sa.sin_port);
    close(s);
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    hr_err_t err = {0};
    http_config_t cfg = {.listen = listen,
                         .max_conns = 64,
                         .idle_timeout_s = 5,
                         .read_timeout_ns = 5000000000,
                         .max_body = 1 << 20,
                         .max_inflight_body = 64 << 20};
    http_router_t router = {admit, handler, release, NULL};
    return http_start(&cfg, &router, &err) ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const uint8_t *nl = memchr(data, '\n', n < 80 ? n : 80);
    size_t blen = nl ? (size_t)(nl - data) : 0;
    char boundary[80];
    for (size_t i = 0; i < blen; i++)
        boundary[i] = data[i] >= 0x21 && data[i] < 0x7f && data[i] != ';' ? (char)data[i] : 'x';
    boundary[blen] = 0;
    const uint8_t *body = nl ? nl + 1 : data;
    size_t bn = n - (size_t)(body - data);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=%s\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      blen ? boundary : "B", bn);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa)) {
        if (s >= 0) close(s);
        return 0;
    }
    if (send(s, head, (size_t)hn, MSG_NOSIGNAL) == hn && (bn == 0 || send(s, body, bn, MSG_NOSIGNAL) >= 0)) {
        char buf[4096];
        while (recv(s, buf, sizeof buf, 0) > 0) {
        }
    }
    close(s);
    return 0;
}
