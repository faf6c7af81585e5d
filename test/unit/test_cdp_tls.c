// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests for clamdproto's TLS client (tls.c) through cdp_conn_adopt(),
 * against an OpenSSL server on a thread at the other end of a socketpair.
 * The certificates are made at run time in a temporary directory: a CA, a
 * server certificate for clamd.test, one from another CA, an expired one,
 * and a client certificate.  Cases: a command round trip and
 * cdp_tls_has_input() (session tickets, data buffered in OpenSSL, EOF); a
 * wrong name, an unknown CA and an expired certificate refused with a
 * reason; a server requiring a client certificate; cdp_tls_new()'s errors;
 * a handshake ended by a cancel, by the deadline, and by a hang-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "clamdproto.h"
#include "internal.h"

#define NAME	"clamd.test"
#define WAIT_MS 10000 /* generous bound on anything that should be quick */
#define PARTIAL "stream: Eicar-Te" /* a reply cut short */

/* ------------------------------------------------------ certificates */

static struct pki {
	char dir[256];
	char ca_path[300];	   /* CA certificate, the client trusts it */
	char client_crt_path[300]; /* client certificate, signed by the CA */
	char client_key_path[300];
	char other_key_path[300]; /* a key matching no certificate */
	EVP_PKEY *ca_key, *ca2_key, *srv_key, *client_key, *other_key;
	X509 *ca, *ca2;
	X509 *srv;	   /* NAME, signed by ca */
	X509 *srv_ca2;	   /* NAME, signed by ca2 */
	X509 *srv_expired; /* NAME, signed by ca, expired yesterday */
	X509 *client;	   /* "clamfs client", signed by ca */
} pki;

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok;

	if (!ext)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

/*
 * A certificate for @key named @cn, valid from @from_days to @to_days
 * (relative to now): a self-signed CA when @issuer is NULL, else a leaf
 * signed by @issuer with @san (or none) and the extended key usage @eku.
 */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer,
		       EVP_PKEY *issuer_key, const char *san, const char *eku,
		       long from_days, long to_days)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX v3;
	int ok;

	if (!x)
		return NULL;
	name = X509_get_subject_name(x);
	ok = X509_set_version(x, 2) &&
	     ASN1_INTEGER_set(X509_get_serialNumber(x), serial++) &&
	     X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400) &&
	     X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400) &&
	     X509_set_pubkey(x, key) &&
	     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
					(const unsigned char *)cn, -1, -1, 0) &&
	     X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer)
					    : name);
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
	if (ok && !issuer)
		ok = add_ext(x, &v3, NID_basic_constraints,
			     "critical,CA:TRUE") &&
		     add_ext(x, &v3, NID_key_usage,
			     "critical,keyCertSign,cRLSign") &&
		     add_ext(x, &v3, NID_subject_key_identifier, "hash");
	else if (ok)
		ok = add_ext(x, &v3, NID_basic_constraints, "CA:FALSE") &&
		     add_ext(x, &v3, NID_key_usage,
			     "critical,digitalSignature") &&
		     add_ext(x, &v3, NID_ext_key_usage, eku) &&
		     add_ext(x, &v3, NID_subject_key_identifier, "hash") &&
		     add_ext(x, &v3, NID_authority_key_identifier,
			     "keyid:always") &&
		     (!san || add_ext(x, &v3, NID_subject_alt_name, san));
	if (ok)
		ok = X509_sign(x, issuer ? issuer_key : key, EVP_sha256()) > 0;
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

static int write_pem(const char *path, X509 *x, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return 0;
	ok = x ? PEM_write_X509(f, x)
	       : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	return fclose(f) == 0 && ok;
}

