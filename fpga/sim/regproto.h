/* regproto.h - the register protocol of the in-the-loop harness (cclab-fpga-sim).
 *
 * A client (controller/dataplane/fpgaregs.py, HarnessTransport) connects to
 * the harness's Unix stream socket and sends requests of three 32-bit
 * little-endian words; each gets one answer of two words:
 *
 *   request  {op, addr, data}      answer {status, data}
 *   op 1     read the register at byte offset addr       data: its value
 *   op 2     write data to the register at addr          data: 0
 *   op 3     the harness's counters as JSON              data: length n,
 *                                                         then n bytes of JSON
 *
 * status 0 is success; a negative errno says why not (-EINVAL: a bad op or an
 * unaligned or out-of-range address, -ETIMEDOUT: the element did not answer).
 * Reads and writes are AXI4-Lite transactions on the simulated element,
 * taking simulated cycles while frames flow, as a driver's would on a board.
 */
#ifndef CCLAB_REGPROTO_H
#define CCLAB_REGPROTO_H

#include <stdint.h>

#define REG_OP_READ 1
#define REG_OP_WRITE 2
#define REG_OP_STATS 3

struct reg_request {
	uint32_t op, addr, data;
};

struct reg_answer {
	int32_t status;
	uint32_t data;
};

#endif
