/*
 * Does a libfabric provider (shm by default, argv[1] otherwise) match tagged
 * messages the way an MPI library needs it to?  Two endpoints in one process
 * (a fresh pair, in a fresh domain, for each check, so one check's leftovers
 * cannot decide another's), manual progress, every wait bounded (a match that
 * never happens is reported as "timed out", not a hang).
 *
 *   ignore_after_exact     an unexpected message taken by a receive with ignore
 *                          bits, after receives without (MPI_Ssend's bit, ANY_TAG)
 *   exact_after_any        two unexpected messages, an exact receive for the
 *                          second, after a receive that ignored every bit: the
 *                          right message (tag and payload) must be taken
 *   peek                   FI_PEEK finds an unexpected message without taking it,
 *                          and reports FI_ENOMSG for one that is not there
 *   peek_claim             FI_PEEK|FI_CLAIM then FI_CLAIM receives it; a later
 *                          receive of the same tag must not get it again
 *   remote_cq_data         fi_tsenddata's data arrives with FI_REMOTE_CQ_DATA
 *   truncation_posted      a message longer than the posted receive: an FI_ETRUNC
 *   truncation_unexpected  error entry with the tag and the remote CQ data (what
 *                          MPI_Status is made of), for a receive posted first and
 *                          for one posted after the message arrived; then the
 *                          endpoint still works
 *
 * Prints one "PASS name" / "FAIL name: why" line per check and
 * "N passed, M failed"; exits 1 when a check failed, 2 when setup failed.
 */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct side {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t peer;
};

static struct fi_info *info;
static struct side a, b; /* a sends, b receives */
static int passed, failed;
/* Operation contexts (FI_CONTEXT mode: the provider may use the memory until the
 * operation completes), static so none dies while its operation is pending. */
static struct fi_context recv_ctx, extra_ctx, send_ctx;

#define SETUP(call)                                                            \
	do {                                                                   \
		int rc_ = (int)(call);                                         \
		if (rc_) {                                                     \
			printf("setup: %s: %s\n", #call, fi_strerror(-rc_));   \
			exit(2);                                               \
		}                                                              \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void open_side(struct side *s)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	/* A fabric per side: lnx (2.1) cannot open a second domain on one fabric. */
	SETUP(fi_fabric(info->fabric_attr, &s->fabric, NULL));
	SETUP(fi_domain(s->fabric, info, &s->domain, NULL));
	SETUP(fi_endpoint(s->domain, info, &s->ep, NULL));
	SETUP(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL));
	SETUP(fi_av_open(s->domain, &av_attr, &s->av, NULL));
	SETUP(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	SETUP(fi_ep_bind(s->ep, &s->av->fid, 0));
	SETUP(fi_enable(s->ep));
}

static void close_side(struct side *s)
{
	fi_close(&s->ep->fid);
	fi_close(&s->av->fid);
	fi_close(&s->cq->fid);
	fi_close(&s->domain->fid);
	fi_close(&s->fabric->fid);
	memset(s, 0, sizeof(*s));
}

static void connect_to(struct side *from, struct side *to)
{
	char name[4096]; /* lnx's address wraps those of the providers it links */
	size_t len = sizeof(name);

	SETUP(fi_getname(&to->ep->fid, name, &len));
	if (fi_av_insert(from->av, name, 1, &from->peer, 0, NULL) != 1) {
		printf("setup: fi_av_insert failed\n");
		exit(2);
	}
}

/* Drives both endpoints; 1 with *out filled when b's CQ has an entry, -err for
 * an error entry (its err), 0 after `seconds` without one. */
static int wait_b(struct fi_cq_tagged_entry *out, double seconds)
{
	double end = now() + seconds;
	struct fi_cq_tagged_entry scratch;

	do {
		fi_cq_read(a.cq, &scratch, 1); /* a's progress, send completions */
		ssize_t n = fi_cq_read(b.cq, out, 1);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(b.cq, &err, 0);
			return -err.err;
		}
	} while (now() < end);
	return 0;
}

/* Lets the receiver see what has been sent without taking it (unexpected). */
static void settle(void)
{
	struct fi_cq_tagged_entry e;
	int rc = wait_b(&e, 0.05);
	if (rc != 0)
		printf("note: unexpected completion while settling (%d)\n", rc);
}

