// SPDX-License-Identifier: GPL-2.0
/* harness.cpp - cclab-fpga-sim: the Verilated bottleneck element in the loop of a real network.
 *
 * The element (fpga/rtl/cclab_bottleneck.v, built by Verilator into a C++
 * model) sits on one direction of an emulated link A -> B, in place of the
 * kernel's qdiscs:
 *
 *   A egress --steer.bpf.c--> capture veth pair --AF_PACKET rx--> s_axis
 *   m_axis --AF_PACKET tx on A, SO_MARK = DL_MARK--> A egress (passed) --> B
 *
 * which is how cclab-delay takes and re-injects a device's frames (the same
 * steering program and mark, delay/).  Frames reach the model complete: the
 * controller turns checksum and segmentation offloads off where they come
 * from, and one larger than the element takes is handed in anyway and
 * counted malformed by the RTL, as a MAC's would be.
 *
 * Time: simulated cycles are tied to the wall clock at the element's own
 * clock (CLK_KHZ, read from its register 0x24): cycle c is due at
 * t0 + c / f.  The loop runs the model until it is level with the clock,
 * feeding frames as they arrive and sending each as its last beat leaves,
 * then sleeps.  While the element is empty (no frame queued, none in the
 * delay line, none arriving) and its token bucket is full, nothing in it can
 * change, so the harness stops simulating and sleeps until a frame or a
 * register access comes, then takes up the clock from there ("idle skip":
 * the cycles of an idle link are not simulated).  When the model falls
 * behind the clock by more than --max-lag-ms (the host was busy), the
 * excess is forgotten and counted (lag_resets, lag_lost_cycles): the element
 * then runs late, never fast.  Each time it falls more than LATE_MS behind
 * (less than that only moves a frame by as much) late_episodes counts one:
 * a reader that takes it before and after a stretch of traffic knows whether
 * the element kept time through it.
 *
 * Registers: a Unix stream socket (fpga/sim/regproto.h) whose reads and
 * writes are AXI4-Lite transactions on the model, taking cycles as on a board.
 *
 * Control: a {"ready": ...} line on stdout once the sockets are bound; EOF on
 * stdin, SIGINT or SIGTERM (also sent when the parent dies) end it with a
 * last line of counters: the harness's, and under "rtl" what the element
 * counted, read through its register map (every flow entry's eight counters,
 * the malformed count).  --bench N runs N cycles of back-to-back full-size
 * frames with no sockets and prints the simulated cycles per second.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "Vcclab_bottleneck.h"
#include "verilated.h"

#include "delay.h"
#include "pktsock.h"
#include "regproto.h"

namespace {

constexpr uint64_t NS_PER_S = 1000000000ULL;
constexpr size_t FRAME_MAX = 65535 + 64;    /* a frame the kernel hands over, GSO included */
constexpr unsigned LEN_MAX = 65535;         /* tuser's length field: LEN_W = 16 */
constexpr int MAX_CLIENTS = 8;
constexpr uint64_t CHUNK_CYCLES = 512;      /* cycles between looks at the sockets */
constexpr uint64_t AXIL_TIMEOUT = 1000;     /* cycles a register access may take */
constexpr uint64_t IDLE_CHECK_CYCLES = 1024;
constexpr uint64_t LATE_MS = 5;             /* behind the clock by more: a late episode */
constexpr int SOCK_BUF_BYTES = 16 << 20;
constexpr uint32_t MAX_FRAME_BYTES = 1518;  /* MAX_LEN: the longest frame the bucket can be short of */

/* the reference register map (fpga/rtl/cclab_bottleneck.v) the idle check reads */
constexpr uint32_t R_CONTROL = 0x0010, R_Q_PKTS = 0x001C, R_DL_FILL = 0x0020, R_CLK_KHZ = 0x0024;
constexpr uint32_t R_MALFORMED = 0x0014, R_RATE = 0x010C, R_BURST = 0x0110, R_DELAY = 0x030C;
/* and the flow table it reads on exit: entries, table offset, stride; each entry's counters from 0x40 */
constexpr uint32_t R_ENTRIES = 0x060C, R_TABLE = 0x0610, R_STRIDE = 0x0614, E_COUNTERS = 0x40, N_COUNTERS = 8;
constexpr uint32_t REG_SPACE = 0x10000;

volatile sig_atomic_t stop;

