// cclab_bottleneck: the cclab bottleneck element on AXI4-Stream.
//
//   s_axis -> cclab_queue (drop-tail, admission, random loss, rollback)
//          -> cclab_shaper (token bucket, rate R)
//          -> cclab_delay_line (D cycles, memory port)       -> m_axis
//   taps:     cclab_flow_parse -> cclab_flow_stats (per-flow counters)
//             cclab_qhist (queue depth seen by arrivals)
//
// s_axis carries each frame's length in bytes (no FCS) on tuser[LEN_W:1] of
// its first beat and the MAC's bad-frame flag on tuser[0] of its last beat.
// Every parameter and counter is on the AXI4-Lite register map below, and
// may be changed while frames flow.  A driver walks the block headers from
// 0x0000: each block starts with type, version and the offset of the next
// block (0 at the last), as Corundum's register blocks do.
//
//   0x0000 element  0x00 type 0xCC1B0000, 0x04 version, 0x08 next
//                   0x0C {DATA_W[31:16], N_FLOWS[15:8], HIST_BINS[7:0]}  (ro)
//                   0x10 control: bit 0 shaper on; write bit 1: clear counters
//                   0x14 malformed frames (ro)   0x18 queued bytes (ro)
//                   0x1C queued frames (ro)      0x20 delay-line beats (ro)
//                   0x24 clock in kHz (ro, CLK_KHZ)
//   0x0100 shaper   type 0xCC1B0001; 0x0C rate (bytes/cycle, Q8.24); 0x10 burst (bytes)
//   0x0200 queue    type 0xCC1B0002; 0x0C limit bytes; 0x10 limit frames;
//                   0x14 memory bytes (ro); 0x18 frames at most (ro); 0x1C MAX_LEN (ro)
//   0x0300 delay    type 0xCC1B0003; 0x0C delay (cycles); 0x10 memory beats (ro);
//                   0x14 least exact delay (ro)
//   0x0400 loss     type 0xCC1B0004; 0x0C threshold (P(drop) * 2^32); 0x10 seed (a write restarts)
//   0x0500 hist     type 0xCC1B0005; 0x0C bin shift (bin = depth >> shift); 0x10 bins (ro);
//                   0x40 + 4 * b: bin b (ro)
//   0x0600 flows    type 0xCC1B0006; 0x0C entries (N_FLOWS + 1, the last is the fallback);
//                   0x10 table offset (0x1000); 0x14 entry stride (0x80)
//   0x1000 + 0x80 * e, entry e: 0x00 src, 0x04 dst, 0x08 {sport, dport},
//                   0x0C {valid[31], proto[7:0]}; 0x40 + 8 * c: counter c, low
//                   word then high word (reading the low word latches the high)
//
// Every version register reads 0x00010000.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_bottleneck #(
    parameter DATA_W      = 64,
    parameter KEEP_W      = DATA_W / 8,
    parameter LEN_W       = 16,
    parameter USER_W      = LEN_W + 1,
    parameter CLK_KHZ     = 156250,
    parameter Q_ADDR_W    = 12,            // queue memory: 2^Q_ADDR_W beats
    parameter DL_ADDR_W   = 12,            // delay-line memory: 2^DL_ADDR_W beats
    parameter DL_EXT_MEM  = 0,             // 1: the delay line's memory port is dl_mem_*
    parameter RAM_LAT     = 2,
    parameter N_FLOWS     = 8,
    parameter HIST_BINS   = 16,
    parameter MAX_LEN     = 1518,
    parameter PIPELINE    = 1,
    parameter AXIL_ADDR_W = 16,
    parameter FLOW_W      = $clog2(N_FLOWS + 1),
    parameter DL_MEM_W    = DATA_W + KEEP_W + 1 + 32
) (
    input  wire                   clk,
    input  wire                   rst,

    input  wire [DATA_W-1:0]      s_axis_tdata,
    input  wire [KEEP_W-1:0]      s_axis_tkeep,
    input  wire                   s_axis_tvalid,
    output wire                   s_axis_tready,
    input  wire                   s_axis_tlast,
    input  wire [USER_W-1:0]      s_axis_tuser,

    output wire [DATA_W-1:0]      m_axis_tdata,
    output wire [KEEP_W-1:0]      m_axis_tkeep,
    output wire                   m_axis_tvalid,
    input  wire                   m_axis_tready,
    output wire                   m_axis_tlast,

    input  wire [AXIL_ADDR_W-1:0] s_axil_awaddr,
    input  wire [2:0]             s_axil_awprot,
    input  wire                   s_axil_awvalid,
    output wire                   s_axil_awready,
    input  wire [31:0]            s_axil_wdata,
    input  wire [3:0]             s_axil_wstrb,
    input  wire                   s_axil_wvalid,
    output wire                   s_axil_wready,
    output wire [1:0]             s_axil_bresp,
    output reg                    s_axil_bvalid,
    input  wire                   s_axil_bready,
    input  wire [AXIL_ADDR_W-1:0] s_axil_araddr,
    input  wire [2:0]             s_axil_arprot,
    input  wire                   s_axil_arvalid,
    output wire                   s_axil_arready,
    output reg  [31:0]            s_axil_rdata,
    output wire [1:0]             s_axil_rresp,
    output reg                    s_axil_rvalid,
    input  wire                   s_axil_rready,

    // the delay line's memory (DDR through an AXI4 master on a board), when DL_EXT_MEM = 1
    output wire                   dl_mem_wr_en,
    output wire [DL_ADDR_W-1:0]   dl_mem_wr_addr,
    output wire [DL_MEM_W-1:0]    dl_mem_wr_data,
    input  wire                   dl_mem_wr_ready,
    output wire                   dl_mem_rd_en,
    output wire [DL_ADDR_W-1:0]   dl_mem_rd_addr,
    input  wire                   dl_mem_rd_ready,
    input  wire [DL_MEM_W-1:0]    dl_mem_rd_data,
    input  wire                   dl_mem_rd_valid
);