static int send_tag(uint64_t tag, uint32_t payload)
{
	ssize_t rc;
	double end = now() + 2;
	do {
		rc = fi_tinject(a.ep, &payload, sizeof(payload), a.peer, tag);
		if (rc == -FI_EAGAIN) {
			struct fi_cq_tagged_entry e;
			fi_cq_read(a.cq, &e, 1);
			fi_cq_read(b.cq, &e, 0);
		}
	} while (rc == -FI_EAGAIN && now() < end);
	return (int)rc;
}

static void result(const char *name, const char *why)
{
	if (why) {
		printf("FAIL %s: %s\n", name, why);
		failed++;
	} else {
		printf("PASS %s\n", name);
		passed++;
	}
}

/* Posts a receive and waits for it: NULL when it completed with `want_tag`
 * and `want_payload`, else why not. */
static const char *recv_expect(uint64_t tag, uint64_t ignore, uint64_t want_tag,
			       uint32_t want_payload)
{
	static char why[160];
	uint32_t buf = 0;
	struct fi_cq_tagged_entry e;
	int rc;

	if (fi_trecv(b.ep, &buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, tag, ignore, &recv_ctx))
		return "fi_trecv failed";
	rc = wait_b(&e, 2);
	if (rc == 0)
		return "timed out: the receive never matched the unexpected message";
	if (rc < 0) {
		snprintf(why, sizeof(why), "error completion %s", fi_strerror(-rc));
		return why;
	}
	if (e.tag != want_tag || buf != want_payload) {
		snprintf(why, sizeof(why),
			 "took tag 0x%llx payload %u, wanted tag 0x%llx payload %u",
			 (unsigned long long)e.tag, buf,
			 (unsigned long long)want_tag, want_payload);
		return why;
	}
	return NULL;
}

static void ignore_after_exact(void)
{
	const char *why = NULL;
	for (uint32_t round = 0; round < 8 && !why; round++) {
		/* an expected exact receive */
		uint32_t buf = 0;
		struct fi_cq_tagged_entry e;
		fi_trecv(b.ep, &buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x1, 0, &recv_ctx);
		send_tag(0x1, round);
		if (wait_b(&e, 2) != 1)
			why = "expected exact receive did not complete";
		/* then an unexpected message taken with an ignore bit (0x100) */
		if (!why) {
			send_tag(0x142, 1000 + round);
			settle();
			why = recv_expect(0x42, 0x100, 0x142, 1000 + round);
		}
	}
	result("ignore_after_exact", why);
}

static void exact_after_any(void)
{
	const char *why = NULL;
	for (uint32_t round = 0; round < 8 && !why; round++) {
		uint32_t buf = 0;
		struct fi_cq_tagged_entry e;
		fi_trecv(b.ep, &buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0, ~0ULL, &recv_ctx);
		send_tag(0x9, round);
		if (wait_b(&e, 2) != 1)
			why = "expected any-tag receive did not complete";
		if (!why) {
			send_tag(0x20, 2000 + round);
			send_tag(0x21, 3000 + round);
			settle();
			why = recv_expect(0x21, 0, 0x21, 3000 + round);
			if (!why)
				why = recv_expect(0x20, 0, 0x20, 2000 + round);
		}
	}
	result("exact_after_any", why);
}

static int trecvmsg(uint64_t tag, void *buf, size_t len, struct fi_context *ctx,
		    uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	void *no_desc = NULL; /* lnx reads desc[0] even when nothing is registered */
	struct fi_msg_tagged msg = {
		.msg_iov = buf ? &iov : NULL,
		.desc = &no_desc,
		.iov_count = buf ? 1 : 0,
		.addr = FI_ADDR_UNSPEC,
		.tag = tag,
		.ignore = 0,
		.context = ctx,
	};
	return (int)fi_trecvmsg(b.ep, &msg, flags | FI_COMPLETION);
}

