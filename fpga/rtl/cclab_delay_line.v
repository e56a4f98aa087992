// cclab_delay_line: releases each beat exactly `delay` cycles after it arrived.
//
// Every beat is written to the memory with its release cycle, arrival +
// delay (TS_W-bit cycle counts); beats are read back in order into a small
// prefetch FIFO, and the head leaves when the cycle count reaches its
// release, so a frame leaves exactly `delay` cycles after it arrived, beat
// for beat, its gaps kept, as long as delay >= RD_LAT + 2 (the memory's own
// latency; a smaller delay gives that latency) and the sink is ready.  Order
// is kept; a changed delay applies to the beats that arrive after the change
// (a lower delay lets them leave right behind the beats held before it).
//
// The buffer is behind a memory port (one write, one read, rd_valid for a
// variable latency, ready inputs for a memory that back-pressures): the
// simulation and the reference build put cclab_ram there; a board holds the
// bandwidth-delay product in DDR through an AXI4 master on this port (at
// 10 Gbit/s and 100 ms, 125 MB of frames: 16 Mi beats, ADDR_W = 24).  When
// the buffer is full the input stalls (s_axis_tready low) and nothing is
// lost.  At most PF_D - 1 reads are in flight, so PF_D >= RD_LAT + 2 keeps
// the output at one beat a cycle.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_delay_line #(
    parameter DATA_W = 64,
    parameter KEEP_W = DATA_W / 8,
    parameter ADDR_W = 12,
    parameter TS_W   = 32,
    parameter PF_AW  = 3,                   // prefetch FIFO: 2^PF_AW beats
    parameter MEM_W  = DATA_W + KEEP_W + 1 + TS_W
) (
    input  wire              clk,
    input  wire              rst,

    input  wire [DATA_W-1:0] s_axis_tdata,
    input  wire [KEEP_W-1:0] s_axis_tkeep,
    input  wire              s_axis_tvalid,
    output wire              s_axis_tready,
    input  wire              s_axis_tlast,

    output wire [DATA_W-1:0] m_axis_tdata,
    output wire [KEEP_W-1:0] m_axis_tkeep,
    output wire              m_axis_tvalid,
    input  wire              m_axis_tready,
    output wire              m_axis_tlast,

    input  wire [TS_W-1:0]   delay,          // cycles

    output wire              mem_wr_en,
    output wire [ADDR_W-1:0] mem_wr_addr,
    output wire [MEM_W-1:0]  mem_wr_data,
    input  wire              mem_wr_ready,
    output wire              mem_rd_en,
    output wire [ADDR_W-1:0] mem_rd_addr,
    input  wire              mem_rd_ready,
    input  wire [MEM_W-1:0]  mem_rd_data,
    input  wire              mem_rd_valid,

    output wire [ADDR_W:0]   fill            // beats held in memory
);

localparam PF_D = 1 << PF_AW;

reg [TS_W-1:0]   now;
reg [TS_W-1:0]   due;                        // now + delay
reg [ADDR_W-1:0] wp, rp;                     // rp: next beat to read
reg [ADDR_W:0]   used;                       // beats written and not yet read
reg              full;                       // used == 2^ADDR_W (a register: no adder before tready)

assign s_axis_tready = !full && mem_wr_ready;
assign mem_wr_en     = s_axis_tvalid && s_axis_tready;
assign mem_wr_addr   = wp;
assign mem_wr_data   = {due, s_axis_tlast, s_axis_tkeep, s_axis_tdata};

reg  [PF_AW:0]   pf_cnt, inflight;
wire [PF_AW+1:0] pf_sum = {1'b0, pf_cnt} + {1'b0, inflight};
assign mem_rd_en   = used != 0 && pf_sum < PF_D && mem_rd_ready;
assign mem_rd_addr = rp;

reg  [MEM_W-1:0] pf_mem [0:PF_D-1];
reg  [PF_AW-1:0] pf_wp, pf_rp;
wire [MEM_W-1:0] pf_head = pf_mem[pf_rp];
wire [TS_W-1:0]  head_rel = pf_head[MEM_W-1:MEM_W-TS_W];
wire [TS_W-1:0]  early    = now - head_rel;   // negative while the head is held
wire             pf_pop   = m_axis_tvalid && m_axis_tready;

assign m_axis_tvalid = pf_cnt != 0 && !early[TS_W-1];
assign m_axis_tdata  = pf_head[DATA_W-1:0];
assign m_axis_tkeep  = pf_head[DATA_W+KEEP_W-1:DATA_W];
assign m_axis_tlast  = pf_head[DATA_W+KEEP_W];
assign fill          = used;

wire [ADDR_W:0] used_next = used + {{ADDR_W{1'b0}}, mem_wr_en} - {{ADDR_W{1'b0}}, mem_rd_en};

always @(posedge clk) begin
    now  <= now + 1'b1;
    due  <= now + 1'b1 + delay;
    used <= used_next;
    full <= used_next[ADDR_W];
    if (mem_wr_en)
        wp <= wp + 1'b1;
    if (mem_rd_en)
        rp <= rp + 1'b1;
    if (mem_rd_valid) begin
        pf_mem[pf_wp] <= mem_rd_data;
        pf_wp <= pf_wp + 1'b1;
    end
    if (pf_pop)
        pf_rp <= pf_rp + 1'b1;
    pf_cnt   <= pf_cnt + {{PF_AW{1'b0}}, mem_rd_valid} - {{PF_AW{1'b0}}, pf_pop};
    inflight <= inflight + {{PF_AW{1'b0}}, mem_rd_en} - {{PF_AW{1'b0}}, mem_rd_valid};
    if (rst) begin
        now      <= {TS_W{1'b0}};
        wp       <= {ADDR_W{1'b0}};
        rp       <= {ADDR_W{1'b0}};
        used     <= {(ADDR_W+1){1'b0}};
        full     <= 1'b0;
        pf_wp    <= {PF_AW{1'b0}};
        pf_rp    <= {PF_AW{1'b0}};
        pf_cnt   <= {(PF_AW+1){1'b0}};
        inflight <= {(PF_AW+1){1'b0}};
    end
end

endmodule

`resetall
