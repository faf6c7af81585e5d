// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The command codec: one command sent on one connection and its reply
 * read into a result (internal.h, cdp_cmd_run). FILDES passes the
 * descriptor, INSTREAM sends chunks, a session's replies carry the
 * command's number. The pool (pool.c) picks the connection and keeps it
 * or not; nothing here retries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static bool is_scan(enum cdp_cmd_kind k)
{
	return k <= CDP_CMD_SCAN;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Stream @cmd's data as INSTREAM chunks.  0 when everything including the
 * terminating empty chunk went out; -EALREADY/-EPIPE/... when clamd stopped
 * reading (its reply tells why); other errors fill @res. */
static int send_stream(const struct cdp_cmd_env *env, struct cdp_conn *conn,
		       const struct cdp_cmd *cmd, int64_t deadline,
		       struct cdp_cancel *cancel, struct cdp_result *res)
{
	size_t csize = env->chunk_size;
	char *chunk;
	off_t off = 0;
	struct stat st;
	int rc = 0;

	/* Small files are the common case: a full-size chunk buffer would
	 * cost an mmap and munmap per scan.  The size is only a hint; the
	 * loop reads until EOF whatever it is. */
	if (cmd->kind == CDP_CMD_INSTREAM_BUF && cmd->len < csize)
		csize = cmd->len < 4096 ? 4096 : cmd->len;
	else if (cmd->kind == CDP_CMD_INSTREAM_FD && fstat(cmd->fd, &st) == 0 &&
		 S_ISREG(st.st_mode) && (uint64_t)st.st_size < csize)
		csize = st.st_size < 4096 ? 4096 : (size_t)st.st_size;
	chunk = malloc(csize + 4);

	if (!chunk) {
		cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		size_t n;
		uint32_t be;

		if (cmd->kind == CDP_CMD_INSTREAM_FD) {
			ssize_t got = pread(cmd->fd, chunk + 4, csize, off);

			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				rc = -errno;
				cdp_res_error(res, CDP_ERR_LOCAL, -rc,
					      "cannot read the file: %s",
					      strerror(-rc));
				conn->broken = true;
				goto out;
			}
			n = (size_t)got;
		} else {
			n = cmd->len - (size_t)off;
			if (n > csize)
				n = csize;
			memcpy(chunk + 4, (const char *)cmd->buf + off, n);
		}
		be = htonl((uint32_t)n);
		memcpy(chunk, &be, 4);
		rc = cdp_conn_send(
			conn, chunk, n + 4,
			min64(deadline, cdp_deadline(env->io_timeout_ms)),
			cancel, true);
		if (rc || n == 0)
			break;
		off += (off_t)n;
	}
out:
	free(chunk);
	return rc;
}

/* clamd bare errors may arrive without a session number. */
static bool bare_error(const char *s, size_t len, struct cdp_result *res)
{
	struct cdp_result tmp;

	if (cdp_reply_parse(s, len, NULL, &tmp) == 0 &&
	    tmp.cat == CDP_ERR_CLAMD && memchr(s, ':', len) == NULL) {
		*res = tmp;
		return true;
	}
	return false;
}

/* The command met a reused session that clamd had closed. */
static int dead_session(const struct cdp_cmd_env *env, struct cdp_result *res)
{
	cdp_res_error(res, CDP_ERR_CONNECT, ECONNRESET,
		      "clamd at %s had closed the reused session (restarted "
		      "or timed it out)",
		      env->shown);
	return -ESTALE;
}

/*
 * Read one reply and strip the session number.  Returns 0 with @line and
 * @len; else @res holds the outcome and the return is -ESTALE when a reused
 * session turned out to be dead before answering, another negative errno
 * otherwise.
 */
static int read_reply(const struct cdp_cmd_env *env, struct cdp_conn *conn,
		      bool reused, unsigned id, size_t max, int64_t deadline,
		      struct cdp_cancel *cancel, const char **line, size_t *len,
		      struct cdp_result *res)
{
	unsigned got;
	size_t skip;
	int rc;

