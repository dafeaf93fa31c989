/* Non-inline wrappers over liburing for ring.zig.
 *
 * Why this file exists: liburing 2.3's hot-path helpers (io_uring_get_sqe, io_uring_cq_advance,
 * io_uring_peek_cqe, the prep helpers, ...) are `static inline` functions built on C11 atomics.
 * Zig 0.15.1's translate-c (@cImport) still cannot translate them: they become undefined
 * externs (`_io_uring_get_sqe`, `io_uring_cq_advance`, `__io_uring_peek_cqe` fail to link;
 * checked when this file was written). Compiling them here, in C, into the same shared library
 * keeps the Zig side free of @cImport: ring.zig sees an opaque `struct io_uring`, an opaque SQE
 * and the 16-byte CQE, whose layout is kernel ABI.
 *
 * Every function returns what liburing returns: >= 0 or -errno.
 */
#include <liburing.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

/* Size/alignment of struct io_uring, so ring.zig can reserve it on the ring thread's stack
 * and check its reservation at run time. */
unsigned fuw_ring_size(void) { return (unsigned)sizeof(struct io_uring); }
unsigned fuw_ring_align(void) { return (unsigned)_Alignof(struct io_uring); }

/* CQSIZE: the CQ must hold a completion for every entry, every I/O and the wake-up read at
 * once, independent of the SQ size. */
int fuw_init(struct io_uring *ring, unsigned sq_entries, unsigned cq_entries, unsigned flags)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQSIZE;
	p.cq_entries = cq_entries;
	int rc = io_uring_queue_init_params(sq_entries, ring, &p);
	if (rc < 0)
		return rc;
	/* A registered ring fd spares io_uring_enter the fget/fput of the ring's file on every
	 * call (~2 % of a 4 KiB QD1 daemon's CPU in perf). It is the calling thread's: only the
	 * owner thread, which calls this, ever enters the ring (and fuw_exit, also on the owner,
	 * unregisters it). Refused (no slot left, or an old kernel): enters use the plain fd. */
	(void)io_uring_register_ring_fd(ring);
	return 0;
}

void fuw_exit(struct io_uring *ring) { io_uring_queue_exit(ring); }

int fuw_register_buffers(struct io_uring *ring, const struct iovec *iov, unsigned n)
{
	return io_uring_register_buffers(ring, iov, n);
}

/* /dev/fuse as the ring's fixed file 0: entry commands then name it by index, and the kernel
 * skips an fget/fput of the file for every SQE (~2 % of a 4 KiB QD1 daemon's CPU in perf;
 * libfuse does the same). */
int fuw_register_fuse_fd(struct io_uring *ring, int fd) { return io_uring_register_files(ring, &fd, 1); }

struct io_uring_sqe *fuw_get_sqe(struct io_uring *ring) { return io_uring_get_sqe(ring); }

int fuw_submit(struct io_uring *ring) { return io_uring_submit(ring); }

/* Submits and blocks for at least one completion (GETEVENTS: with DEFER_TASKRUN this is also
 * where the kernel runs the task work that copies requests into our buffers). */
int fuw_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	return io_uring_submit_and_wait(ring, wait_nr);
}

/* Submits and reaps without blocking (GETEVENTS, min_complete 0). */
int fuw_submit_and_get_events(struct io_uring *ring) { return io_uring_submit_and_get_events(ring); }

unsigned fuw_peek_batch(struct io_uring *ring, struct io_uring_cqe **cqes, unsigned max)
{
	return io_uring_peek_batch_cqe(ring, cqes, max);
}

void fuw_cq_advance(struct io_uring *ring, unsigned n) { io_uring_cq_advance(ring, n); }

/* IORING_OP_URING_CMD for /dev/fuse (docs/KERNEL.md §4). The whole 128-byte SQE is cleared
 * (SQEs are reused; the kernel reads struct fuse_uring_cmd_req from sqe->cmd, bytes 48..72, and
 * stale bytes there would be read as flags/padding). liburing 2.3 has no struct
 * fuse_uring_cmd_req, so its fields are written at their UAPI offsets inside cmd[]:
 * flags u64 @0 (0), commit_id u64 @8, qid u16 @16. */
void fuw_prep_fuse_cmd(struct io_uring_sqe *sqe, int fd, int fixed, uint32_t cmd_op, uint64_t addr,
		       uint32_t len, uint64_t commit_id, uint16_t qid, uint64_t user_data)
{
	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd; /* fixed: the index in the ring's file table (fuw_register_fuse_fd) */
	if (fixed)
		sqe->flags = IOSQE_FIXED_FILE;
	sqe->cmd_op = cmd_op;
	sqe->addr = addr;
	sqe->len = len;
	sqe->user_data = user_data;
	memcpy(sqe->cmd + 8, &commit_id, sizeof(commit_id));
	memcpy(sqe->cmd + 16, &qid, sizeof(qid));
}

/* Plain read (the eventfd wake-up read). */
void fuw_prep_read(struct io_uring_sqe *sqe, int fd, void *buf, unsigned len, uint64_t off,
		   uint64_t user_data)
{
	io_uring_prep_read(sqe, fd, buf, len, off);
	sqe->user_data = user_data;
}