static void peek(void)
{
	static char why_buf[160];
	const char *why = NULL;
	static struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	int rc;

	send_tag(0x77, 77);
	settle();
	if (trecvmsg(0x77, NULL, 0, &ctx, FI_PEEK))
		why = "fi_trecvmsg(FI_PEEK) refused";
	else if ((rc = wait_b(&e, 2)) != 1) {
		snprintf(why_buf, sizeof(why_buf), "FI_PEEK of a waiting message: %s",
			 rc == 0 ? "no completion" : fi_strerror(-rc));
		why = why_buf;
	} else if (e.tag != 0x77 || e.len != sizeof(uint32_t)) {
		why = "FI_PEEK reported the wrong tag or length";
	}
	/* Peeking must not have taken it: a receive still gets it. */
	if (!why)
		why = recv_expect(0x77, 0, 0x77, 77);
	if (!why) {
		if (trecvmsg(0x78, NULL, 0, &ctx, FI_PEEK))
			why = "fi_trecvmsg(FI_PEEK) refused";
		else if ((rc = wait_b(&e, 2)) != -FI_ENOMSG) {
			snprintf(why_buf, sizeof(why_buf),
				 "FI_PEEK of a missing message: %s, not FI_ENOMSG",
				 rc == 0 ? "no completion" : rc > 0 ? "a completion" : fi_strerror(-rc));
			why = why_buf;
		}
	}
	result("peek", why);
}

static void peek_claim(void)
{
	static char why_buf[160];
	const char *why = NULL;
	static struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	uint32_t buf = 0;
	int rc;

	send_tag(0x55, 55);
	settle();
	if (trecvmsg(0x55, NULL, 0, &ctx, FI_PEEK | FI_CLAIM))
		why = "fi_trecvmsg(FI_PEEK|FI_CLAIM) refused";
	else if ((rc = wait_b(&e, 2)) != 1) {
		snprintf(why_buf, sizeof(why_buf), "FI_PEEK|FI_CLAIM: %s",
			 rc == 0 ? "no completion" : fi_strerror(-rc));
		why = why_buf;
	}
	/* Claimed: an ordinary receive of the same tag must not take it. */
	static uint32_t other; /* its receive may outlive a failed check */
	other = 0;
	if (!why) {
		fi_trecv(b.ep, &other, sizeof(other), NULL, FI_ADDR_UNSPEC, 0x55, 0, &extra_ctx);
		if ((rc = wait_b(&e, 0.2)) != 0)
			why = "a receive took the claimed message";
	}
	if (!why) {
		if (trecvmsg(0x55, &buf, sizeof(buf), &ctx, FI_CLAIM))
			why = "fi_trecvmsg(FI_CLAIM) refused";
		else if ((rc = wait_b(&e, 2)) != 1)
			why = "FI_CLAIM receive did not complete";
		else if (buf != 55)
			why = "FI_CLAIM receive got the wrong payload";
	}
	/* Let the ordinary receive posted above finish before the next check. */
	if (!why || other == 0) {
		send_tag(0x55, 56);
		if (wait_b(&e, 2) != 1 && !why)
			why = "the ordinary receive never completed";
	}
	result("peek_claim", why);
}

static void remote_cq_data(void)
{
	static char why_buf[160];
	const char *why = NULL;
	uint32_t payload = 5, buf = 0;
	struct fi_cq_tagged_entry e;
	ssize_t rc;

	if (info->domain_attr->cq_data_size < 4) {
		result("remote_cq_data", "the provider does not offer 4 bytes of FI_REMOTE_CQ_DATA");
		return;
	}
	fi_trecv(b.ep, &buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x33, 0, &recv_ctx);
	double end = now() + 2;
	do {
		rc = fi_tsenddata(a.ep, &payload, sizeof(payload), NULL, 0xdeadbeef, a.peer,
				  0x33, &send_ctx);
		if (rc == -FI_EAGAIN) {
			fi_cq_read(a.cq, &e, 0);
			fi_cq_read(b.cq, &e, 0);
		}
	} while (rc == -FI_EAGAIN && now() < end);
	if (rc) {
		snprintf(why_buf, sizeof(why_buf), "fi_tsenddata: %s", fi_strerror((int)-rc));
		why = why_buf;
	}
	else if (wait_b(&e, 2) != 1)
		why = "no receive completion";
	else if (!(e.flags & FI_REMOTE_CQ_DATA) || e.data != 0xdeadbeef) {
		snprintf(why_buf, sizeof(why_buf),
			 "the completion has%s FI_REMOTE_CQ_DATA and data 0x%llx, not 0xdeadbeef",
			 e.flags & FI_REMOTE_CQ_DATA ? "" : " no",
			 (unsigned long long)e.data);
		why = why_buf;
	}
	else if (buf != 5)
		why = "wrong payload";
	result("remote_cq_data", why);
}

