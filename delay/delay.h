/* delay.h - what steer.bpf.c and cclab-delay agree on. */
#ifndef CCLAB_DELAY_H
#define CCLAB_DELAY_H

/* skb->mark of a packet the delay line releases ("cc1a" "b0d1") */
#define DL_MARK 0xcc1ab0d1
/* served devices per loaded steering program */
#define DL_MAX_DEVS 256

#endif
