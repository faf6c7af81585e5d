// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * TLS under a clamd connection (tls:// addresses), with OpenSSL: the client
 * context (CA, optional client certificate), a non-blocking handshake under
 * the connect deadline and cancellation, and non-blocking record I/O.  The
 * peer is always verified: there is no setting that skips it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "internal.h"

struct cdp_tls {
	SSL_CTX *ctx;
	char *name; /* tls_name, or NULL: the address's host */
};

/*
 * OpenSSL's socket BIO writes with write(), which raises SIGPIPE when the
 * peer is gone; the library must not kill a caller that did not ignore it.
 * This BIO sends with MSG_NOSIGNAL and keeps errno for the caller.
 */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
	int fd = (int)(intptr_t)BIO_get_data(b);
	ssize_t n = send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);

	BIO_clear_retry_flags(b);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_write(b);
	return (int)n;
}

static int nosig_read(BIO *b, char *buf, int len)
{
	int fd = (int)(intptr_t)BIO_get_data(b);
	ssize_t n = recv(fd, buf, (size_t)len, MSG_DONTWAIT);

	BIO_clear_retry_flags(b);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_read(b);
	return (int)n;
}

static long nosig_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int nosig_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void nosig_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
				     "clamdproto socket");

	if (!m)
		return;
	BIO_meth_set_write(m, nosig_write);
	BIO_meth_set_read(m, nosig_read);
	BIO_meth_set_ctrl(m, nosig_ctrl);
	BIO_meth_set_create(m, nosig_create);
	nosig_method = m;
}

/* The newest OpenSSL error as text, and the queue cleared. */
static void ssl_reason(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_peek_last_error();

	if (e) {
		const char *r = ERR_reason_error_string(e);

		if (r)
			snprintf(buf, len, "%s", r);
		else
			ERR_error_string_n(e, buf, len);
	} else {
		snprintf(buf, len, "%s", fallback);
	}
	ERR_clear_error();
}

static int load_files(SSL_CTX *ctx, const struct cdp_config *cfg, char *err,
		      size_t errlen)
{
	char why[200];

	if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) != 1) {
		ssl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "clamd_tls_ca %s: %s", cfg->tls_ca, why);
		return -EINVAL;
	}
	if (!cfg->tls_cert != !cfg->tls_key) {
		snprintf(err, errlen,
			 "clamd_tls_cert and clamd_tls_key go together");
		return -EINVAL;
	}
	if (!cfg->tls_cert)
		return 0;
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		ssl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "clamd_tls_cert %s: %s", cfg->tls_cert,
			 why);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) !=
		    1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		ssl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "clamd_tls_key %s: %s", cfg->tls_key,
			 why);
		return -EINVAL;
	}
	return 0;
}

int cdp_tls_new(const struct cdp_config *cfg, struct cdp_tls **tlsp, char *err,
		size_t errlen)
{
	struct cdp_tls *t;
	int rc = -ENOMEM;

	if (!cfg->tls_ca || !*cfg->tls_ca) {
		/* No CA would mean "trust whoever answers": refuse. */
		snprintf(err, errlen,
			 "a tls:// clamd address needs clamd_tls_ca (the CA "
			 "that signed the server's certificate)");
		return -EINVAL;
	}
	pthread_once(&nosig_once, nosig_init);
	t = calloc(1, sizeof(*t));
	if (!t || !nosig_method)
		goto fail;
	if (cfg->tls_name && *cfg->tls_name) {
		t->name = strdup(cfg->tls_name);
		if (!t->name)
			goto fail;
	}
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx)
		goto fail;
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	/* clamd's replies are NUL-terminated: a cut reply is still caught,
	 * and terminators differ in sending close_notify. */
	SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Partial writes let a send loop under a deadline make progress. */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	rc = load_files(t->ctx, cfg, err, errlen);
	if (rc)
		goto fail_quiet;
	*tlsp = t;
	return 0;
fail:
	snprintf(err, errlen, "TLS setup: out of memory");
fail_quiet:
	cdp_tls_free(t);
	ERR_clear_error();
	return rc;
}

void cdp_tls_free(struct cdp_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t->name);
	free(t);
}

static bool is_ip_literal(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, s, buf) == 1 ||
	       inet_pton(AF_INET6, s, buf) == 1;
}

/*
 * One step of an SSL call that returned @ret: 0 with *events set when it
 * must wait for the socket, else a negative errno (EOF: -ENODATA).  The
 * error queue is left for the caller to read or clear.
 */
static int ssl_step(SSL *ssl, int ret, short *events)
{
	int saved = errno;

	switch (SSL_get_error(ssl, ret)) {
	case SSL_ERROR_WANT_READ:
		*events = POLLIN;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		*events = POLLOUT;
		return 0;
	case SSL_ERROR_ZERO_RETURN:
		return -ENODATA;
	case SSL_ERROR_SYSCALL:
		return saved ? -saved : -ENODATA;
	default:
		return -EPROTO;
	}
}