/* A 64-byte message with remote CQ data into a 4-byte receive. */
static void truncation(const char *name, int unexpected)
{
	static char why_buf[200];
	static uint8_t big[64];
	static uint32_t small;
	const char *why = NULL;
	struct fi_cq_tagged_entry e;
	ssize_t rc;
	double end;

	memset(big, 0xab, sizeof(big));
	if (!unexpected)
		fi_trecv(b.ep, &small, sizeof(small), NULL, FI_ADDR_UNSPEC, 0x44, 0, &recv_ctx);
	end = now() + 2;
	do {
		rc = fi_tsenddata(a.ep, big, sizeof(big), NULL, 0xfeed, a.peer, 0x44, &send_ctx);
		if (rc == -FI_EAGAIN) {
			fi_cq_read(a.cq, &e, 0);
			fi_cq_read(b.cq, &e, 0);
		}
	} while (rc == -FI_EAGAIN && now() < end);
	if (rc) {
		snprintf(why_buf, sizeof(why_buf), "fi_tsenddata: %s", fi_strerror((int)-rc));
		result(name, why_buf);
		return;
	}
	if (unexpected) {
		settle();
		fi_trecv(b.ep, &small, sizeof(small), NULL, FI_ADDR_UNSPEC, 0x44, 0, &recv_ctx);
	}
	end = now() + 2;
	for (;;) {
		fi_cq_read(a.cq, &e, 1);
		rc = fi_cq_read(b.cq, &e, 1);
		if (rc != -FI_EAGAIN || now() > end)
			break;
	}
	if (rc == 1) {
		why = "the receive completed without an error";
	} else if (rc != -FI_EAVAIL) {
		why = "no completion for the truncated receive";
	} else {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		fi_cq_readerr(b.cq, &err, 0);
		/* MPI needs the tag and the remote CQ data (rofi carries the source in
		 * it); olen and the flag are shown, not required (tcp;ofi_rxm reports
		 * neither for a posted receive). The sign of err is not checked
		 * either: 1.17's shm stores -FI_ETRUNC. */
		if ((err.err != FI_ETRUNC && err.err != -FI_ETRUNC) || err.tag != 0x44 ||
		    err.data != 0xfeed) {
			snprintf(why_buf, sizeof(why_buf),
				 "error entry err %d (%s) tag 0x%llx olen %zu flags%s FI_REMOTE_CQ_DATA "
				 "data 0x%llx; wanted FI_ETRUNC, tag 0x44, data 0xfeed",
				 err.err, fi_strerror(err.err < 0 ? -err.err : err.err),
				 (unsigned long long)err.tag, err.olen,
				 err.flags & FI_REMOTE_CQ_DATA ? "" : " without",
				 (unsigned long long)err.data);
			why = why_buf;
		}
	}
	/* The endpoint still carries messages. */
	if (!why && send_tag(0x45, 45) != 0)
		why = "the send after the truncation failed";
	if (!why)
		why = recv_expect(0x45, 0, 0x45, 45);
	result(name, why);
}

static void truncation_posted(void)
{
	truncation("truncation_posted", 0);
}

static void truncation_unexpected(void)
{
	truncation("truncation_unexpected", 1);
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	const char *prov = argc > 1 ? argv[1] : "shm";

	hints->caps = FI_TAGGED; /* remote CQ data: domain_attr->cq_data_size */
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	SETUP(fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0,
			 hints, &info));
	printf("libfabric %u.%u (headers %d.%d), provider %s\n", FI_MAJOR(fi_version()),
	       FI_MINOR(fi_version()), FI_MAJOR_VERSION, FI_MINOR_VERSION,
	       info->fabric_attr->prov_name);

	void (*checks[])(void) = { ignore_after_exact, exact_after_any, peek, peek_claim,
				   remote_cq_data, truncation_posted, truncation_unexpected };
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		open_side(&a);
		open_side(&b);
		connect_to(&a, &b);
		connect_to(&b, &a);
		checks[i]();
		close_side(&a);
		close_side(&b);
	}

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