static int pki_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(pki.dir, sizeof(pki.dir), "%s/test_cdp_tls.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(pki.dir)) {
		pki.dir[0] = '\0';
		return -1;
	}
	snprintf(pki.ca_path, sizeof(pki.ca_path), "%s/ca.pem", pki.dir);
	snprintf(pki.client_crt_path, sizeof(pki.client_crt_path),
		 "%s/client.pem", pki.dir);
	snprintf(pki.client_key_path, sizeof(pki.client_key_path),
		 "%s/client.key", pki.dir);
	snprintf(pki.other_key_path, sizeof(pki.other_key_path), "%s/other.key",
		 pki.dir);

	pki.ca_key = EVP_EC_gen("P-256");
	pki.ca2_key = EVP_EC_gen("P-256");
	pki.srv_key = EVP_EC_gen("P-256");
	pki.client_key = EVP_EC_gen("P-256");
	pki.other_key = EVP_EC_gen("P-256");
	if (!pki.ca_key || !pki.ca2_key || !pki.srv_key || !pki.client_key ||
	    !pki.other_key)
		return -1;
	pki.ca = make_cert(pki.ca_key, "clamfs test CA", NULL, NULL, NULL, NULL,
			   -1, 30);
	pki.ca2 = make_cert(pki.ca2_key, "clamfs test CA", NULL, NULL, NULL,
			    NULL, -1, 30);
	if (!pki.ca || !pki.ca2)
		return -1;
	pki.srv = make_cert(pki.srv_key, NAME, pki.ca, pki.ca_key, "DNS:" NAME,
			    "serverAuth", -1, 30);
	pki.srv_ca2 = make_cert(pki.srv_key, NAME, pki.ca2, pki.ca2_key,
				"DNS:" NAME, "serverAuth", -1, 30);
	pki.srv_expired = make_cert(pki.srv_key, NAME, pki.ca, pki.ca_key,
				    "DNS:" NAME, "serverAuth", -30, -1);
	pki.client = make_cert(pki.client_key, "clamfs client", pki.ca,
			       pki.ca_key, NULL, "clientAuth", -1, 30);
	if (!pki.srv || !pki.srv_ca2 || !pki.srv_expired || !pki.client)
		return -1;
	if (!write_pem(pki.ca_path, pki.ca, NULL) ||
	    !write_pem(pki.client_crt_path, pki.client, NULL) ||
	    !write_pem(pki.client_key_path, NULL, pki.client_key) ||
	    !write_pem(pki.other_key_path, NULL, pki.other_key))
		return -1;
	return 0;
}