localparam [31:0] VERSION = 32'h00010000;
localparam HB_W = $clog2(HIST_BINS);

// ---- registers ---------------------------------------------------------------------
reg         shaper_on;
reg  [31:0] rate, burst, lim_bytes, lim_pkts, delay, thr, seed;
reg  [4:0]  hist_shift;
reg         seed_load, clear;

// ---- data path ---------------------------------------------------------------------
wire [DATA_W-1:0] q_tdata,  sh_tdata;
wire [KEEP_W-1:0] q_tkeep,  sh_tkeep;
wire              q_tvalid, sh_tvalid, q_tready, sh_tready, q_tlast, sh_tlast;
wire [USER_W-1:0] q_tuser;
/* verilator lint_off UNUSEDSIGNAL */       // the delay line needs no length
wire [USER_W-1:0] sh_tuser;
/* verilator lint_on UNUSEDSIGNAL */

wire              loss_draw, loss_drop;
wire              ev_valid, deq_valid, arr_valid;
wire [1:0]        ev_kind;
wire [LEN_W-1:0]  ev_len, deq_len;
wire [FLOW_W-1:0] flow_idx, deq_flow;
wire [31:0]       arr_bytes, q_bytes, q_pkts, malformed;
wire              key_valid;
wire [103:0]      key;
wire [DL_ADDR_W:0] dl_fill;

cclab_queue #(
    .DATA_W(DATA_W), .KEEP_W(KEEP_W), .LEN_W(LEN_W), .ADDR_W(Q_ADDR_W), .FLOW_W(FLOW_W),
    .MAX_LEN(MAX_LEN), .CLS_LAT(3), .RAM_LAT(RAM_LAT), .PIPELINE(PIPELINE)
) queue (
    .clk(clk), .rst(rst),
    .s_axis_tdata(s_axis_tdata), .s_axis_tkeep(s_axis_tkeep), .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tready(s_axis_tready), .s_axis_tlast(s_axis_tlast), .s_axis_tuser(s_axis_tuser),
    .m_axis_tdata(q_tdata), .m_axis_tkeep(q_tkeep), .m_axis_tvalid(q_tvalid),
    .m_axis_tready(q_tready), .m_axis_tlast(q_tlast), .m_axis_tuser(q_tuser),
    .lim_bytes(lim_bytes), .lim_pkts(lim_pkts),
    .loss_draw(loss_draw), .loss_drop(loss_drop),
    .ev_valid(ev_valid), .ev_kind(ev_kind), .ev_len(ev_len), .ev_flow(flow_idx),
    .arr_valid(arr_valid), .arr_bytes(arr_bytes),
    .deq_valid(deq_valid), .deq_len(deq_len), .deq_flow(deq_flow),
    .q_bytes(q_bytes), .q_pkts(q_pkts)
);

