// SPDX-License-Identifier: GPL-2.0
/* cclab-delay - a user-space delay line for kernels without netem.
 *
 * One process serves the delayed devices of one emulated link, one thread
 * per device ("line"): what a release sets off downstream (the receiver's
 * stack, its ACKs, the sender's next packets) runs in the releasing
 * thread, so the two directions of a link run on two cores.
 *
 *   dev egress --steer.bpf.c--> cap veth pair --AF_PACKET rx--> FIFO in memory
 *   FIFO head due --AF_PACKET tx, SO_MARK = DL_MARK--> dev egress --> wire
 *
 * - Sockets carry a virtio-net header, so GSO packets stay whole (one
 *   64 KiB TSO packet is one read and one write, as in netem).
 * - A packet is due at arrival + delay (+ a uniform draw in [-jitter, +jitter]),
 *   never earlier than the packet before it: the order is kept, always.
 * - The FIFO grows as needed (it never drops); the sockets' buffers absorb
 *   the moments the process is not running, and their drops are counted.
 * - Timer discipline: ppoll() until spin_ns before the head is due (1 ns
 *   timer slack), then poll the sockets without sleeping until it is due;
 *   every release records how late it was (histogram, 1 us buckets; the
 *   stats give its percentiles and how many were over 1 ms late).
 * - Reads and writes are batched (recvmmsg/sendmmsg, up to BATCH packets).
 *
 * Control on stdin, one command per line:
 *   delay <delay_ns> <jitter_ns>   packets arriving from now on get this delay
 *   stats                          one JSON line of counters on stdout
 * EOF on stdin, SIGINT or SIGTERM (also sent when the parent dies): a last
 * stats line, then exit.  A {"ready": true} line says the sockets are bound.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "delay.h"
#include "pktsock.h"

#define MAX_LINES 64
#define BATCH 32
#define VNET_HLEN ((int)sizeof(struct virtio_net_hdr))
/* largest frame: vnet header + Ethernet + a 64 KiB IP packet, rounded up */
#define SLOT_BYTES (VNET_HLEN + 14 + 65535 + 64)
#define SOCK_BUF_BYTES (64 << 20)
#define ARENA_START_BYTES (4 << 20)
#define LATE_BUCKETS 20000 /* 1 us each; the last one holds everything later */
#define NS_PER_S 1000000000ULL

/* one held packet in a line's arena, followed by len bytes padded to 8 */
struct rec {
	uint64_t due_ns; /* CLOCK_MONOTONIC */
	uint32_t len;    /* vnet header + frame, bytes */
	uint32_t pad;
};

struct line {
	char cap[IF_NAMESIZE], out[IF_NAMESIZE];
	int rx_fd, tx_fd;
	/* circular arena of records: [head, wrap_at) then [0, tail) when wrapped */
	uint8_t *buf;
	size_t size, head, tail, wrap_at;
	int wrapped;
	uint64_t queued_pkts, queued_bytes;
	uint64_t last_due_ns;
	/* counters */
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, tx_errors;
	uint64_t sock_drops, truncated, max_queued_pkts, max_queued_bytes;
	uint64_t *late_hist; /* LATE_BUCKETS */
	uint64_t late_max_ns;
	uint64_t rng_state;
	pthread_t thread;
	pthread_mutex_t lock; /* held while the thread works; print_stats takes it to read */
	uint8_t *scratch;
	struct mmsghdr rx_msgs[BATCH];
	struct iovec rx_iov[BATCH];
	struct sockaddr_ll rx_addr[BATCH];
};

static struct line lines[MAX_LINES];
static int nlines;
static uint64_t delay_ns, jitter_ns; /* written by the main thread: __atomic */
static uint64_t spin_ns = 50000;     /* wake-ups measured here were 10-60 us late */
static uint64_t seed;
static volatile sig_atomic_t stop;
static int stop_fd; /* eventfd: wakes the line threads to stop */

