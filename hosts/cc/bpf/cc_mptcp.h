/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cc_mptcp.h - how the coupled struct_ops shells (mptcpw, cc_lia) find the
 * other subflows of their MPTCP connection: the connection's token through
 * icsk_ulp_data -> struct mptcp_subflow_context.conn -> struct mptcp_sock
 * .token (read-only casts, bpf_rdonly_cast, 6.2+), and one slot of a
 * struct mptcpw_conn (core/mptcpw.h) in a hash map keyed by that token.
 * Each shell has its own map (CC_MPTCP_CONN_MAP) and passes it in.
 */
#ifndef CC_MPTCP_H
#define CC_MPTCP_H

#include "cc_bpf.h"
#include "mptcpw.h"

extern void *bpf_rdonly_cast(const void *obj__ign, u32 btf_id__k) __ksym;

#define CC_MPTCP_CONN_MAP(name)						\
	struct {							\
		__uint(type, BPF_MAP_TYPE_HASH);			\
		__uint(max_entries, 1024);				\
		__type(key, u32);	/* MPTCP connection token */	\
		__type(value, struct mptcpw_conn);			\
	} name SEC(".maps")

/* The MPTCP token of this subflow, 0 for plain TCP. */
static __always_inline u32 cc_mptcp_token(struct sock *sk)
{
	struct inet_connection_sock *icsk = (void *)sk;
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;

	if (!bpf_core_field_exists(cc_tcp_sk(sk)->is_mptcp) ||
	    !cc_tcp_sk(sk)->is_mptcp)
		return 0;
	sf = bpf_rdonly_cast(icsk->icsk_ulp_data,
			     bpf_core_type_id_kernel(struct mptcp_subflow_context));
	if (!sf)
		return 0;
	msk = bpf_rdonly_cast(sf->conn,
			      bpf_core_type_id_kernel(struct mptcp_sock));
	if (!msk)
		return 0;
	return msk->token;
}

/* Claim a free slot; returns it or MPTCPW_MAX_PATHS when all are taken. */
static __always_inline u32 cc_mptcp_claim(struct mptcpw_conn *c)
{
	u32 i, bit, old;

	for (i = 0; i < MPTCPW_MAX_PATHS; i++) {
		bit = 1U << i;
		if (c->used & bit)
			continue;
		old = __sync_fetch_and_or(&c->used, bit);
		if (!(old & bit))
			return i;
	}
	return MPTCPW_MAX_PATHS;
}

/*
 * This subflow's connection table in map; *token and *slot are the
 * subflow's own (0 and >= MPTCPW_MAX_PATHS until it attaches); attach
 * selects attaching on first use.  Only cong_avoid attaches: in_ack_event
 * also runs while the handshake completes, before the stack calls init
 * once more (tcp_init_transfer), which would leak the slot claimed then.
 */
static __always_inline struct mptcpw_conn *
cc_mptcp_conn(void *map, struct sock *sk, u32 *token, u32 *slot, bool attach)
{
	struct mptcpw_conn *c, zero = {};
	u32 tok;

	if (*token) {
		tok = *token;		/* map keys must live on the stack */
		return *slot < MPTCPW_MAX_PATHS ?
		       bpf_map_lookup_elem(map, &tok) : NULL;
	}
	if (!attach)
		return NULL;
	tok = cc_mptcp_token(sk);
	if (!tok)
		return NULL;
	c = bpf_map_lookup_elem(map, &tok);
	if (!c) {
		bpf_map_update_elem(map, &tok, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(map, &tok);
		if (!c)
			return NULL;
	}
	*token = tok;
	*slot = cc_mptcp_claim(c);
	return *slot < MPTCPW_MAX_PATHS ? c : NULL;
}

static __always_inline u32 cc_mptcp_nsub(const struct mptcpw_conn *c)
{
	u32 i, n = 0;

	for (i = 0; i < MPTCPW_MAX_PATHS; i++)
		n += (c->used >> i) & 1;
	return n;
}

/* release: free the slot; the last subflow deletes the entry. */
static __always_inline void cc_mptcp_release(void *map, u32 token, u32 slot)
{
	struct mptcpw_conn *c;
	u32 bit, old, tok = token;

	if (!tok || slot >= MPTCPW_MAX_PATHS)
		return;
	c = bpf_map_lookup_elem(map, &tok);
	if (!c)
		return;
	bit = 1U << (slot & (MPTCPW_MAX_PATHS - 1));
	c->path[slot & (MPTCPW_MAX_PATHS - 1)].cwnd = 0;
	old = __sync_fetch_and_and(&c->used, ~bit);
	if (!(old & ~bit))		/* last subflow of the connection */
		bpf_map_delete_elem(map, &tok);
}

#endif /* CC_MPTCP_H */