cclab_loss loss (
    .clk(clk), .rst(rst), .thr(thr), .seed(seed), .seed_load(seed_load),
    .draw(loss_draw), .drop(loss_drop)
);

cclab_shaper #(
    .DATA_W(DATA_W), .KEEP_W(KEEP_W), .LEN_W(LEN_W), .PIPELINE(PIPELINE)
) shaper (
    .clk(clk), .rst(rst),
    .s_axis_tdata(q_tdata), .s_axis_tkeep(q_tkeep), .s_axis_tvalid(q_tvalid),
    .s_axis_tready(q_tready), .s_axis_tlast(q_tlast), .s_axis_tuser(q_tuser),
    .m_axis_tdata(sh_tdata), .m_axis_tkeep(sh_tkeep), .m_axis_tvalid(sh_tvalid),
    .m_axis_tready(sh_tready), .m_axis_tlast(sh_tlast), .m_axis_tuser(sh_tuser),
    .enable(shaper_on), .rate(rate), .burst(burst)
);

wire                  mem_wr_en, mem_rd_en, mem_wr_ready, mem_rd_ready, mem_rd_valid;
wire [DL_ADDR_W-1:0]  mem_wr_addr, mem_rd_addr;
wire [DL_MEM_W-1:0]   mem_wr_data, mem_rd_data;

cclab_delay_line #(
    .DATA_W(DATA_W), .KEEP_W(KEEP_W), .ADDR_W(DL_ADDR_W), .TS_W(32), .MEM_W(DL_MEM_W)
) delay_line (
    .clk(clk), .rst(rst),
    .s_axis_tdata(sh_tdata), .s_axis_tkeep(sh_tkeep), .s_axis_tvalid(sh_tvalid),
    .s_axis_tready(sh_tready), .s_axis_tlast(sh_tlast),
    .m_axis_tdata(m_axis_tdata), .m_axis_tkeep(m_axis_tkeep), .m_axis_tvalid(m_axis_tvalid),
    .m_axis_tready(m_axis_tready), .m_axis_tlast(m_axis_tlast),
    .delay(delay),
    .mem_wr_en(mem_wr_en), .mem_wr_addr(mem_wr_addr), .mem_wr_data(mem_wr_data),
    .mem_wr_ready(mem_wr_ready), .mem_rd_en(mem_rd_en), .mem_rd_addr(mem_rd_addr),
    .mem_rd_ready(mem_rd_ready), .mem_rd_data(mem_rd_data), .mem_rd_valid(mem_rd_valid),
    .fill(dl_fill)
);

assign dl_mem_wr_en   = mem_wr_en;
assign dl_mem_wr_addr = mem_wr_addr;
assign dl_mem_wr_data = mem_wr_data;
assign dl_mem_rd_en   = mem_rd_en;
assign dl_mem_rd_addr = mem_rd_addr;

generate
if (DL_EXT_MEM) begin : g_ext_mem
    assign mem_wr_ready = dl_mem_wr_ready;
    assign mem_rd_ready = dl_mem_rd_ready;
    assign mem_rd_data  = dl_mem_rd_data;
    assign mem_rd_valid = dl_mem_rd_valid;
end else begin : g_int_mem
    /* verilator lint_off UNUSEDSIGNAL */
    wire unused_ext = dl_mem_wr_ready ^ dl_mem_rd_ready ^ dl_mem_rd_valid ^ ^dl_mem_rd_data;
    /* verilator lint_on UNUSEDSIGNAL */
    assign mem_wr_ready = 1'b1;
    assign mem_rd_ready = 1'b1;
    cclab_ram #(.WIDTH(DL_MEM_W), .ADDR_W(DL_ADDR_W), .RD_LAT(RAM_LAT)) dl_ram (
        .clk(clk), .rst(rst),
        .wr_en(mem_wr_en), .wr_addr(mem_wr_addr), .wr_data(mem_wr_data),
        .rd_en(mem_rd_en), .rd_addr(mem_rd_addr), .rd_data(mem_rd_data), .rd_valid(mem_rd_valid)
    );
end
endgenerate

cclab_flow_parse #(.DATA_W(DATA_W), .KEEP_W(KEEP_W), .LEN_W(LEN_W)) flow_parse (
    .clk(clk), .rst(rst),
    .tap_tdata(s_axis_tdata), .tap_tkeep(s_axis_tkeep), .tap_tvalid(s_axis_tvalid),
    .tap_tready(s_axis_tready), .tap_tlast(s_axis_tlast), .tap_tuser(s_axis_tuser),
    .key_valid(key_valid), .key(key)
);