	rc = cdp_conn_read(conn, max + (conn->session ? 16 : 0), deadline,
			   cancel, line, len);
	/* closed before a byte of reply; reset when our command sat unread */
	if ((rc == -ENODATA || rc == -ECONNRESET) && reused) {
		conn->broken = true;
		return dead_session(env, res);
	}
	if (rc == -EPROTO) {
		conn->broken = true;
		if (bare_error(*line, *len, res)) {
			/* clamd timed the idle session out just as we
			 * started using it. */
			if (reused &&
			    strcmp(res->text, "COMMAND READ TIMED OUT") == 0)
				return dead_session(env, res);
			return -EPROTO;
		}
		cdp_res_io(res, rc, "reading clamd's reply");
		return rc;
	}
	if (rc) {
		conn->broken = true;
		cdp_res_io(res, rc, "reading clamd's reply");
		return rc;
	}
	if (!conn->session)
		return 0;
	if (cdp_reply_split_id(*line, *len, &got, &skip)) {
		conn->broken = true;
		if (bare_error(*line, *len, res))
			return -EPROTO;
		cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
			      "session reply without a command number");
		return -EPROTO;
	}
	if (got != id) {
		conn->broken = true;
		cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
			      "reply for command %u, expected %u", got, id);
		return -EPROTO;
	}
	*line += skip;
	*len -= skip;
	return 0;
}

/* SCAN may answer with several lines (a directory, a device): the worst
 * one wins, infected before error before clean. */
static void read_scan_lines(struct cdp_conn *conn, const struct cdp_cmd *cmd,
			    int64_t deadline, struct cdp_cancel *cancel,
			    struct cdp_result *res)
{
	struct cdp_result *tmp = malloc(sizeof(*tmp));
	size_t plen = strlen(cmd->path);
	bool any = false;

	if (!tmp) {
		cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM, "out of memory");
		return;
	}
	for (;;) {
		const char *line;
		size_t len;
		int rc = cdp_conn_read(conn, CDP_TEXT_MAX, deadline, cancel,
				       &line, &len);

		if (rc == -ENODATA && any)
			break;
		if (rc) {
			if (rc == -EPROTO && bare_error(line, len, tmp))
				*res = *tmp;
			else
				cdp_res_io(res, rc, "reading clamd's reply");
			break;
		}
		cdp_reply_parse(line, len, NULL, tmp);
		if (tmp->verdict == CDP_ERROR && tmp->cat == CDP_ERR_CLAMD &&
		    strncmp(tmp->text, cmd->path, plen) == 0 &&
		    strncmp(tmp->text + plen, ": ", 2) == 0)
			memmove(tmp->text, tmp->text + plen + 2,
				strlen(tmp->text + plen + 2) + 1);
		if (!any || tmp->verdict == CDP_INFECTED ||
		    (tmp->verdict == CDP_ERROR && res->verdict == CDP_CLEAN))
			*res = *tmp;
		any = true;
		if (res->verdict == CDP_INFECTED)
			break;
	}
	free(tmp);
}

int cdp_cmd_run(const struct cdp_cmd_env *env, struct cdp_conn *conn,
		bool reused, const struct cdp_cmd *cmd, int64_t deadline,
		struct cdp_cancel *cancel, struct cdp_result *res)
{
	static const char *const words[] = {
		[CDP_CMD_FILDES] = "zFILDES",
		[CDP_CMD_INSTREAM_FD] = "zINSTREAM",
		[CDP_CMD_INSTREAM_BUF] = "zINSTREAM",
		[CDP_CMD_SCAN] = "zSCAN ",
		[CDP_CMD_PING] = "zPING",
		[CDP_CMD_VERSION] = "zVERSION",
		[CDP_CMD_STATS] = "zSTATS",
	};
	int64_t iodl = min64(deadline, cdp_deadline(env->io_timeout_ms));
	int64_t rdl = is_scan(cmd->kind) ? deadline : iodl;
	unsigned id = conn->session ? conn->next_id++ : 0;
	bool sent_all = true;
	char *text = NULL;
	const char *line;
	size_t len, wlen;
	int rc, ret = 0;

