// SPDX-License-Identifier: GPL-2.0
/* steer.bpf.c - hands a device's outgoing packets to cclab-delay.
 *
 * Attached at tc clsact egress of each device the delay line serves (after
 * the emulated link).  A packet leaving such a device is redirected to the
 * capture side of the delay line's private veth pair, where cclab-delay
 * reads it.  cclab-delay sends it back out of the same device with
 * SO_MARK = DL_MARK; this program lets marked packets through, unmarked.
 *
 *   dev egress --(not marked)--> redirect to capture veth --> cclab-delay
 *   cclab-delay --(marked)--> dev egress --> pass (mark cleared) --> wire
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "delay.h"

#define TC_ACT_UNSPEC (-1)

char LICENSE[] SEC("license") = "GPL";

/* ifindex of a served device -> ifindex of its capture veth's near end */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_MAX_DEVS);
	__type(key, __u32);
	__type(value, __u32);
} dl_steer SEC(".maps");

SEC("tc")
int dl_egress(struct __sk_buff *skb)
{
	__u32 dev = skb->ifindex;
	__u32 *to;

	if (skb->mark == DL_MARK) {
		skb->mark = 0;
		return TC_ACT_UNSPEC; /* released by the delay line: on to the wire */
	}
	to = bpf_map_lookup_elem(&dl_steer, &dev);
	if (!to)
		return TC_ACT_UNSPEC; /* not a served device: untouched */
	return bpf_redirect(*to, 0);
}