uint64_t now_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

[[noreturn]] void die(const char *what)
{
	fprintf(stderr, "cclab-fpga-sim: %s: %s\n", what, strerror(errno));
	exit(1);
}

struct Counters {
	uint64_t rx_frames = 0, rx_bytes = 0, oversize = 0;
	uint64_t tx_frames = 0, tx_bytes = 0, tx_errors = 0, socket_drops = 0;
	uint64_t reg_reads = 0, reg_writes = 0, reg_timeouts = 0;
	uint64_t lag_resets = 0, lag_lost_cycles = 0, max_lag_cycles = 0, late_episodes = 0;
	uint64_t idle_skips = 0, sim_cycles = 0, sim_ns = 0;
	uint64_t unfed = 0; /* on exit: frames taken from the link that never (wholly) entered the element */
};

/* The model and the two streams around it: one cycle at a time. */
class Element {
public:
	Vcclab_bottleneck top;
	uint64_t cycle = 0;
	uint64_t quiet = 0;                       /* cycles since a beat went in or out */
	std::deque<std::vector<uint8_t>> in;      /* frames waiting for s_axis */
	std::deque<uint64_t> in_due;              /* the cycle each arrived at (present none before it) */
	size_t in_off = 0;                        /* bytes of in.front() already given */
	std::vector<uint8_t> out;                 /* the frame leaving on m_axis */
	std::deque<std::vector<uint8_t>> sent;    /* whole frames from m_axis, for the caller to send */

	explicit Element(VerilatedContext *ctx) : top(ctx)
	{
		top.m_axis_tready = 1;
		top.s_axil_bready = 1;
		top.s_axil_rready = 1;
		top.rst = 1;
		for (int i = 0; i < 16; i++)
			step();
		top.rst = 0;
		step();
	}

	/* One clock cycle: drive the inputs, sample both handshakes before the edge, then the edge. */
	void step()
	{
		top.clk = 0;
		bool have = !in.empty() && (in_off || in_due.front() <= cycle);
		if (have) {
			const std::vector<uint8_t> &f = in.front();
			size_t n = f.size() - in_off < 8 ? f.size() - in_off : 8;
			uint64_t d = 0;

			memcpy(&d, f.data() + in_off, n); /* byte 0 on tdata[7:0], as AXI4-Stream has it */
			top.s_axis_tdata = d;
			top.s_axis_tkeep = (uint8_t)((1u << n) - 1);
			top.s_axis_tlast = in_off + n == f.size();
			unsigned len = f.size() < LEN_MAX ? (unsigned)f.size() : LEN_MAX;
			top.s_axis_tuser = in_off == 0 ? len << 1 : 0; /* the length on the first beat; no error flag */
		}
		top.s_axis_tvalid = have;
		top.eval();
		bool in_fire = have && top.s_axis_tready;
		bool out_fire = top.m_axis_tvalid;
		if (out_fire) {
			uint64_t d = top.m_axis_tdata;
			unsigned keep = top.m_axis_tkeep, n = 0;

			while (n < 8 && (keep >> n & 1))
				n++;
			size_t at = out.size();
			out.resize(at + n);
			memcpy(out.data() + at, &d, n);
			if (top.m_axis_tlast) {
				sent.push_back(std::move(out));
				out.clear();
			}
		}
		top.clk = 1;
		top.eval();
		cycle++;
		quiet = in_fire || out_fire ? 0 : quiet + 1;
		if (in_fire) {
			in_off += 8;
			if (in_off >= in.front().size()) {
				in.pop_front();
				in_due.pop_front();
				in_off = 0;
			}
		}
	}

	/* AXI4-Lite, as a bus master: returns false when the element does not answer. */
	bool write(uint32_t addr, uint32_t data)
	{
		top.s_axil_awaddr = (uint16_t)addr;
		top.s_axil_wdata = data;
		top.s_axil_wstrb = 0xF;
		top.s_axil_awvalid = 1;
		top.s_axil_wvalid = 1;
		uint64_t n = 0;
		for (;;) {
			top.clk = 0;
			top.eval();
			bool taken = top.s_axil_awready && top.s_axil_wready;
			step();
			if (taken)
				break;
			if (++n > AXIL_TIMEOUT)
				goto fail;
		}
		top.s_axil_awvalid = 0;
		top.s_axil_wvalid = 0;
		while (!top.s_axil_bvalid) {
			step();
			if (++n > AXIL_TIMEOUT)
				return false;
		}
		step(); /* bready is high: the response is taken at this edge */
		return true;
	fail:
		top.s_axil_awvalid = 0;
		top.s_axil_wvalid = 0;
		return false;
	}