	rc = cdp_cancel_attach(cancel, conn->fd);
	if (rc)
		goto io_error;

	if (cmd->kind == CDP_CMD_SCAN) {
		size_t plen = strlen(cmd->path);

		wlen = 6 + plen + 1;
		text = malloc(wlen);
		if (!text) {
			rc = -ENOMEM;
			cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM,
				      "out of memory");
			conn->broken = true;
			goto out;
		}
		memcpy(text, "zSCAN ", 6);
		memcpy(text + 6, cmd->path, plen + 1);
		rc = cdp_conn_send(conn, text, wlen, iodl, cancel, false);
	} else {
		rc = cdp_conn_send(conn, words[cmd->kind],
				   strlen(words[cmd->kind]) + 1, iodl, cancel,
				   false);
	}
	if (!rc && cmd->kind == CDP_CMD_FILDES)
		rc = cdp_conn_send_fd(conn, cmd->fd, iodl, cancel);
	if (!rc && (cmd->kind == CDP_CMD_INSTREAM_FD ||
		    cmd->kind == CDP_CMD_INSTREAM_BUF)) {
		rc = send_stream(env, conn, cmd, deadline, cancel, res);
		if (rc && res->cat == CDP_ERR_LOCAL)
			goto out;
	}
	if (rc == -ETIMEDOUT || rc == -ECANCELED)
		goto io_error;
	if (rc) {
		/* Broken pipe or early reply: clamd may have said why before
		 * hanging up (INSTREAM size limit), so read on. */
		sent_all = false;
		conn->broken = true;
	}

	if (cmd->kind == CDP_CMD_SCAN) {
		read_scan_lines(conn, cmd, deadline, cancel, res);
		conn->broken = true;
		goto out;
	}
	rc = read_reply(env, conn, reused, id,
			cmd->kind == CDP_CMD_STATS ? CDP_STATS_MAX
						   : CDP_TEXT_MAX,
			rdl, cancel, &line, &len, res);
	if (rc == -ESTALE) {
		ret = rc;
		goto out;
	}
	if (rc) {
		if (!sent_all && res->cat == CDP_ERR_PROTOCOL)
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPIPE,
				      "clamd hung up before the command was "
				      "sent, and gave no reason");
		goto out;
	}

	switch (cmd->kind) {
	case CDP_CMD_FILDES:
	case CDP_CMD_INSTREAM_FD:
	case CDP_CMD_INSTREAM_BUF:
		cdp_reply_parse(line, len,
				cmd->kind == CDP_CMD_FILDES ? "fd[]" : "stream",
				res);
		if (!sent_all && res->verdict == CDP_CLEAN)
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "clamd answered OK to a stream it did "
				      "not fully receive");
		break;
	case CDP_CMD_PING:
		if (len == 4 && memcmp(line, "PONG", 4) == 0)
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "PONG");
		else if (!bare_error(line, len, res))
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "PING: unexpected reply");
		break;
	case CDP_CMD_VERSION:
		if (cdp_version_parse(line, len, cmd->ver) == 0)
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "%.*s",
				    (int)len, line);
		else if (!bare_error(line, len, res))
			cdp_res_error(res, CDP_ERR_PROTOCOL, EPROTO,
				      "VERSION: unparseable reply");
		break;
	case CDP_CMD_STATS:
		if (bare_error(line, len, res))
			break;
		*cmd->stats = strndup(line, len);
		if (!*cmd->stats)
			cdp_res_error(res, CDP_ERR_LOCAL, ENOMEM,
				      "out of memory");
		else
			cdp_res_set(res, CDP_CLEAN, CDP_ERR_NONE, 0, "STATS");
		break;
	case CDP_CMD_SCAN:
		break;
	}
	goto out;

io_error:
	conn->broken = true;
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN) {
		if (reused) {
			ret = dead_session(env, res);
			goto out;
		}
	}
	cdp_res_io(res, rc, "sending to clamd");
out:
	cdp_cancel_detach(cancel);
	free(text);
	return ret;
}