reg  [FLOW_W-1:0] rd_entry;
reg  [3:0]        rd_word;
wire [63:0]       flow_rd;
reg               cfg_wr;
reg  [FLOW_W-1:0] cfg_entry;
reg  [1:0]        cfg_word;
reg  [31:0]       cfg_wdata;

cclab_flow_stats #(.N_FLOWS(N_FLOWS), .FLOW_W(FLOW_W), .LEN_W(LEN_W), .CNT_W(64)) flow_stats (
    .clk(clk), .rst(rst),
    .key_valid(key_valid), .key(key), .flow_idx(flow_idx),
    .ev_valid(ev_valid), .ev_kind(ev_kind), .ev_len(ev_len), .ev_flow(flow_idx),
    .deq_valid(deq_valid), .deq_len(deq_len), .deq_flow(deq_flow), .clear(clear),
    .cfg_wr(cfg_wr), .cfg_entry(cfg_entry), .cfg_word(cfg_word), .cfg_wdata(cfg_wdata),
    .rd_entry(rd_entry), .rd_word(rd_word), .rd_data(flow_rd), .malformed(malformed)
);

reg  [HB_W-1:0] rd_bin;
wire [31:0]     hist_rd;
cclab_qhist #(.BINS(HIST_BINS)) qhist (
    .clk(clk), .rst(rst), .sample(arr_valid), .depth(arr_bytes), .shift(hist_shift),
    .clear(clear), .rd_bin(rd_bin), .rd_data(hist_rd)
);

// ---- AXI4-Lite ----------------------------------------------------------------------
// A write is taken when address and data are both there; one read at a time.
// Reads of the flow table and the histogram go through a registered index
// (rd_entry/rd_word/rd_bin) and a registered mux: the read answers three
// cycles after its address.
/* verilator lint_off UNUSEDSIGNAL */
wire unused_axil = ^s_axil_awprot ^ ^s_axil_arprot ^ ^s_axil_wstrb ^ ^s_axil_awaddr[1:0] ^ ^s_axil_araddr[1:0];
/* verilator lint_on UNUSEDSIGNAL */

wire do_wr = s_axil_awvalid && s_axil_wvalid && !s_axil_bvalid;
assign s_axil_awready = do_wr;
assign s_axil_wready  = do_wr;
assign s_axil_bresp   = 2'b00;
assign s_axil_rresp   = 2'b00;