	bool read(uint32_t addr, uint32_t *data)
	{
		top.s_axil_araddr = (uint16_t)addr;
		top.s_axil_arvalid = 1;
		uint64_t n = 0;
		for (;;) {
			top.clk = 0;
			top.eval();
			bool taken = top.s_axil_arready;
			step();
			if (taken)
				break;
			if (++n > AXIL_TIMEOUT) {
				top.s_axil_arvalid = 0;
				return false;
			}
		}
		top.s_axil_arvalid = 0;
		for (;;) {
			top.clk = 0;
			top.eval();
			if (top.s_axil_rvalid) {
				*data = top.s_axil_rdata;
				step(); /* rready is high: taken at this edge */
				return true;
			}
			step();
			if (++n > AXIL_TIMEOUT)
				return false;
		}
	}

	uint32_t reg(uint32_t addr)
	{
		uint32_t v = 0;

		if (!read(addr, &v)) {
			fprintf(stderr, "cclab-fpga-sim: register %#x did not answer\n", addr);
			exit(1);
		}
		return v;
	}

	bool busy_streams() const { return !in.empty() || !out.empty(); }
};

/* Whether the element is empty with a full bucket, so that idle cycles cannot change it; else false and
 * `again`, the quiet cycles after which to ask again.
 *
 * Empty: no frame queued (register 0x1C), no beat in the delay line's memory (0x20), and no beat in or out
 * for long enough that none can be left in the delay line's prefetch (which 0x20 does not count: a frame of
 * up to 8 beats can wait there for its due time) or in the shaper: after any event, a frame still inside
 * leaves within two full-size frames' time at the rate plus the delay, and the bucket is full after `burst`
 * more bytes' time.  The delay is the largest ever set, so that frames held under an older, longer delay
 * are waited for too. */
bool idle_now(Element &e, uint64_t *again)
{
	static uint64_t longest_delay;
	uint32_t q = e.reg(R_Q_PKTS), fill = e.reg(R_DL_FILL);

	if (q || fill) {
		*again = e.quiet + IDLE_CHECK_CYCLES;
		return false;
	}
	uint64_t delay = e.reg(R_DELAY);
	if (delay > longest_delay)
		longest_delay = delay;
	uint32_t rate = e.reg(R_CONTROL) & 1 ? e.reg(R_RATE) : 8u << 24; /* the shaper off: line rate */
	if (!rate) {
		*again = UINT64_MAX; /* rate 0: the bucket never fills, frames may wait forever; keep simulating */
		return false;
	}
	uint64_t need = longest_delay + 64 + ((uint64_t)(2 * MAX_FRAME_BYTES + e.reg(R_BURST)) << 24) / rate + 1;
	if (e.quiet >= need)
		return true;
	*again = need;
	return false;
}

/* --- sockets ---------------------------------------------------------------------------------- */

int packet_socket(const char *dev, bool rx)
{
	const char *what;
	int fd = pkt_socket(dev, rx, 0, SOCK_BUF_BYTES, &what);

	if (fd < 0) {
		fprintf(stderr, "cclab-fpga-sim: %s: %s: %s\n", dev, what, strerror(errno));
		exit(1);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

int unix_listener(const char *path)
{
	struct sockaddr_un a = {};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		die("socket(AF_UNIX)");
	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "cclab-fpga-sim: socket path %.60s is too long\n", path);
		exit(2);
	}
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, path);
	unlink(path);
	mode_t old = umask(077); /* the owner only: the registers are the experiment's */
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("bind (register socket)");
	umask(old);
	if (listen(fd, MAX_CLIENTS))
		die("listen");
	return fd;
}