static void die(const char *what)
{
	fprintf(stderr, "cclab-delay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* splitmix64: seeded, so a run's jitter draws repeat */
static uint64_t rng_next(struct line *l)
{
	uint64_t z = (l->rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t due_for(struct line *l, uint64_t arrival_ns)
{
	uint64_t jitter = __atomic_load_n(&jitter_ns, __ATOMIC_RELAXED);
	uint64_t due = arrival_ns + __atomic_load_n(&delay_ns, __ATOMIC_RELAXED);

	if (jitter) {
		uint64_t draw = rng_next(l) % (2 * jitter + 1); /* [0, 2 jitter] */

		due = due + draw >= jitter ? due + draw - jitter : 0;
		if (due < arrival_ns)
			due = arrival_ns;
	}
	if (due < l->last_due_ns) /* never ahead of the packet before: no reordering */
		due = l->last_due_ns;
	l->last_due_ns = due;
	return due;
}

/* --- the arena ------------------------------------------------------------ */

static size_t rec_bytes(uint32_t len)
{
	return sizeof(struct rec) + ((len + 7) & ~(size_t)7);
}

static struct rec *rec_at(struct line *l, size_t off)
{
	return (struct rec *)(l->buf + off);
}

static size_t rec_next(struct line *l, size_t off)
{
	off += rec_bytes(rec_at(l, off)->len);
	if (l->wrapped && off == l->wrap_at)
		off = 0;
	return off;
}

/* Move the records into a larger buffer, oldest first, unwrapped. */
static void arena_grow(struct line *l, size_t need)
{
	size_t size = l->size * 2 > l->size + 2 * need ? l->size * 2 : l->size + 2 * need;
	uint8_t *buf = malloc(size);
	size_t off = l->head, at = 0;
	uint64_t i;

	if (!buf)
		die("holding packets: out of memory");
	for (i = 0; i < l->queued_pkts; i++) {
		size_t n = rec_bytes(rec_at(l, off)->len);

		memcpy(buf + at, l->buf + off, n);
		at += n;
		off = rec_next(l, off);
	}
	free(l->buf);
	l->buf = buf;
	l->size = size;
	l->head = 0;
	l->tail = at;
	l->wrapped = 0;
}

/* Where a record of n bytes goes; grows the arena if it must. */
static size_t arena_reserve(struct line *l, size_t n)
{
	if (l->queued_pkts == 0) {
		l->head = l->tail = 0;
		l->wrapped = 0;
	}
	if (!l->wrapped) {
		if (l->size - l->tail >= n)
			return l->tail;
		if (l->head > n) { /* room at the start: wrap */
			l->wrapped = 1;
			l->wrap_at = l->tail;
			l->tail = 0;
			return 0;
		}
	} else if (l->head - l->tail > n) {
		return l->tail;
	}
	arena_grow(l, n);
	return l->tail;
}

static void enqueue(struct line *l, const uint8_t *pkt, uint32_t len, uint64_t arrival_ns)
{
	size_t n = rec_bytes(len);
	size_t off = arena_reserve(l, n);
	struct rec *r = rec_at(l, off);

	r->due_ns = due_for(l, arrival_ns);
	r->len = len;
	memcpy(r + 1, pkt, len);
	l->tail = off + n;
	l->queued_pkts++;
	l->queued_bytes += len;
	if (l->queued_pkts > l->max_queued_pkts)
		l->max_queued_pkts = l->queued_pkts;
	if (l->queued_bytes > l->max_queued_bytes)
		l->max_queued_bytes = l->queued_bytes;
}

/* --- receive and release -------------------------------------------------- */

static void receive(struct line *l)
{
	struct mmsghdr *rx_msgs = l->rx_msgs;
	int i, n;
	uint64_t t;

	for (;;) {
		for (i = 0; i < BATCH; i++) {
			rx_msgs[i].msg_hdr.msg_flags = 0;
			rx_msgs[i].msg_hdr.msg_namelen = sizeof(l->rx_addr[i]);
		}
		n = recvmmsg(l->rx_fd, rx_msgs, BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			die("recvmmsg");
		}
		t = now_ns();
		for (i = 0; i < n; i++) {
			const struct msghdr *h = &rx_msgs[i].msg_hdr;

			if (l->rx_addr[i].sll_pkttype == PACKET_OUTGOING)
				continue; /* the capture end's own transmissions */
			if (h->msg_flags & MSG_TRUNC) {
				l->truncated++;
				continue;
			}
			l->rx_pkts++;
			l->rx_bytes += rx_msgs[i].msg_len - VNET_HLEN;
			enqueue(l, l->rx_iov[i].iov_base, rx_msgs[i].msg_len, t);
		}
		if (n < BATCH)
			return;
	}
}

static void record_late(struct line *l, uint64_t late_ns)
{
	uint64_t us = late_ns / 1000;

	l->late_hist[us < LATE_BUCKETS ? us : LATE_BUCKETS - 1]++;
	if (late_ns > l->late_max_ns)
		l->late_max_ns = late_ns;
}

static void dequeue(struct line *l)
{
	l->queued_pkts--;
	l->queued_bytes -= rec_at(l, l->head)->len;
	l->head = rec_next(l, l->head);
	if (l->wrapped && l->head == 0)
		l->wrapped = 0; /* the records before wrap_at are gone: one run again */
}

/* Send what is due; returns 1 if the socket pushed back (try again soon). */
static int release(struct line *l, uint64_t now)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	size_t off;
	int i, n, sent;

	while (l->queued_pkts) {
		off = l->head;
		for (n = 0; n < BATCH && (uint64_t)n < l->queued_pkts; n++) {
			struct rec *r = rec_at(l, off);

			if (r->due_ns > now)
				break;
			iov[n].iov_base = r + 1;
			iov[n].iov_len = r->len;
			memset(&msgs[n], 0, sizeof(msgs[n]));
			msgs[n].msg_hdr.msg_iov = &iov[n];
			msgs[n].msg_hdr.msg_iovlen = 1;
			off = rec_next(l, off);
		}
		if (n == 0)
			return 0;
		sent = sendmmsg(l->tx_fd, msgs, n, MSG_DONTWAIT);
		if (sent < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR))
			return 1;
		if (sent < 0) { /* the head cannot go out (e.g. a bad header): count it, go on */
			l->tx_errors++;
			dequeue(l);
			continue;
		}
		for (i = 0; i < sent; i++) {
			struct rec *r = rec_at(l, l->head);

			record_late(l, now - r->due_ns);
			l->tx_pkts++;
			l->tx_bytes += r->len - VNET_HLEN;
			dequeue(l);
		}
		if (sent < n)
			return 1;
	}
	return 0;
}

/* --- control and statistics ----------------------------------------------- */

static uint64_t late_pct_us(const uint64_t *hist, uint64_t total, unsigned int pct)
{
	uint64_t want = (total * pct + 99) / 100, seen = 0;
	int i;

	for (i = 0; i < LATE_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= want && want)
			return (uint64_t)i;
	}
	return 0;
}

static void print_stats(void)
{
	static uint64_t hist[LATE_BUCKETS];
	uint64_t total = 0, over_1ms = 0, max_ns = 0;
	int i, b;

	memset(hist, 0, sizeof(hist));
	for (i = 0; i < nlines; i++) {
		pthread_mutex_lock(&lines[i].lock);
		for (b = 0; b < LATE_BUCKETS; b++)
			hist[b] += lines[i].late_hist[b];
		if (lines[i].late_max_ns > max_ns)
			max_ns = lines[i].late_max_ns;
		pthread_mutex_unlock(&lines[i].lock);
	}
	for (b = 0; b < LATE_BUCKETS; b++) {
		total += hist[b];
		if (b >= 1000)
			over_1ms += hist[b];
	}
	printf("{\"delay_ns\": %" PRIu64 ", \"jitter_ns\": %" PRIu64 ", \"late_us\": {\"n\": %" PRIu64
	       ", \"p50\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"max\": %" PRIu64 ", \"over_1ms\": %" PRIu64
	       "}, \"lines\": [",
	       __atomic_load_n(&delay_ns, __ATOMIC_RELAXED), __atomic_load_n(&jitter_ns, __ATOMIC_RELAXED), total,
	       late_pct_us(hist, total, 50), late_pct_us(hist, total, 99), max_ns / 1000, over_1ms);
	for (i = 0; i < nlines; i++) {
		struct line *l = &lines[i];
		struct tpacket_stats st;
		socklen_t sl = sizeof(st);

		pthread_mutex_lock(&l->lock);
		if (getsockopt(l->rx_fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
			l->sock_drops += st.tp_drops; /* the kernel resets them on read */
		printf("%s{\"dev\": \"%s\", \"capture\": \"%s\", \"rx_pkts\": %" PRIu64 ", \"rx_bytes\": %" PRIu64
		       ", \"tx_pkts\": %" PRIu64 ", \"tx_bytes\": %" PRIu64 ", \"tx_errors\": %" PRIu64
		       ", \"socket_drops\": %" PRIu64 ", \"truncated\": %" PRIu64 ", \"queued_pkts\": %" PRIu64
		       ", \"max_queued_pkts\": %" PRIu64 ", \"max_queued_bytes\": %" PRIu64 "}",
		       i ? ", " : "", l->out, l->cap, l->rx_pkts, l->rx_bytes, l->tx_pkts, l->tx_bytes, l->tx_errors,
		       l->sock_drops, l->truncated, l->queued_pkts, l->max_queued_pkts, l->max_queued_bytes);
		pthread_mutex_unlock(&l->lock);
	}
	printf("]}\n");
	fflush(stdout);
}

static int command(const char *cmd)
{
	uint64_t d, j;

	if (sscanf(cmd, "delay %" SCNu64 " %" SCNu64, &d, &j) == 2) {
		__atomic_store_n(&delay_ns, d, __ATOMIC_RELAXED);
		__atomic_store_n(&jitter_ns, j, __ATOMIC_RELAXED);
		return 0;
	}
	if (strcmp(cmd, "stats") == 0) {
		print_stats();
		return 0;
	}
	fprintf(stderr, "cclab-delay: unknown command %.60s (want: delay <ns> <ns> | stats)\n", cmd);
	return -1;
}

/* Read stdin; returns 0 at EOF. */
static int control(void)
{
	static char buf[4096];
	static size_t have;
	ssize_t n = read(STDIN_FILENO, buf + have, sizeof(buf) - 1 - have);
	char *nl;

	if (n == 0)
		return 0;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	have += (size_t)n;
	buf[have] = '\0';
	while ((nl = strchr(buf, '\n'))) {
		*nl = '\0';
		command(buf);
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have + 1);
	}
	if (have == sizeof(buf) - 1)
		have = 0; /* a line longer than any command: drop it */
	return 1;
}

/* --- set-up --------------------------------------------------------------- */

static int packet_socket(const char *dev, int rx)
{
	const char *what;
	int fd = pkt_socket(dev, rx, 1, SOCK_BUF_BYTES, &what);

	if (fd < 0) {
		fprintf(stderr, "cclab-delay: %s: %s: %s\n", dev, what, strerror(errno));
		exit(1);
	}
	return fd;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: cclab-delay [--delay-ns N] [--jitter-ns N] [--seed N] [--spin-ns N] CAPTURE:DEV [CAPTURE:DEV ...]\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "delay-ns", required_argument, NULL, 'd' },
		{ "jitter-ns", required_argument, NULL, 'j' },
		{ "seed", required_argument, NULL, 's' },
		{ "spin-ns", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	int c, i;
	char *colon, *end;
	uint64_t v;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == '?')
			usage();
		v = strtoull(optarg, &end, 10);
		if (*end || *optarg < '0' || *optarg > '9') { /* strtoull takes "-5" */
			fprintf(stderr, "cclab-delay: --%s %s: want a non-negative integer\n",
				c == 'd' ? "delay-ns" : c == 'j' ? "jitter-ns" : c == 'p' ? "spin-ns" : "seed", optarg);
			exit(2);
		}
		if (c == 'd')
			delay_ns = v;
		else if (c == 'j')
			jitter_ns = v;
		else if (c == 'p')
			spin_ns = v;
		else
			seed = v;
	}
	if (optind == argc || argc - optind > MAX_LINES)
		usage();
	for (i = optind; i < argc; i++) {
		struct line *l = &lines[nlines++];

		colon = strchr(argv[i], ':');
		if (!colon || colon == argv[i] || !colon[1] || colon - argv[i] >= IF_NAMESIZE ||
		    strlen(colon + 1) >= IF_NAMESIZE) {
			fprintf(stderr, "cclab-delay: %s: want CAPTURE:DEV (two device names)\n", argv[i]);
			exit(2);
		}
		memcpy(l->cap, argv[i], (size_t)(colon - argv[i]));
		strcpy(l->out, colon + 1);
	}
}