/* READ/WRITE into/from an entry's payload: *_FIXED when the payloads are registered buffers
 * (buf_index = entry), plain READ/WRITE otherwise. */
void fuw_prep_rw(struct io_uring_sqe *sqe, int write, int fixed, int fd, void *buf, unsigned len,
		 uint64_t off, unsigned buf_index, uint64_t user_data)
{
	if (fixed) {
		if (write)
			io_uring_prep_write_fixed(sqe, fd, buf, len, off, (int)buf_index);
		else
			io_uring_prep_read_fixed(sqe, fd, buf, len, off, (int)buf_index);
	} else {
		if (write)
			io_uring_prep_write(sqe, fd, buf, len, off);
		else
			io_uring_prep_read(sqe, fd, buf, len, off);
	}
	sqe->user_data = user_data;
}

/* Cancels every cancelable request of the ring (teardown of in-flight READ/WRITE). */
void fuw_prep_cancel_all(struct io_uring_sqe *sqe, uint64_t user_data)
{
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ALL | IORING_ASYNC_CANCEL_ANY);
	sqe->user_data = user_data;
}

/* Submits and waits for one completion at most `ms` milliseconds (-ETIME on timeout). */
int fuw_submit_and_wait_ms(struct io_uring *ring, unsigned ms)
{
	struct __kernel_timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long long)(ms % 1000) * 1000000 };
	struct io_uring_cqe *cqe = NULL;
	return io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, NULL);
}

/* The idle wake-up: the kernel signals this eventfd when a completion or deferred task work
 * arrives, unless IORING_CQ_EVENTFD_DISABLED is set (toggled below). */
int fuw_register_eventfd(struct io_uring *ring, int fd) { return io_uring_register_eventfd(ring, fd); }

int fuw_eventfd_enable(struct io_uring *ring, int enabled)
{
	return io_uring_cq_eventfd_toggle(ring, enabled != 0);
}

void fuw_prep_fsync(struct io_uring_sqe *sqe, int fd, int datasync, uint64_t user_data)
{
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	sqe->user_data = user_data;
}

unsigned fuw_sq_ready(struct io_uring *ring) { return io_uring_sq_ready(ring); }

/* A pure timer (count 0): completes with -ETIME when `ts` has passed. The kernel copies `ts`
 * when the SQE is submitted. */
void fuw_prep_timeout(struct io_uring_sqe *sqe, struct __kernel_timespec *ts, uint64_t user_data)
{
	io_uring_prep_timeout(sqe, ts, 0, 0);
	sqe->user_data = user_data;
}

/* ---- FUSE 7.46 (Linux 7.3) buffer pools and zero-copy (docs/BUFFERS.md) ----------------
 * The 7.46 struct fuse_uring_cmd_req (include/uapi/linux/fuse.h of 7.3): flags u64 @0,
 * commit_id u64 @8, qid u16 @16, padding[6] @18, then a union @24: bufpool { uaddr u64 @24,
 * len u32 @32, reserved u32 @36 } / ent_zero_copy_buf_index u16 @24. Call after
 * fuw_prep_fuse_cmd (which cleared the SQE). `fixed_pool`: the queue's pool is a registered
 * buffer at `buf_index`; fs/fuse/dev_uring.c then requires IORING_URING_CMD_FIXED and that
 * index on ADD_BUFPOOL and on every REGISTER/COMMIT of the queue (fuse_uring_cmd_index_ok). */
void fuw_fuse_cmd_746(struct io_uring_sqe *sqe, uint64_t flags, uint64_t union_lo, uint32_t union_len,
		      int fixed_pool, uint16_t buf_index)
{
	memcpy(sqe->cmd + 0, &flags, sizeof(flags));
	memcpy(sqe->cmd + 24, &union_lo, sizeof(union_lo));
	memcpy(sqe->cmd + 32, &union_len, sizeof(union_len));
	if (fixed_pool) {
		sqe->uring_cmd_flags = IORING_URING_CMD_FIXED;
		sqe->buf_index = buf_index;
	}
}

/* A registered-buffer table of `nr` empty slots (pools are then placed with
 * fuw_update_buffers; zero-copy slots stay empty: the kernel registers a request's pages
 * there and io_buffer_register_bvec fails with -EBUSY on an occupied slot). */
int fuw_register_buffers_sparse(struct io_uring *ring, unsigned nr)
{
	return io_uring_register_buffers_sparse(ring, nr);
}

int fuw_update_buffers(struct io_uring *ring, unsigned off, const struct iovec *iov, unsigned n)
{
	int rc = io_uring_register_buffers_update_tag(ring, off, iov, NULL, n);
	return rc < 0 ? rc : (rc == (int)n ? 0 : -ENOMEM);
}

int fuw_unregister_buffers(struct io_uring *ring) { return io_uring_unregister_buffers(ring); }

/* Waits for one CQE (setup commands at start; nothing else is in flight then). */
int fuw_wait_cqe(struct io_uring *ring, struct io_uring_cqe **cqe) { return io_uring_wait_cqe(ring, cqe); }