std::string stats_json(const Element &e, const Counters &c, uint32_t khz)
{
	char buf[1024];
	double cps = c.sim_ns ? (double)c.sim_cycles * 1e9 / (double)c.sim_ns : 0.0;

	snprintf(buf, sizeof(buf),
		 "{\"clock_khz\": %u, \"cycles\": %" PRIu64 ", \"sim_cycles\": %" PRIu64 ", \"sim_cycles_per_s\": %.0f, "
		 "\"rx_frames\": %" PRIu64 ", \"rx_bytes\": %" PRIu64 ", \"oversize\": %" PRIu64 ", \"tx_frames\": %" PRIu64
		 ", \"tx_bytes\": %" PRIu64 ", \"tx_errors\": %" PRIu64 ", \"socket_drops\": %" PRIu64
		 ", \"reg_reads\": %" PRIu64 ", \"reg_writes\": %" PRIu64 ", \"reg_timeouts\": %" PRIu64
		 ", \"lag_resets\": %" PRIu64 ", \"lag_lost_cycles\": %" PRIu64 ", \"max_lag_cycles\": %" PRIu64
		 ", \"late_episodes\": %" PRIu64 ", \"idle_skips\": %" PRIu64 ", \"unfed\": %" PRIu64 "}",
		 khz, e.cycle, c.sim_cycles, cps, c.rx_frames, c.rx_bytes, c.oversize, c.tx_frames, c.tx_bytes, c.tx_errors,
		 c.socket_drops, c.reg_reads, c.reg_writes, c.reg_timeouts, c.lag_resets, c.lag_lost_cycles,
		 c.max_lag_cycles, c.late_episodes, c.idle_skips, c.unfed);
	return buf;
}

/* What the RTL counted, read through its register map as a driver would: the eight counters of every
 * entry of the flow table (the last is the fallback; FlowCounters' order) and the malformed count. */
std::string rtl_json(Element &e)
{
	uint32_t n = e.reg(R_ENTRIES), table = e.reg(R_TABLE), stride = e.reg(R_STRIDE);
	std::string out = "{\"malformed\": " + std::to_string(e.reg(R_MALFORMED)) + ", \"entries\": [";

	for (uint32_t i = 0; i < n; i++) {
		out += i ? ", [" : "[";
		for (uint32_t c = 0; c < N_COUNTERS; c++) {
			uint32_t at = table + stride * i + E_COUNTERS + 8 * c;
			uint64_t lo = e.reg(at); /* the low word first: reading it latches the high word */
			uint64_t hi = e.reg(at + 4);

			out += (c ? ", " : "") + std::to_string(hi << 32 | lo);
		}
		out += "]";
	}
	return out + "]}";
}

/* One request from a client; false when the client is gone or spoke nonsense. */
bool serve(int fd, Element &e, Counters &c, uint32_t khz, bool *wrote)
{
	struct reg_request q;
	struct reg_answer a = { 0, 0 };
	std::string body;
	ssize_t n = recv(fd, &q, sizeof(q), MSG_WAITALL);

	if (n != (ssize_t)sizeof(q))
		return false;
	if ((q.op == REG_OP_READ || q.op == REG_OP_WRITE) && (q.addr % 4 || q.addr >= REG_SPACE)) {
		a.status = -EINVAL;
	} else if (q.op == REG_OP_READ) {
		c.reg_reads++;
		if (!e.read(q.addr, &a.data)) {
			a.status = -ETIMEDOUT;
			c.reg_timeouts++;
		}
	} else if (q.op == REG_OP_WRITE) {
		c.reg_writes++;
		*wrote = true;
		if (!e.write(q.addr, q.data)) {
			a.status = -ETIMEDOUT;
			c.reg_timeouts++;
		}
	} else if (q.op == REG_OP_STATS) {
		body = stats_json(e, c, khz);
		a.data = (uint32_t)body.size();
	} else {
		a.status = -EINVAL;
	}
	if (send(fd, &a, sizeof(a), MSG_NOSIGNAL) != (ssize_t)sizeof(a))
		return false;
	return body.empty() || send(fd, body.data(), body.size(), MSG_NOSIGNAL) == (ssize_t)body.size();
}

void on_signal(int) { stop = 1; }

/* --- the bench: no sockets, back-to-back full-size frames ------------------------------------- */