static void setup(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;
	int i;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, NULL); /* delivered only inside ppoll() */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_TIMERSLACK, 1UL); /* wake when asked, not up to 50 us later */
	if (getppid() == 1)
		exit(1); /* the parent is already gone */
	fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);

	stop_fd = eventfd(0, EFD_NONBLOCK);
	if (stop_fd < 0)
		die("eventfd");
	for (i = 0; i < nlines; i++) {
		struct line *l = &lines[i];
		int b;

		l->rx_fd = packet_socket(l->cap, 1);
		l->tx_fd = packet_socket(l->out, 0);
		l->size = ARENA_START_BYTES;
		l->buf = malloc(l->size);
		l->scratch = malloc((size_t)BATCH * SLOT_BYTES);
		l->late_hist = calloc(LATE_BUCKETS, sizeof(uint64_t));
		if (!l->buf || !l->scratch || !l->late_hist)
			die("malloc");
		l->rng_state = seed + (uint64_t)i * 0xd1b54a32d192ed03ULL; /* one stream per line */
		pthread_mutex_init(&l->lock, NULL);
		for (b = 0; b < BATCH; b++) {
			l->rx_iov[b].iov_base = l->scratch + (size_t)b * SLOT_BYTES;
			l->rx_iov[b].iov_len = SLOT_BYTES;
			l->rx_msgs[b].msg_hdr.msg_iov = &l->rx_iov[b];
			l->rx_msgs[b].msg_hdr.msg_iovlen = 1;
			l->rx_msgs[b].msg_hdr.msg_name = &l->rx_addr[b];
		}
	}
}

