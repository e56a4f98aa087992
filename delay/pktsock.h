/* pktsock.h - the AF_PACKET sockets that take a device's frames and send them on, marked.
 *
 * Shared by cclab-delay (delay/) and the FPGA element's harness (fpga/sim/):
 * a receiving socket bound to a capture device, large buffer, every protocol;
 * a sending socket bound to the device the frames go out of, SO_MARK =
 * DL_MARK so that steer.bpf.c lets them through.  Returns the socket, or -1
 * with errno set and *what naming the step that failed.
 */
#ifndef CCLAB_PKTSOCK_H
#define CCLAB_PKTSOCK_H

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "delay.h"

static inline int pkt_socket(const char *dev, int rx, int vnet, int buf_bytes, const char **what)
{
	int fd = socket(AF_PACKET, SOCK_RAW, 0), one = 1;
	unsigned int mark = DL_MARK;
	struct sockaddr_ll a;

	memset(&a, 0, sizeof(a));
	a.sll_family = AF_PACKET;
	*what = "socket(AF_PACKET)";
	if (fd < 0)
		return -1;
	a.sll_ifindex = (int)if_nametoindex(dev);
	*what = "no such network device";
	if (!a.sll_ifindex)
		goto fail;
	*what = "PACKET_VNET_HDR";
	if (vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		goto fail;
	if (rx) {
		*what = "SO_RCVBUFFORCE";
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf_bytes, sizeof(buf_bytes)))
			goto fail;
		a.sll_protocol = htons(ETH_P_ALL); /* bound to one device: only from now on */
	} else {
		*what = "SO_SNDBUFFORCE";
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf_bytes, sizeof(buf_bytes)))
			goto fail;
		*what = "SO_MARK";
		if (setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)))
			goto fail;
	}
	*what = "bind";
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	return fd;
fail:
	if (!a.sll_ifindex)
		errno = ENODEV;
	{
		int saved = errno;

		close(fd);
		errno = saved;
	}
	return -1;
}

#endif