int bench(Element &e, uint64_t cycles)
{
	std::vector<uint8_t> f(1514, 0);
	const uint8_t head[] = { 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, /* Ethernet, IPv4 */
				 0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
				 0x13, 0x88, 0x13, 0x89, 0x05, 0xc8, 0, 0 }; /* UDP 5000 -> 5001 */

	memcpy(f.data(), head, sizeof(head));
	uint64_t t0 = now_ns(), frames = 0;
	for (uint64_t i = 0; i < cycles; i++) {
		if (e.in.size() < 2) {
			e.in.push_back(f);
			e.in_due.push_back(0);
		}
		e.step();
		frames += e.sent.size();
		e.sent.clear();
	}
	double s = (double)(now_ns() - t0) / 1e9;
	printf("{\"cycles\": %" PRIu64 ", \"seconds\": %.3f, \"cycles_per_s\": %.0f, \"frames_out\": %" PRIu64 "}\n",
	       cycles, s, (double)cycles / s, frames);
	return 0;
}

void usage()
{
	fprintf(stderr, "usage: cclab-fpga-sim --rx CAPTURE_DEV --tx DEV --socket PATH [--max-lag-ms N]\n"
			"       cclab-fpga-sim --bench CYCLES\n");
	exit(2);
}

uint64_t number(const char *opt, const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	if (*end || *s < '0' || *s > '9') {
		fprintf(stderr, "cclab-fpga-sim: --%s %.40s: want a non-negative integer\n", opt, s);
		exit(2);
	}
	return v;
}

} // namespace

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rx", required_argument, nullptr, 'r' },   { "tx", required_argument, nullptr, 't' },
		{ "socket", required_argument, nullptr, 's' }, { "max-lag-ms", required_argument, nullptr, 'l' },
		{ "bench", required_argument, nullptr, 'b' }, { nullptr, 0, nullptr, 0 },
	};
	const char *rx_dev = nullptr, *tx_dev = nullptr, *sock_path = nullptr;
	uint64_t max_lag_ms = 20, bench_cycles = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
		if (c == 'r')
			rx_dev = optarg;
		else if (c == 't')
			tx_dev = optarg;
		else if (c == 's')
			sock_path = optarg;
		else if (c == 'l')
			max_lag_ms = number("max-lag-ms", optarg);
		else if (c == 'b')
			bench_cycles = number("bench", optarg);
		else
			usage();
	}
	if (optind != argc || (!bench_cycles && (!rx_dev || !tx_dev || !sock_path)))
		usage();

	auto ctx = new VerilatedContext;
	auto e = new Element(ctx);
	uint32_t khz = e->reg(R_CLK_KHZ);
	if (bench_cycles)
		return bench(*e, bench_cycles);

	struct sigaction sa = {};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, nullptr);
	sigaction(SIGTERM, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (getppid() == 1)
		return 1; /* the parent is already gone */
	fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);

	int rx = packet_socket(rx_dev, true), tx = packet_socket(tx_dev, false), lis = unix_listener(sock_path);
	std::vector<int> clients;
	Counters cnt;
	std::vector<uint8_t> buf(FRAME_MAX);
	printf("{\"ready\": true, \"clock_khz\": %u}\n", khz);
	fflush(stdout);

	const uint64_t max_lag = max_lag_ms * khz, late = LATE_MS * khz;
	uint64_t anchor_ns = now_ns(), anchor_cyc = e->cycle, idle_again = IDLE_CHECK_CYCLES;
	bool idle = false, open_stdin = true, was_late = false;

	while (!stop && open_stdin) {
		/* frames in */
		for (;;) {
			struct sockaddr_ll from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(rx, buf.data(), buf.size(), MSG_TRUNC, (struct sockaddr *)&from, &fl);

			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				die("recvfrom");
			}
			if (from.sll_pkttype == PACKET_OUTGOING)
				continue;
			if ((size_t)n > buf.size()) {
				cnt.oversize++;
				continue;
			}
			cnt.rx_frames++;
			cnt.rx_bytes += (uint64_t)n;
			cnt.oversize += n > (ssize_t)LEN_MAX;
			uint64_t t_in = now_ns();
			if (idle) { /* the clock starts again from now */
				idle = false;
				anchor_ns = t_in;
				anchor_cyc = e->cycle;
				cnt.idle_skips++;
			}
			/* the frame enters the element at the cycle of its arrival, never earlier: a model that is
			 * behind the clock does not shorten the delay by catching up */
			e->in.emplace_back(buf.begin(), buf.begin() + n);
			e->in_due.push_back(anchor_cyc + (t_in - anchor_ns) * khz / 1000000);
		}

		/* the model, level with the clock */
		uint64_t t = now_ns();
		uint64_t target = idle ? e->cycle : anchor_cyc + (t - anchor_ns) * khz / 1000000;
		if (target > e->cycle + max_lag) {
			cnt.lag_resets++;
			cnt.lag_lost_cycles += target - e->cycle - max_lag;
			anchor_cyc -= target - e->cycle - max_lag;
			target = e->cycle + max_lag;
		}
		if (target > e->cycle && target - e->cycle > cnt.max_lag_cycles)
			cnt.max_lag_cycles = target - e->cycle;
		bool is_late = target > e->cycle + late;
		cnt.late_episodes += is_late && !was_late;
		was_late = is_late;
		uint64_t until = target < e->cycle + CHUNK_CYCLES ? target : e->cycle + CHUNK_CYCLES, c0 = e->cycle;
		while (e->cycle < until)
			e->step();
		cnt.sim_cycles += e->cycle - c0;
		cnt.sim_ns += now_ns() - t;

		/* frames out */
		while (!e->sent.empty()) {
			std::vector<uint8_t> &f = e->sent.front();
			if (send(tx, f.data(), f.size(), MSG_DONTWAIT) < 0) {
				if (errno == EAGAIN || errno == ENOBUFS)
					break; /* the device pushed back: again on the next round */
				cnt.tx_errors++;
			} else {
				cnt.tx_frames++;
				cnt.tx_bytes += f.size();
			}
			e->sent.pop_front();
		}

		/* level with the clock: is the element idle?  Then sleep until a frame or a request comes; level
		 * but busy: until CHUNK_CYCLES more are due; behind: only look at the sockets (a register access
		 * is served even while the model catches up) */
		bool level = e->cycle >= target; /* the cycles due when this round began are done */
		if (level && !idle && !e->busy_streams() && e->sent.empty() && e->quiet >= idle_again &&
		    idle_again != UINT64_MAX)
			idle = idle_now(*e, &idle_again);

		std::vector<struct pollfd> fds = { { rx, POLLIN, 0 }, { lis, POLLIN, 0 }, { STDIN_FILENO, POLLIN, 0 } };
		for (int cl : clients)
			fds.push_back({ cl, POLLIN, 0 });
		uint64_t wait_ns = level ? CHUNK_CYCLES * 1000000 / khz : 0;
		struct timespec ts = { (time_t)(wait_ns / NS_PER_S), (long)(wait_ns % NS_PER_S) };
		if (ppoll(fds.data(), fds.size(), idle ? nullptr : &ts, nullptr) < 0 && errno != EINTR)
			die("ppoll");
		if (fds[1].revents & POLLIN) {
			int cl = accept4(lis, nullptr, nullptr, SOCK_CLOEXEC);
			if (cl >= 0 && (int)clients.size() < MAX_CLIENTS)
				clients.push_back(cl);
			else if (cl >= 0)
				close(cl);
		}
		if (fds[2].revents) {
			char tmp[256];
			ssize_t n = read(STDIN_FILENO, tmp, sizeof(tmp));
			open_stdin = !(n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR));
		}
		for (size_t i = 3; i < fds.size(); i++) {
			if (!fds[i].revents)
				continue;
			bool wrote = false;
			if (idle) { /* a register access wakes the clock too */
				idle = false;
				anchor_ns = now_ns();
				anchor_cyc = e->cycle;
				cnt.idle_skips++;
			}
			if (!serve(fds[i].fd, *e, cnt, khz, &wrote)) {
				close(fds[i].fd);
				clients.erase(std::find(clients.begin(), clients.end(), fds[i].fd));
			}
			if (wrote) { /* a new rate, burst or delay: count quiet cycles from here, check again */
				e->quiet = 0;
				idle_again = 0;
			}
		}
		if (e->quiet == 0)
			idle_again = IDLE_CHECK_CYCLES;
	}
	struct tpacket_stats st;
	socklen_t sl = sizeof(st);
	if (getsockopt(rx, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
		cnt.socket_drops += st.tp_drops;
	cnt.unfed = e->in.size();
	std::string last = stats_json(*e, cnt, khz);
	last.insert(last.size() - 1, ", \"rtl\": " + rtl_json(*e)); /* the RTL's counters as it stopped */
	printf("%s\n", last.c_str());
	fflush(stdout);
	unlink(sock_path);
	e->top.final();
	return 0;
}