/* One line's loop: read, release what is due, sleep until the next is due. */
static void *line_run(void *arg)
{
	struct line *l = arg;
	struct pollfd fds[2] = { { .fd = l->rx_fd, .events = POLLIN }, { .fd = stop_fd, .events = POLLIN } };

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint64_t now, next = UINT64_MAX;
		struct timespec ts;
		int busy;

		pthread_mutex_lock(&l->lock);
		receive(l);
		now = now_ns();
		busy = release(l, now);
		if (l->queued_pkts)
			next = rec_at(l, l->head)->due_ns;
		pthread_mutex_unlock(&l->lock);
		if (busy) /* the socket pushed back: retry in 20 us */
			next = now + 20000;
		now = now_ns();
		if (next != UINT64_MAX && next <= now + spin_ns)
			continue; /* due within spin_ns: do not sleep */
		if (next != UINT64_MAX) {
			ts.tv_sec = (time_t)((next - spin_ns - now) / NS_PER_S);
			ts.tv_nsec = (long)((next - spin_ns - now) % NS_PER_S);
		}
		if (ppoll(fds, 2, next == UINT64_MAX ? NULL : &ts, NULL) < 0 && errno != EINTR)
			die("ppoll");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct pollfd in = { .fd = STDIN_FILENO, .events = POLLIN };
	sigset_t none;
	uint64_t one = 1;
	int i, open_stdin = 1;

	parse(argc, argv);
	setup();
	for (i = 0; i < nlines; i++)
		if (pthread_create(&lines[i].thread, NULL, line_run, &lines[i])) /* signals stay blocked there */
			die("pthread_create");
	sigemptyset(&none);
	printf("{\"ready\": true}\n");
	fflush(stdout);
	while (!stop && open_stdin) {
		if (ppoll(&in, 1, NULL, &none) < 0 && errno != EINTR)
			die("ppoll");
		if (!stop && in.revents)
			open_stdin = control();
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	if (write(stop_fd, &one, sizeof(one)) < 0)
		die("eventfd write");
	for (i = 0; i < nlines; i++)
		pthread_join(lines[i].thread, NULL);
	print_stats();
	return 0;
}