static int pki_teardown(void **state)
{
	X509 **certs[] = {&pki.ca,	&pki.ca2,	  &pki.srv,
			  &pki.srv_ca2, &pki.srv_expired, &pki.client};
	EVP_PKEY **keys[] = {&pki.ca_key, &pki.ca2_key, &pki.srv_key,
			     &pki.client_key, &pki.other_key};
	size_t i;

	for (i = 0; i < sizeof(certs) / sizeof(certs[0]); i++) {
		X509_free(*certs[i]);
		*certs[i] = NULL;
	}
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		EVP_PKEY_free(*keys[i]);
		*keys[i] = NULL;
	}
	if (pki.dir[0]) {
		unlink(pki.ca_path);
		unlink(pki.client_crt_path);
		unlink(pki.client_key_path);
		unlink(pki.other_key_path);
		if (rmdir(pki.dir) != 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------ the fake server */

enum srv_mode {
	SRV_TLS,    /* SSL_accept, then answer commands */
	SRV_SILENT, /* read the ClientHello, answer nothing until EOF */
	SRV_HANGUP, /* read the ClientHello, then close */
};

struct srv_opts {
	enum srv_mode mode;
	X509 *cert; /* SRV_TLS: the certificate and key presented */
	EVP_PKEY *key;
	bool want_client_cert; /* require one, signed by pki.ca */
	int max_version;       /* 0, or e.g. TLS1_2_VERSION */
	/* SRV_TLS: part of a reply, then bytes that break the TLS stream */
	bool partial_then_broken;
	/* SRV_SILENT: triggered once the ClientHello has arrived */
	struct cdp_cancel *trigger;
};

struct server {
	struct srv_opts o;
	int fd; /* blocking; the thread closes it */
	pthread_t thr;
	bool running;
	/* results, read after the join */
	bool hello;	    /* SRV_SILENT, SRV_HANGUP: bytes arrived */
	bool accepted;	    /* SRV_TLS: SSL_accept succeeded */
	char client_cn[64]; /* the client certificate's CN, or "" */
	int answered;	    /* commands answered */
	char err[256];	    /* why SSL_accept failed */
};

static int ssl_write_all(SSL *ssl, const char *p, size_t len)
{
	size_t done;

	while (len) {
		if (SSL_write_ex(ssl, p, len, &done) != 1)
			return -1;
		p += done;
		len -= done;
	}
	return 0;
}

/* Commands and answers, NUL-terminated as clamd's. */
static void serve_commands(struct server *s, SSL *ssl)
{
	char cmd[64];
	size_t len = 0, n;

	while (SSL_read_ex(ssl, cmd + len, 1, &n) == 1) {
		if (cmd[len] != '\0') {
			if (++len == sizeof(cmd))
				return;
			continue;
		}
		len = 0;
		if (strcmp(cmd, "zPING") == 0) {
			if (ssl_write_all(ssl, "PONG", 5))
				return;
		} else if (strcmp(cmd, "zVERSION") == 0) {
			/* one reply in two records */
			if (ssl_write_all(ssl, "ClamAV 1.0.7", 12) ||
			    ssl_write_all(ssl, "/27400/Thu Jan  1 2026", 23))
				return;
		} else if (strcmp(cmd, "zEND") == 0) {
			SSL_shutdown(ssl); /* close_notify, then close */
			return;
		} else {
			return;
		}
		s->answered++;
	}
}

static void serve_tls(struct server *s)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	SSL *ssl = NULL;
	X509 *peer;

	if (!ctx || SSL_CTX_use_certificate(ctx, s->o.cert) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, s->o.key) != 1) {
		snprintf(s->err, sizeof(s->err), "server setup failed");
		goto out;
	}
	if (s->o.max_version)
		SSL_CTX_set_max_proto_version(ctx, s->o.max_version);
	if (s->o.want_client_cert) {
		X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), pki.ca);
		SSL_CTX_set_verify(
			ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			NULL);
	}
	ssl = SSL_new(ctx);
	if (!ssl || SSL_set_fd(ssl, s->fd) != 1) {
		snprintf(s->err, sizeof(s->err), "server setup failed");
		goto out;
	}
	if (SSL_accept(ssl) != 1) {
		unsigned long e = ERR_peek_last_error();

		snprintf(s->err, sizeof(s->err), "%s",
			 e ? ERR_reason_error_string(e) : "SSL_accept failed");
		goto out;
	}
	s->accepted = true;
	peer = SSL_get1_peer_certificate(ssl);
	if (peer) {
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer),
					  NID_commonName, s->client_cn,
					  sizeof(s->client_cn));
		X509_free(peer);
	}
	if (s->o.partial_then_broken) {
		static const char garbage[16] = {(char)0xff, (char)0xff,
						 (char)0xff, (char)0xff};
		char buf[256];

		/* clamd's last words: a reply cut short, then no valid record
		 */
		if (ssl_write_all(ssl, PARTIAL, strlen(PARTIAL)) == 0 &&
		    write(s->fd, garbage, sizeof(garbage)) > 0)
			s->answered = 1;
		/* held until the client is gone */
		while (read(s->fd, buf, sizeof(buf)) > 0)
			;
		goto out;
	}
	serve_commands(s, ssl);
out:
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	ERR_clear_error();
}

