/* Calls rddp's libibverbs.so.1 the way an application compiled against
 * Debian's <infiniband/verbs.h> does, including verbs.h's static inline
 * functions that call through the context's ops table. Prints one line per
 * failed check and exits 1 if any failed; "ok" and 0 otherwise. Built and run
 * by tests/api/capi.rs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

/* Declared in rdma-core's <infiniband/driver.h>, which Debian does not ship
 * (ibv_devinfo imports it all the same). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static int failed;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAILED line %d: %s (errno %d)\n", __LINE__, \
			       #cond, errno);                              \
			failed = 1;                                        \
		}                                                          \
	} while (0)

int main(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list != NULL);
	if (!list)
		return 1;
	CHECK(n == 1);
	CHECK(list[1] == NULL);
	struct ibv_device *dev = list[0];
	CHECK(strcmp(ibv_get_device_name(dev), "rddp0") == 0);
	CHECK(dev->node_type == IBV_NODE_RNIC);
	CHECK(dev->transport_type == IBV_TRANSPORT_IWARP);
	CHECK(ibv_get_device_guid(dev) == htobe64(0x0272646470000001ULL));
	CHECK(ibv_get_device_index(dev) == 0);

	char buf[64];
	CHECK(ibv_read_sysfs_file(dev->ibdev_path, "node_type", buf, sizeof buf) == 7);
	CHECK(strcmp(buf, "4: RNIC") == 0);
	errno = 0;
	CHECK(ibv_read_sysfs_file(dev->ibdev_path, "board_id", buf, sizeof buf) == -1);
	CHECK(errno == ENOENT);

	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx != NULL);
	if (!ctx)
		return 1;
	CHECK(ctx->device == dev);
	CHECK(ctx->num_comp_vectors == 1);
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0); /* a real fd, with no event pending */
	/* As with the kernel's: non-blocking once the application says so. */
	int fl = fcntl(ctx->async_fd, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK));
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_async_event aev;
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &aev) == -1 && errno == EAGAIN);

	/* verbs.h's inline falls back to the exported ibv_query_device. */
	struct ibv_device_attr_ex ax;
	memset(&ax, 0xff, sizeof ax);
	CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0);
	CHECK(ax.orig_attr.phys_port_cnt == 1);
	CHECK(ax.orig_attr.vendor_id == 0x726464);
	CHECK(ax.orig_attr.max_qp_rd_atom == 128);
	CHECK(ax.device_cap_flags_ex == 0); /* zeroed by the inline fallback */

	struct ibv_port_attr pa;
	memset(&pa, 0xff, sizeof pa);
	CHECK(ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(pa.state == IBV_PORT_ACTIVE);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
	CHECK(pa.gid_tbl_len == 1);
	CHECK(pa.flags == 0 && pa.port_cap_flags2 == 0);
	CHECK(ibv_query_port(ctx, 2, &pa) == EINVAL);

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	CHECK(gid.raw[0] == 0xfe && gid.raw[1] == 0x80);
	CHECK(gid.global.interface_id == htobe64(0x0272646470000001ULL));
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == -1);
	__be16 pkey = 0;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == 0xffff);
	CHECK(ibv_get_pkey_index(ctx, 1, 0xffff) == 0);

	/* What iWARP has not (address handles: UD) refuses with EOPNOTSUPP;
	 * an SRQ without a PD is EINVAL. */
	errno = 0;
	CHECK(ibv_create_ah(NULL, NULL) == NULL && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(ibv_create_srq(NULL, NULL) == NULL && errno == EINVAL);

	/* Protection domains. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL);
	if (!pd)
		return 1;
	CHECK(pd->context == ctx);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	CHECK(pd2 != NULL && pd2 != pd && pd2->handle != pd->handle);
	CHECK(ibv_dealloc_pd(pd2) == 0);
	CHECK(ibv_dealloc_pd(pd2) == EINVAL); /* no longer live: refused */

	/* Memory regions over the application's memory: TO = address, lkey =
	 * rkey, the PD busy while one exists. */
	static char heap_like[3 * 4096];
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr = ibv_reg_mr(pd, heap_like + 5, 8000,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					       IBV_ACCESS_REMOTE_READ);
	CHECK(mr != NULL);
	if (!mr)
		return 1;
	CHECK(mr->context == ctx && mr->pd == pd);
	CHECK(mr->addr == heap_like + 5 && mr->length == 8000);
	CHECK(mr->lkey == mr->rkey && mr->lkey != 0 && mr->handle == mr->lkey >> 8);
	static const char rodata[] = "read-only memory, registered for remote reads";
	struct ibv_mr *ro = ibv_reg_mr(pd, (void *)rodata, sizeof rodata, IBV_ACCESS_REMOTE_READ);
	CHECK(ro != NULL && ro->lkey != mr->lkey && ro->addr == rodata);
	/* A variable access with an optional flag goes through
	 * ibv_reg_mr_iova2 (verbs.h's macro); the flag is accepted. */
	int optional = rw | IBV_ACCESS_RELAXED_ORDERING;
	struct ibv_mr *relaxed = ibv_reg_mr(pd, buf, sizeof buf, optional);
	CHECK(relaxed != NULL && relaxed->addr == buf);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t iova = 0x100000 + (uintptr_t)buf % page;
	struct ibv_mr *at_iova = ibv_reg_mr_iova2(pd, buf, sizeof buf, iova, rw);
	CHECK(at_iova != NULL && at_iova->addr == buf);
	errno = 0;
	CHECK(ibv_dealloc_pd(pd) == EBUSY);

	/* Refusals, with the errno of the kernel's ibv_reg_mr. */
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_ZERO_BASED) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof buf, 1 << 15) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_ON_DEMAND) == NULL &&
	      errno == EOPNOTSUPP);
	errno = 0;
	CHECK(ibv_reg_mr_iova2(pd, buf, sizeof buf, iova + 1, rw) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(NULL, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL &&
	      errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd2, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL &&
	      errno == EINVAL); /* a PD no longer live */
	void *gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(gone != MAP_FAILED && munmap(gone, page) == 0);
	errno = 0;
	CHECK(ibv_reg_mr(pd, gone, page, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EFAULT);
	errno = 0;
	CHECK(ibv_reg_mr(pd, NULL, 64, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EFAULT);

	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dereg_mr(mr) == EINVAL);
	CHECK(ibv_dereg_mr(ro) == 0 && ibv_dereg_mr(relaxed) == 0 && ibv_dereg_mr(at_iova) == 0);
	CHECK(ibv_dereg_mr(NULL) == EINVAL);

	/* A completion channel: a real fd, blocking, never readable idle. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch != NULL);
	if (!ch)
		return 1;
	CHECK(ch->context == ctx && ch->fd >= 0 && ch->refcnt == 0);
	fl = fcntl(ch->fd, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK));

	/* CQs: cqe rounded up to a power of two (as siw), EINVAL outside
	 * 1..max_cqe, for a second completion vector or a foreign channel. */
	int tag;
	struct ibv_cq *cq = ibv_create_cq(ctx, 17, &tag, ch, 0);
	CHECK(cq != NULL);
	if (!cq)
		return 1;
	CHECK(cq->context == ctx && cq->channel == ch && cq->cq_context == &tag);
	CHECK(cq->cqe == 32);
	CHECK(cq->comp_events_completed == 0 && cq->async_events_completed == 0);
	CHECK(ch->refcnt == 1);
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0);
	struct ibv_cq *cq2 = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, 0);
	CHECK(cq2 != NULL && cq2->cqe == da.max_cqe && cq2->channel == NULL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, 16, NULL, ch, 1) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, 16, NULL, (struct ibv_comp_channel *)&tag, 0) == NULL &&
	      errno == EINVAL);
	CHECK(ch->refcnt == 1);

	/* The ops table: verbs.h's inlines call ctx->ops at fixed offsets.
	 * Armed (for any completion, then solicited only), nothing completes
	 * yet: no completion, no event, the fd stays unreadable. */
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	CHECK(ibv_req_notify_cq(cq, 1) == 0);
	CHECK(ibv_req_notify_cq(cq2, 0) == 0); /* no channel: nothing to wake */
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 0);
	CHECK(ibv_poll_cq(cq2, 4, wc) == 0);
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 100) == 0);
	/* ibv_get_cq_event reads the fd: EAGAIN once it is non-blocking. */
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN);
	ibv_ack_cq_events(cq, 0);

	/* Queue pairs: RC only, caps as the device advertises them. */
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.qp_context = &tag;
	ia.send_cq = cq;
	ia.recv_cq = cq2;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	struct ibv_qp_init_attr bad_ia = ia;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp != NULL);
	if (!qp)
		return 1;
	CHECK(qp->context == ctx && qp->pd == pd && qp->qp_context == &tag);
	CHECK(qp->send_cq == cq && qp->recv_cq == cq2 && qp->srq == NULL);
	CHECK(qp->state == IBV_QPS_RESET && qp->qp_type == IBV_QPT_RC && qp->qp_num != 0);
	CHECK(ia.cap.max_send_wr == 4 && ia.cap.max_recv_wr == 4);
	CHECK(ia.cap.max_send_sge == (uint32_t)da.max_sge && ia.cap.max_send_sge > 1);
	CHECK(ia.cap.max_recv_sge >= 1 && ia.cap.max_inline_data >= 64);
	struct ibv_qp_init_attr r = bad_ia;
	r.qp_type = IBV_QPT_UD;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EOPNOTSUPP);
	r.qp_type = IBV_QPT_UC;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EOPNOTSUPP);
	r.qp_type = 77;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	r = bad_ia;
	r.cap.max_send_wr = da.max_qp_wr + 1;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	r = bad_ia;
	r.cap.max_send_sge = da.max_sge + 1;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	r = bad_ia;
	r.cap.max_inline_data = 1 << 20;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	r = bad_ia;
	r.send_cq = NULL;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	r = bad_ia;
	r.srq = (struct ibv_srq *)&tag;
	errno = 0;
	CHECK(ibv_create_qp(pd, &r) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_qp(NULL, &bad_ia) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_qp(pd, NULL) == NULL && errno == EINVAL);
	/* A shared receive queue: its size written back and queried, its PD
	 * busy while it lives; too large, EINVAL. */
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	CHECK(srq != NULL && srq->pd == pd && si.attr.max_wr == 4);
	struct ibv_srq_attr sa;
	CHECK(srq && ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 4 && sa.max_sge == 1);
	si.attr.max_wr = 1 << 30;
	errno = 0;
	CHECK(ibv_create_srq(pd, &si) == NULL && errno == EINVAL);
	CHECK(srq && ibv_destroy_srq(srq) == 0);
	/* The PD and both CQs are busy while the QP lives. */
	CHECK(ibv_dealloc_pd(pd) == EBUSY);
	CHECK(ibv_destroy_cq(cq2) == EBUSY);

	/* Posting: nothing in RESET; the chain stops at the bad request. */
	static char qbuf[256];
	struct ibv_mr *qmr = ibv_reg_mr(pd, qbuf, sizeof qbuf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *qro = ibv_reg_mr(pd, qbuf, sizeof qbuf, 0);
	CHECK(qmr != NULL && qro != NULL);
	struct ibv_sge sge = { .addr = (uintptr_t)qbuf, .length = 64, .lkey = qmr->lkey };
	struct ibv_sge two[2] = { sge, sge };
	struct ibv_send_wr swr, *bad_swr = NULL;
	struct ibv_recv_wr rwr, *bad_rwr = NULL;
	memset(&swr, 0, sizeof swr);
	memset(&rwr, 0, sizeof rwr);
	rwr.wr_id = 7;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	swr.wr_id = 9;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == EINVAL && bad_rwr == &rwr);
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EINVAL && bad_swr == &swr);

	/* Attributes without a state change keep the QP as it is. */
	uint32_t qpn = qp->qp_num;
	struct ibv_qp_attr at;
	memset(&at, 0, sizeof at);
	at.max_rd_atomic = 4;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_MAX_QP_RD_ATOMIC) == 0);
	CHECK(qp->state == IBV_QPS_RESET && qp->qp_num == qpn);
	at.qp_state = IBV_QPS_RESET;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0);
	CHECK(qp->state == IBV_QPS_RESET && qp->qp_num == qpn);

	/* RESET -> INIT -> RTR (nothing more than INIT over iWARP); RTS needs a
	 * connection (the CM's). */
	struct ibv_qp_attr qa;
	memset(&qa, 0, sizeof qa);
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS) == 0);
	CHECK(qp->state == IBV_QPS_INIT);
	qa.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0);
	CHECK(qp->state == IBV_QPS_RTR);
	qa.qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == EINVAL);
	qa.qp_state = IBV_QPS_SQD;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == EOPNOTSUPP);
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 2;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
	qa.cur_qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CUR_STATE) == EINVAL);
	CHECK(qp->state == IBV_QPS_RTR);
	errno = 0;
	CHECK(ibv_modify_qp(NULL, &qa, IBV_QP_STATE) == EINVAL);

	struct ibv_qp_init_attr qi;
	memset(&qa, 0xff, sizeof qa);
	CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qi) == 0);
	CHECK(qa.qp_state == IBV_QPS_RTR && qa.cap.max_send_wr == 4);
	CHECK(qa.qp_access_flags == (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE));
	CHECK(qa.port_num == 1 && qa.max_rd_atomic == 4 && qa.max_dest_rd_atomic == 16);
	CHECK(qi.send_cq == cq && qi.recv_cq == cq2 && qi.qp_type == IBV_QPT_RC);
	CHECK(qi.qp_context == &tag && qi.cap.max_send_sge == ia.cap.max_send_sge);
	CHECK(qi.sq_sig_all == 0);

	/* In INIT receives are kept for the connection; sends are refused.
	 * A receive that fails its checks completes with LOC_PROT_ERR. */
	CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0);
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EINVAL && bad_swr == &swr);
	struct ibv_recv_wr rwr2 = rwr;
	rwr2.wr_id = 8;
	rwr2.sg_list = two;
	rwr2.num_sge = ia.cap.max_recv_sge + 1;
	rwr.next = &rwr2;
	bad_rwr = NULL;
	CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == EINVAL && bad_rwr == &rwr2);
	rwr.next = NULL;
	struct ibv_sge bad_sge = sge;
	bad_sge.lkey = qro->lkey; /* no local write */
	struct ibv_recv_wr rwr3 = { .wr_id = 11, .sg_list = &bad_sge, .num_sge = 1 };
	CHECK(ibv_post_recv(qp, &rwr3, &bad_rwr) == 0);
	bad_sge.lkey = qmr->lkey;
	bad_sge.addr = (uintptr_t)qbuf + 200; /* beyond the region */
	rwr3.wr_id = 12;
	CHECK(ibv_post_recv(qp, &rwr3, &bad_rwr) == 0);
	bad_sge.addr = (uintptr_t)qbuf;
	bad_sge.lkey = 0x12345678; /* no such MR */
	rwr3.wr_id = 13;
	CHECK(ibv_post_recv(qp, &rwr3, &bad_rwr) == 0);
	CHECK(ibv_poll_cq(cq2, 4, wc) == 3);
	for (int i = 0; i < 3; i++) {
		CHECK(wc[i].wr_id == (uint64_t)(11 + i) && wc[i].status == IBV_WC_LOC_PROT_ERR);
		CHECK(wc[i].opcode == IBV_WC_RECV && wc[i].qp_num == qp->qp_num);
	}
	/* Refused opcodes, whatever the state. */
	swr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EOPNOTSUPP && bad_swr == &swr);
	swr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EOPNOTSUPP && bad_swr == &swr);
	swr.opcode = IBV_WR_SEND_WITH_IMM;
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EOPNOTSUPP && bad_swr == &swr);
	swr.opcode = 99;
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == EINVAL && bad_swr == &swr);
	swr.opcode = IBV_WR_SEND;

	/* To ERR: the receives kept so far (two, the chain's first one was
	 * posted) complete as flushed, and so does
	 * what is posted afterwards. */
	memset(&qa, 0, sizeof qa);
	qa.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0);
	CHECK(qp->state == IBV_QPS_ERR);
	CHECK(ibv_poll_cq(cq2, 4, wc) == 2);
	for (int i = 0; i < 2; i++)
		CHECK(wc[i].wr_id == 7 && wc[i].status == IBV_WC_WR_FLUSH_ERR &&
		      wc[i].opcode == IBV_WC_RECV);
	CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0);
	CHECK(ibv_post_send(qp, &swr, &bad_swr) == 0);
	CHECK(ibv_poll_cq(cq2, 4, wc) == 1 && wc[0].wr_id == 7 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(ibv_poll_cq(cq, 4, wc) == 1 && wc[0].wr_id == 9 &&
	      wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[0].opcode == IBV_WC_SEND &&
	      wc[0].qp_num == qp->qp_num);
	/* cq is armed on the channel: the flush is an unsuccessful completion,
	 * so it made an event. */
	CHECK(poll(&pfd, 1, 1000) == 1);
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq && ev_ctx == &tag);
	ibv_ack_cq_events(cq, 1);
	qa.qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == EINVAL);
	/* ERR -> RESET -> INIT prepares the QP again. */
	qa.qp_state = IBV_QPS_RESET;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0 && qp->state == IBV_QPS_RESET);
	qa.qp_state = IBV_QPS_INIT;
	CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0 && qp->state == IBV_QPS_INIT);
	CHECK(ibv_post_recv(qp, &rwr, &bad_rwr) == 0);

	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_qp(qp) == EINVAL);
	CHECK(ibv_destroy_qp(NULL) == EINVAL);
	CHECK(ibv_query_qp(qp, &qa, 0, &qi) == EINVAL);
	CHECK(ibv_dereg_mr(qmr) == 0 && ibv_dereg_mr(qro) == 0);

	/* Destroyed in order: the channel is busy while a CQ uses it. */
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_cq(cq) == EINVAL);
	CHECK(ibv_destroy_cq(cq2) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == EINVAL);
	CHECK(ibv_dealloc_pd(pd) == 0);

	/* What the application leaves is destroyed with the context. */
	struct ibv_pd *left = ibv_alloc_pd(ctx);
	CHECK(left != NULL && ibv_reg_mr(left, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) != NULL);
	ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *left_cq = ch ? ibv_create_cq(ctx, 1, NULL, ch, 0) : NULL;
	CHECK(left_cq != NULL);
	bad_ia.send_cq = bad_ia.recv_cq = left_cq;
	CHECK(ibv_create_qp(left, &bad_ia) != NULL);

	/* Helpers. */
	CHECK(ibv_rate_to_mbps(IBV_RATE_10_GBPS) == 10000);
	CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4);
	CHECK(mult_to_ibv_rate(4) == IBV_RATE_10_GBPS);
	CHECK(mbps_to_ibv_rate(25781) == IBV_RATE_25_GBPS);
	CHECK(strcmp(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC") == 0);
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") == 0);
	CHECK(ibv_fork_init() == 0);
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);

	CHECK(ibv_close_device(ctx) == 0);
	/* A context that is not live is refused, not dereferenced. */
	CHECK(ibv_close_device(ctx) == EINVAL);
	CHECK(ibv_query_port(ctx, 1, &pa) == EINVAL);
	ibv_free_device_list(list);

	/* The device outlives the list (rdma-core's devices are refcounted). */
	CHECK(strcmp(dev->name, "rddp0") == 0);

	if (!failed)
		printf("ok\n");
	return failed;
}