int cdp_tls_connect(struct cdp_tls *t, int fd, const char *host,
		    int64_t deadline, struct cdp_cancel *cancel, SSL **sslp,
		    char *why, size_t whylen)
{
	const char *name = t->name ? t->name : host;
	SSL *ssl;
	BIO *bio;
	int rc;

	ERR_clear_error();
	ssl = SSL_new(t->ctx);
	bio = BIO_new(nosig_method);
	if (!ssl || !bio) {
		BIO_free(bio);
		SSL_free(ssl);
		snprintf(why, whylen, "TLS: out of memory");
		return -ENOMEM;
	}
	BIO_set_data(bio, (void *)(intptr_t)fd);
	SSL_set_bio(ssl, bio, bio);
	/* SSL_set1_host takes a DNS name or an IP address; SNI is for names
	 * only. */
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set1_host(ssl, name) != 1 ||
	    (!is_ip_literal(name) &&
	     SSL_set_tlsext_host_name(ssl, name) != 1)) {
		snprintf(why, whylen, "TLS: cannot verify the name %s", name);
		rc = -EINVAL;
		goto fail;
	}
	rc = cdp_cancel_attach(cancel, fd);
	while (!rc) {
		short events = 0;
		int ret;

		errno = 0;
		ret = SSL_connect(ssl);
		if (ret == 1)
			break;
		rc = ssl_step(ssl, ret, &events);
		if (rc == -EPROTO && SSL_get_verify_result(ssl) != X509_V_OK)
			snprintf(why, whylen,
				 "TLS: certificate of %s not accepted: %s",
				 name,
				 X509_verify_cert_error_string(
					 SSL_get_verify_result(ssl)));
		else if (rc == -EPROTO)
			ssl_reason(why, whylen, "handshake failed");
		if (rc)
			break;
		rc = cdp_wait(fd, events, deadline, cancel);
		if (rc > 0)
			rc = 0;
	}
	cdp_cancel_detach(cancel);
	if (rc == -ENODATA) {
		rc = -ECONNRESET;
		snprintf(why, whylen,
			 "TLS: the peer closed the connection during the "
			 "handshake");
	} else if (rc == -EPROTO && strncmp(why, "TLS", 3) != 0) {
		char tmp[200];

		snprintf(tmp, sizeof(tmp), "%s", why);
		snprintf(why, whylen, "TLS handshake with %s failed: %s", name,
			 tmp);
	}
	/* the cancel shut the socket: what the handshake saw is its echo */
	if (cdp_cancel_triggered(cancel)) {
		rc = -ECANCELED;
		if (whylen)
			why[0] = '\0';
	}
	if (rc)
		goto fail;
	*sslp = ssl;
	return 0;
fail:
	ERR_clear_error();
	SSL_free(ssl);
	return rc;
}

void cdp_tls_close(SSL *ssl)
{
	SSL_free(ssl);
}

/*
 * A TLS error on an established connection (a fatal alert, a record that
 * fails to decrypt) breaks it like a reset. Not -EPROTO: the connection's
 * readers take -EPROTO to mean "a partial reply is in *line", which a
 * TLS error never leaves.
 */
static int tls_broken(int ret)
{
	return ret == -EPROTO ? -ECONNRESET : ret;
}

ssize_t cdp_tls_send(SSL *ssl, const void *buf, size_t len, short *events)
{
	size_t done = 0;
	int ret;

	*events = 0;
	errno = 0;
	ret = SSL_write_ex(ssl, buf, len, &done);
	if (ret == 1)
		return (ssize_t)done;
	ret = ssl_step(ssl, ret, events);
	ERR_clear_error();
	if (ret == -ENODATA)
		ret = -EPIPE;
	return ret ? tls_broken(ret) : -EAGAIN;
}

ssize_t cdp_tls_recv(SSL *ssl, void *buf, size_t len, short *events)
{
	size_t done = 0;
	int ret;

	*events = 0;
	errno = 0;
	ret = SSL_read_ex(ssl, buf, len, &done);
	if (ret == 1)
		return (ssize_t)done;
	ret = ssl_step(ssl, ret, events);
	ERR_clear_error();
	if (ret == -ENODATA)
		return 0;
	return ret ? tls_broken(ret) : -EAGAIN;
}

int cdp_tls_has_input(SSL *ssl)
{
	char c;
	size_t n = 0;
	short events;
	int ret;

	if (SSL_pending(ssl) > 0)
		return 1;
	errno = 0;
	ret = SSL_peek_ex(ssl, &c, 1, &n);
	if (ret == 1)
		return 1;
	/* Records that carry no data (TLS 1.3 session tickets) were
	 * consumed; anything else (EOF, an alert) is input too. */
	ret = ssl_step(ssl, ret, &events);
	ERR_clear_error();
	return ret == 0 && events == POLLIN ? 0 : 1;
}