static ssize_t read_some(int fd)
{
	char buf[4096];
	ssize_t n;

	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	return n;
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	if (s->o.mode == SRV_TLS) {
		serve_tls(s);
	} else {
		char buf[4096];

		s->hello = read_some(s->fd) > 0;
		/* nothing left unread: closing on unread data would make
		 * the client's next read fail with ECONNRESET, not EOF */
		while (recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		if (s->o.mode == SRV_SILENT) {
			if (s->hello && s->o.trigger)
				cdp_cancel_trigger(s->o.trigger);
			/* hold the socket until the client is gone */
			while (read_some(s->fd) > 0)
				;
		}
	}
	close(s->fd);
	return NULL;
}

/* ------------------------------------------------------ per-test fixture */

static struct fixture {
	struct server srv;
	int cfd; /* the client end until cdp_conn_adopt takes it */
	struct cdp_conn *conn;
	struct cdp_tls *tls;
	struct cdp_cancel *cancel;
} fx;

/* Close the client end, so the server ends, and join it. */
static void finish(void)
{
	if (fx.conn) {
		cdp_conn_close(fx.conn);
		fx.conn = NULL;
	}
	if (fx.cfd >= 0) {
		close(fx.cfd);
		fx.cfd = -1;
	}
	if (fx.srv.running) {
		pthread_join(fx.srv.thr, NULL);
		fx.srv.running = false;
	}
}

static int fx_setup(void **state)
{
	memset(&fx, 0, sizeof(fx));
	fx.cfd = -1;
	return 0;
}

/* Runs after a failed assertion too: no server thread outlives its test. */
static int fx_teardown(void **state)
{
	finish();
	cdp_tls_free(fx.tls);
	fx.tls = NULL;
	cdp_cancel_free(fx.cancel);
	fx.cancel = NULL;
	return 0;
}

static void start_server(const struct srv_opts *o)
{
	int sv[2];

	finish();
	memset(&fx.srv, 0, sizeof(fx.srv));
	fx.srv.o = *o;
	assert_int_equal(socketpair(AF_UNIX,
				    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				    0, sv),
			 0);
	/* the server end blocks */
	assert_int_equal(fcntl(sv[1], F_SETFL, 0), 0);
	fx.cfd = sv[0];
	fx.srv.fd = sv[1];
	if (pthread_create(&fx.srv.thr, NULL, server_main, &fx.srv) != 0) {
		close(sv[1]);
		fail_msg("pthread_create");
	}
	fx.srv.running = true;
}

/* A client context trusting pki.ca, expecting @name (NULL: the host). */
static void new_tls(const char *name, bool client_cert)
{
	struct cdp_config cfg;
	char err[256] = "";
	int rc;

	cdp_tls_free(fx.tls);
	fx.tls = NULL;
	cdp_config_init(&cfg);
	cfg.tls_ca = pki.ca_path;
	cfg.tls_name = name;
	if (client_cert) {
		cfg.tls_cert = pki.client_crt_path;
		cfg.tls_key = pki.client_key_path;
	}
	rc = cdp_tls_new(&cfg, &fx.tls, err, sizeof(err));
	if (rc)
		print_error("cdp_tls_new: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(fx.tls);
}

/* Shake hands on the client end as @host; the fd is adopt's from here. */
static int handshake(const char *host, int timeout_ms,
		     struct cdp_cancel *cancel, char *why, size_t whylen)
{
	int fd = fx.cfd;

	fx.cfd = -1;
	return cdp_conn_adopt(fd, false, fx.tls, host, cdp_deadline(timeout_ms),
			      cancel, &fx.conn, why, whylen);
}

/* A server with @o, a handshake as @host, then both ends closed. */
static int attempt(const struct srv_opts *o, const char *host, char *why,
		   size_t whylen)
{
	int rc;

	start_server(o);
	rc = handshake(host, WAIT_MS, NULL, why, whylen);
	finish();
	return rc;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* cdp_tls_recv, waiting while it says -EAGAIN. */
static ssize_t recv_wait(struct cdp_conn *conn, void *buf, size_t len)
{
	for (;;) {
		short events;
		ssize_t n = cdp_tls_recv(conn->ssl, buf, len, &events);
		struct pollfd p = {.fd = conn->fd, .events = events};

		if (n != -EAGAIN)
			return n;
		if (poll(&p, 1, WAIT_MS) != 1)
			return -ETIMEDOUT;
	}
}

static void ping(void)
{
	const char *line = NULL;
	size_t len = 0;

	assert_int_equal(cdp_conn_send(fx.conn, "zPING", 6,
				       cdp_deadline(WAIT_MS), NULL, false),
			 0);
	assert_int_equal(cdp_conn_read(fx.conn, 64, cdp_deadline(WAIT_MS), NULL,
				       &line, &len),
			 0);
	assert_string_equal(line, "PONG");
	assert_int_equal(len, 4);
}

/* A TLS server presenting @cert (with pki.srv_key). */
static struct srv_opts tls_server(X509 *cert)
{
	struct srv_opts o = {.mode = SRV_TLS, .cert = cert, .key = pki.srv_key};

	return o;
}

/* ------------------------------------------------------------- the cases */

/* Handshake, commands, and what cdp_tls_has_input says on the way. */
static void test_round_trip(void **state)
{
	struct srv_opts o = tls_server(pki.srv);
	char why[256] = "x";
	const char *line = NULL;
	size_t len = 0;
	char buf[16];

	new_tls(NULL, false);
	start_server(&o);
	assert_int_equal(handshake(NAME, WAIT_MS, NULL, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_non_null(fx.conn);
	assert_non_null(fx.conn->ssl);
	assert_int_equal(SSL_version(fx.conn->ssl), TLS1_3_VERSION);

	/* TLS 1.3 session tickets follow the handshake: the socket turns
	 * readable, but that is no input */
	assert_true(readable(fx.conn->fd, WAIT_MS));
	assert_int_equal(cdp_tls_has_input(fx.conn->ssl), 0);
	assert_false(cdp_conn_has_input(fx.conn));

	ping();

	/* a reply that comes in two records */
	assert_int_equal(cdp_conn_send(fx.conn, "zVERSION", 9,
				       cdp_deadline(WAIT_MS), NULL, false),
			 0);
	assert_int_equal(cdp_conn_read(fx.conn, 64, cdp_deadline(WAIT_MS), NULL,
				       &line, &len),
			 0);
	assert_string_equal(line, "ClamAV 1.0.7/27400/Thu Jan  1 2026");

	/* data waiting in OpenSSL's buffer, none on the socket, is input */
	assert_int_equal(cdp_conn_send(fx.conn, "zPING", 6,
				       cdp_deadline(WAIT_MS), NULL, false),
			 0);
	assert_int_equal(recv_wait(fx.conn, buf, 1), 1);
	assert_int_equal(buf[0], 'P');
	assert_false(readable(fx.conn->fd, 0));
	assert_int_equal(cdp_tls_has_input(fx.conn->ssl), 1);
	assert_true(cdp_conn_has_input(fx.conn));
	assert_int_equal(recv_wait(fx.conn, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ONG", 4);
	/* all read, the server waits for a command: no input */
	assert_int_equal(cdp_tls_has_input(fx.conn->ssl), 0);

	/* the server closes (close_notify): EOF is input, then -ENODATA */
	assert_int_equal(cdp_conn_send(fx.conn, "zEND", 5,
				       cdp_deadline(WAIT_MS), NULL, false),
			 0);
	assert_true(readable(fx.conn->fd, WAIT_MS));
	assert_int_equal(cdp_tls_has_input(fx.conn->ssl), 1);
	assert_int_equal(cdp_conn_read(fx.conn, 64, cdp_deadline(WAIT_MS), NULL,
				       &line, &len),
			 -ENODATA);
	finish();
	assert_true(fx.srv.accepted);
	assert_int_equal(fx.srv.answered, 3);
	assert_string_equal(fx.srv.client_cn, "");
}

/* The certificate must carry the expected name: tls_name, else the host. */
static void test_wrong_name(void **state)
{
	struct srv_opts o = tls_server(pki.srv);
	char why[256];

	/* tls_name wins over the host */
	new_tls("other.test", false);
	assert_int_equal(attempt(&o, NAME, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "other.test"));
	assert_non_null(strstr(why, "not accepted"));
	assert_false(fx.srv.accepted);

	/* without tls_name, the host is the name */
	new_tls(NULL, false);
	assert_int_equal(attempt(&o, "other.test", why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "other.test"));
	assert_false(fx.srv.accepted);
	assert_int_equal(attempt(&o, "clamd", why, sizeof(why)), -EPROTO);
	assert_false(fx.srv.accepted);

	/* an IP address as the host, the name from tls_name: accepted */
	new_tls(NAME, false);
	assert_int_equal(attempt(&o, "192.0.2.1", why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_true(fx.srv.accepted);
	/* and the IP address as the expected name: refused (no IP SAN) */
	new_tls(NULL, false);
	assert_int_equal(attempt(&o, "192.0.2.1", why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "192.0.2.1"));
	assert_false(fx.srv.accepted);
}

static void test_other_ca(void **state)
{
	struct srv_opts o = tls_server(pki.srv_ca2);
	char why[256];

	new_tls(NULL, false);
	assert_int_equal(attempt(&o, NAME, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "not accepted"));
	assert_non_null(strstr(why, "issuer"));
	assert_false(fx.srv.accepted);
}

static void test_expired(void **state)
{
	struct srv_opts o = tls_server(pki.srv_expired);
	char why[256];

	new_tls(NULL, false);
	assert_int_equal(attempt(&o, NAME, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "not accepted"));
	assert_non_null(strstr(why, "expired"));
	assert_false(fx.srv.accepted);
}

/*
 * The stream breaks (a record that is no TLS) after part of a reply: what
 * clamd said is kept and told apart from a session that died unanswered,
 * as a reset after clamd's last words on a plain socket is (conn.c). A
 * reused session's command would otherwise be retried as never answered.
 */
static void test_broken_after_partial_reply(void **state)
{
	struct srv_opts o = tls_server(pki.srv);
	const char *line = NULL;
	size_t len = 0;
	char why[256];

	o.partial_then_broken = true;
	new_tls(NULL, false);
	start_server(&o);
	assert_int_equal(handshake(NAME, WAIT_MS, NULL, why, sizeof(why)), 0);
	assert_int_equal(cdp_conn_read(fx.conn, 64, cdp_deadline(WAIT_MS), NULL,
				       &line, &len),
			 -EPROTO);
	assert_non_null(line);
	assert_int_equal(len, strlen(PARTIAL));
	assert_memory_equal(line, PARTIAL, len);
	finish();
	assert_int_equal(fx.srv.answered, 1);
}

/*
 * A server requiring a client certificate.  In TLS 1.2 it refuses us
 * within the handshake; in TLS 1.3 the client's handshake is over before
 * the server has looked at the certificate, so the refusal (an alert)
 * comes with the first read, as a broken connection.
 */
static void test_client_cert(void **state)
{
	struct srv_opts o = tls_server(pki.srv);
	const char *line = NULL;
	size_t len = 0;
	char why[256];

	o.want_client_cert = true;

	/* without one */
	new_tls(NULL, false);
	start_server(&o);
	assert_int_equal(handshake(NAME, WAIT_MS, NULL, why, sizeof(why)), 0);
	assert_int_equal(SSL_version(fx.conn->ssl), TLS1_3_VERSION);
	assert_int_equal(cdp_conn_read(fx.conn, 64, cdp_deadline(WAIT_MS), NULL,
				       &line, &len),
			 -ECONNRESET);
	finish();
	assert_false(fx.srv.accepted);
	assert_non_null(strstr(fx.srv.err, "certificate"));

	o.max_version = TLS1_2_VERSION;
	assert_int_equal(attempt(&o, NAME, why, sizeof(why)), -EPROTO);
	assert_true(why[0] != '\0');
	assert_non_null(strstr(why, NAME));
	assert_false(fx.srv.accepted);

	/* with one, in both versions */
	new_tls(NULL, true);
	for (int v = 0; v < 2; v++) {
		o.max_version = v ? TLS1_2_VERSION : 0;
		start_server(&o);
		assert_int_equal(
			handshake(NAME, WAIT_MS, NULL, why, sizeof(why)), 0);
		assert_int_equal(SSL_version(fx.conn->ssl),
				 v ? TLS1_2_VERSION : TLS1_3_VERSION);
		ping();
		finish();
		assert_true(fx.srv.accepted);
		assert_string_equal(fx.srv.client_cn, "clamfs client");
		assert_int_equal(fx.srv.answered, 1);
	}
}

static void test_new_errors(void **state)
{
	struct cdp_config cfg;
	struct cdp_tls *t = NULL;
	char err[256];
	const char *reason;

	cdp_config_init(&cfg);
	/* no CA: refused, never "trust whoever answers" */
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "clamd_tls_ca"));
	cfg.tls_ca = "";
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "clamd_tls_ca"));
	/* an unreadable CA */
	cfg.tls_ca = "/nonexistent/ca.pem";
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "/nonexistent/ca.pem"));
	/* a certificate without its key */
	cfg.tls_ca = pki.ca_path;
	cfg.tls_cert = pki.client_crt_path;
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	assert_true(err[0] != '\0');
	/* a key that does not match the certificate */
	cfg.tls_key = pki.other_key_path;
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	assert_non_null(strstr(err, "clamd_tls_key"));
	assert_non_null(strstr(err, pki.other_key_path));
	reason = strstr(err, pki.other_key_path) + strlen(pki.other_key_path);
	assert_true(strncmp(reason, ": ", 2) == 0 && reason[2] != '\0');
	/* the matching key */
	cfg.tls_key = pki.client_key_path;
	err[0] = '\0';
	assert_int_equal(cdp_tls_new(&cfg, &t, err, sizeof(err)), 0);
	assert_non_null(t);
	cdp_tls_free(t);
}

/* A server that never answers the ClientHello: the cancel ends the wait. */
static void test_cancel(void **state)
{
	struct srv_opts o = {.mode = SRV_SILENT};
	char why[256];
	int64_t t0, took;

	new_tls(NULL, false);
	fx.cancel = cdp_cancel_new();
	assert_non_null(fx.cancel);
	/* the server triggers it once the ClientHello is there */
	o.trigger = fx.cancel;
	start_server(&o);
	t0 = cdp_now_ms();
	assert_int_equal(handshake(NAME, 60000, fx.cancel, why, sizeof(why)),
			 -ECANCELED);
	took = cdp_now_ms() - t0;
	/* no reason: an EOF the trigger's shutdown() caused is no news */
	assert_string_equal(why, "");
	assert_null(fx.conn);
	finish();
	assert_true(fx.srv.hello);
	assert_true(cdp_cancel_triggered(fx.cancel));
	assert_true(took < 30000);

	/* triggered before: nothing is sent */
	o.trigger = NULL;
	start_server(&o);
	assert_int_equal(handshake(NAME, 60000, fx.cancel, why, sizeof(why)),
			 -ECANCELED);
	finish();
	assert_false(fx.srv.hello);
}

/* The same server without a cancel: the deadline ends the wait. */
static void test_deadline(void **state)
{
	struct srv_opts o = {.mode = SRV_SILENT};
	char why[256];
	int64_t t0, took;

	new_tls(NULL, false);
	start_server(&o);
	t0 = cdp_now_ms();
	assert_int_equal(handshake(NAME, 200, NULL, why, sizeof(why)),
			 -ETIMEDOUT);
	took = cdp_now_ms() - t0;
	finish();
	assert_true(fx.srv.hello);
	assert_true(took >= 200 && took < 30000);
}

/* A peer that hangs up in the handshake: a reset, with a reason. */
static void test_hangup(void **state)
{
	struct srv_opts o = {.mode = SRV_HANGUP};
	char why[256] = "";

	new_tls(NULL, false);
	start_server(&o);
	assert_int_equal(handshake(NAME, WAIT_MS, NULL, why, sizeof(why)),
			 -ECONNRESET);
	finish();
	assert_true(fx.srv.hello);
	assert_non_null(strstr(why, "closed"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_round_trip),  T(test_wrong_name),
		T(test_other_ca),    T(test_expired),
		T(test_client_cert), T(test_new_errors),
		T(test_cancel),	     T(test_deadline),
		T(test_hangup),	     T(test_broken_after_partial_reply),
	};

	/* the server thread writes to a socket the client may have closed */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