wire [15:0] wa = {{(16-AXIL_ADDR_W){1'b0}}, s_axil_awaddr[AXIL_ADDR_W-1:2], 2'b00};
wire [31:0] wd = s_axil_wdata;

always @(posedge clk) begin
    seed_load <= 1'b0;
    clear     <= 1'b0;
    cfg_wr    <= 1'b0;
    if (s_axil_bvalid && s_axil_bready)
        s_axil_bvalid <= 1'b0;
    if (do_wr) begin
        s_axil_bvalid <= 1'b1;
        case (wa)
            16'h0010: begin shaper_on <= wd[0]; clear <= wd[1]; end
            16'h010C: rate       <= wd;
            16'h0110: burst      <= wd;
            16'h020C: lim_bytes  <= wd;
            16'h0210: lim_pkts   <= wd;
            16'h030C: delay      <= wd;
            16'h040C: thr        <= wd;
            16'h0410: begin seed <= wd; seed_load <= 1'b1; end
            16'h050C: hist_shift <= wd[4:0];
            default: ;
        endcase
        if (wa[15:12] == 4'h1 && wa[6:4] == 3'd0) begin
            cfg_wr    <= 1'b1;
            cfg_entry <= wa[7+FLOW_W-1:7];
            cfg_word  <= wa[3:2];
            cfg_wdata <= wd;
        end
    end
    if (rst) begin
        s_axil_bvalid <= 1'b0;
        shaper_on     <= 1'b0;
        rate          <= 32'h0800_0000;   // 8 bytes a cycle: a 64-bit line
        burst         <= 32'd3028;        // two maximum frames
        lim_bytes     <= 32'hffff_ffff;   // the memory is the limit
        lim_pkts      <= 32'hffff_ffff;
        delay         <= 32'd0;
        thr           <= 32'd0;
        seed          <= 32'd1;
        hist_shift    <= 5'd10;
        seed_load     <= 1'b0;
        clear         <= 1'b0;
        cfg_wr        <= 1'b0;
    end
end

// reads: capture the address, set the indices, answer a cycle later
reg         rd_busy;
reg  [1:0]  rd_wait;
reg  [15:0] ra;
reg  [31:0] hi_latch;
assign s_axil_arready = !rd_busy && !s_axil_rvalid;

function [31:0] header(input [31:0] typ, input [31:0] nxt, input [3:0] w);
    case (w)
        4'h0: header = typ;
        4'h4: header = VERSION;
        4'h8: header = nxt;
        default: header = 32'd0;
    endcase
endfunction

reg [31:0] rv;
always @* begin
    rv = 32'd0;
    case (ra[15:8])
        8'h00: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0000, 32'h0100, ra[3:0]);
            8'h0C: rv = {DATA_W[15:0], N_FLOWS[7:0], HIST_BINS[7:0]};
            8'h10: rv = {31'd0, shaper_on};
            8'h14: rv = malformed;
            8'h18: rv = q_bytes;
            8'h1C: rv = q_pkts;
            8'h20: rv = {{(31-DL_ADDR_W){1'b0}}, dl_fill};
            8'h24: rv = CLK_KHZ;
            default: ;
        endcase
        8'h01: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0001, 32'h0200, ra[3:0]);
            8'h0C: rv = rate;
            8'h10: rv = burst;
            default: ;
        endcase
        8'h02: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0002, 32'h0300, ra[3:0]);
            8'h0C: rv = lim_bytes;
            8'h10: rv = lim_pkts;
            8'h14: rv = KEEP_W << Q_ADDR_W;
            8'h18: rv = 1 << (Q_ADDR_W - 2);
            8'h1C: rv = MAX_LEN;
            default: ;
        endcase
        8'h03: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0003, 32'h0400, ra[3:0]);
            8'h0C: rv = delay;
            8'h10: rv = 1 << DL_ADDR_W;
            8'h14: rv = RAM_LAT + 2;
            default: ;
        endcase
        8'h04: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0004, 32'h0500, ra[3:0]);
            8'h0C: rv = thr;
            8'h10: rv = seed;
            default: ;
        endcase
        8'h05: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0005, 32'h0600, ra[3:0]);
            8'h0C: rv = {27'd0, hist_shift};
            8'h10: rv = HIST_BINS;
            default: if (ra[7:6] != 2'b00) rv = hist_rd;
        endcase
        8'h06: case (ra[7:0])
            8'h00, 8'h04, 8'h08: rv = header(32'hCC1B0006, 32'h0000, ra[3:0]);
            8'h0C: rv = N_FLOWS + 1;
            8'h10: rv = 32'h1000;
            8'h14: rv = 32'h80;
            default: ;
        endcase
        default:
            if (ra[15:12] == 4'h1)
                rv = (rd_word[3] && ra[2]) ? hi_latch : flow_rd[31:0];
    endcase
end

always @(posedge clk) begin
    if (s_axil_rvalid && s_axil_rready)
        s_axil_rvalid <= 1'b0;
    if (s_axil_arvalid && s_axil_arready) begin
        ra       <= {{(16-AXIL_ADDR_W){1'b0}}, s_axil_araddr[AXIL_ADDR_W-1:2], 2'b00};
        rd_entry <= s_axil_araddr[7+FLOW_W-1:7];
        rd_word  <= s_axil_araddr[6] ? {1'b1, s_axil_araddr[5:3]} : {2'b00, s_axil_araddr[3:2]};
        rd_bin   <= s_axil_araddr[HB_W+1:2];
        rd_busy  <= 1'b1;
        rd_wait  <= 2'd2;
    end else if (rd_wait != 2'd0) begin
        rd_wait  <= rd_wait - 1'b1;
    end else if (rd_busy) begin
        rd_busy       <= 1'b0;
        s_axil_rvalid <= 1'b1;
        s_axil_rdata  <= rv;
        if (ra[15:12] == 4'h1 && rd_word[3] && !ra[2])
            hi_latch <= flow_rd[63:32];
    end
    if (rst) begin
        rd_busy       <= 1'b0;
        rd_wait       <= 2'd0;
        s_axil_rvalid <= 1'b0;
    end
end

endmodule

`resetall
