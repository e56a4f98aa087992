// cclab_queue: drop-tail frame queue with a limit in bytes and in packets.
//
// Store and forward.  A frame is admitted or dropped at its first beat, from
// the length it carries (tuser[LEN_W:1]): it is charged to the queue at once
// (bytes, packets, memory words), so what is admitted always fits.  It is
// dropped when
//   - its length is outside [MIN_LEN, MAX_LEN]            (malformed)
//   - the loss generator's draw says so                    (random drop)
//   - bytes + len > lim_bytes, packets + 1 > lim_pkts, or the memory or the
//     descriptor ring is short                             (queue drop)
// and while it arrives it is checked: a non-last beat with a partial tkeep,
// more or fewer bytes than its length, a last beat whose tkeep is not its
// low bytes, or tuser[0] (the MAC's bad-frame flag) at its last beat make it
// malformed; an admitted frame found malformed is rolled back (write pointer
// and charges returned), never sent.  The check adds no bytes at the last
// beat: the bytes still due (rem) are counted down a beat ahead, with what
// the next beat may be (last, full, the last beat's tkeep) in registers, so
// that the rollback is a compare of tkeep, not an adder and a compare.  Every frame
// ends in exactly one verdict (ev_*), CLS_LAT cycles after its last beat at
// the input, the cycle at which the flow classifier has its flow index
// (ev_flow), which the descriptor keeps for the forwarded counters (deq_*).
//
// PIPELINE = 1 puts a register stage at the input: a beat is decided on a
// cycle after it arrived, and the admission compare (the room left under the
// limits against the frame's length and words) is taken at its arrival, into
// a register, so that no compare and no adder stand between the length and
// the occupancy update.  The occupancy is pipelined too (a delta register,
// then the room left under the limit).
//
// The ingress never stalls a frame, except that a first beat waits until
// DEC_GAP cycles have passed since the last frame's first beat (3, or 4 with
// PIPELINE = 1; only frames shorter than that many beats meet it, at 64 bit
// below 17 or 25 bytes: malformed, or a bare Ethernet header): admission
// decisions are at least DEC_GAP cycles apart, so the loss generator's
// pipelined draw and the pipelined occupancy are up to date at each
// decision.  A dequeue frees room a few cycles later than it could, never
// earlier.
//
// Egress: the frame is read in order, its tlast and tkeep rebuilt from its
// length; its charge leaves the queue when its first beat is taken (a frame
// is charged at its start on both sides).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_queue #(
    parameter DATA_W      = 64,
    parameter KEEP_W      = DATA_W / 8,
    parameter LEN_W       = 16,
    parameter USER_W      = LEN_W + 1,
    parameter ADDR_W      = 12,            // memory: 2^ADDR_W beats
    parameter DESC_ADDR_W = ADDR_W - 2,    // descriptor ring: frames queued at most
    parameter FLOW_W      = 4,
    parameter MIN_LEN     = 14,
    parameter MAX_LEN     = 1518,
    parameter CLS_LAT     = 3,             // last beat -> flow index, cycles
    parameter RAM_LAT     = 2,
    parameter PIPELINE    = 1
) (
    input  wire              clk,
    input  wire              rst,

    input  wire [DATA_W-1:0] s_axis_tdata,
    input  wire [KEEP_W-1:0] s_axis_tkeep,
    input  wire              s_axis_tvalid,
    output wire              s_axis_tready,
    input  wire              s_axis_tlast,
    input  wire [USER_W-1:0] s_axis_tuser,

    output wire [DATA_W-1:0] m_axis_tdata,
    output wire [KEEP_W-1:0] m_axis_tkeep,
    output wire              m_axis_tvalid,
    input  wire              m_axis_tready,
    output wire              m_axis_tlast,
    output wire [USER_W-1:0] m_axis_tuser,

    input  wire [31:0]       lim_bytes,
    input  wire [31:0]       lim_pkts,

    output wire              loss_draw,
    input  wire              loss_drop,

    // verdict of each frame: 0 enqueued, 1 random drop, 2 queue drop, 3 malformed
    output wire              ev_valid,
    output wire [1:0]        ev_kind,
    output wire [LEN_W-1:0]  ev_len,
    input  wire [FLOW_W-1:0] ev_flow,
    // occupancy seen by each arrival (for the histogram)
    output wire              arr_valid,
    output wire [31:0]       arr_bytes,
    // a frame leaves (its first beat is taken)
    output wire              deq_valid,
    output wire [LEN_W-1:0]  deq_len,
    output wire [FLOW_W-1:0] deq_flow,

    output wire [31:0]       q_bytes,
    output wire [31:0]       q_pkts
);

localparam KEEP_SH  = $clog2(KEEP_W);
localparam DEPTH    = 1 << ADDR_W;
// words compared in CW bits, wide enough for a frame's word count (LEN_W) and the memory's (ADDR_W + 1)
localparam CW       = (LEN_W > ADDR_W + 1 ? LEN_W : ADDR_W + 1) + 1;
localparam DDEPTH   = 1 << DESC_ADDR_W;
localparam K_OK = 2'd0, K_RND = 2'd1, K_QD = 2'd2, K_MAL = 2'd3;

localparam [LEN_W-1:0] KEEP_M1 = KEEP_W[LEN_W-1:0] - 1'b1;
function [LEN_W-1:0] words_of(input [LEN_W-1:0] n);
    words_of = (n + KEEP_M1) >> KEEP_SH;
endfunction

// the tkeep of a last beat holding the n mod KEEP_W low bytes (all of them when that is 0)
function [KEEP_W-1:0] keep_of(input [KEEP_SH-1:0] n);
    keep_of = n == 0 ? {KEEP_W{1'b1}} : ~({KEEP_W{1'b1}} << n);
endfunction

// ---- occupancy -----------------------------------------------------------
reg [31:0]     qb;            // bytes charged
reg [31:0]     qp;            // frames charged
reg [ADDR_W:0] qw;            // memory words reserved and not yet read

// ---- ingress ---------------------------------------------------------------
reg               in_frame;
reg  [1:0]        f_kind;
reg  [LEN_W-1:0]  f_len;
reg               f_mal;
// the bytes still due before the next beat, and what that beat may be (from rem, a beat ahead)
reg  [LEN_W-1:0]  f_rem;
reg               f_rem_zero;  // none: a further beat is beyond the length
reg               f_rem_le;    // at most KEEP_W: the next beat may be the last
reg               f_rem_ge;    // at least KEEP_W: the next beat may be a full one
reg  [ADDR_W-1:0] f_start;
reg  [ADDR_W-1:0] wptr;

// the beat being decided on (PIPELINE = 0: the input's; 1: the input stage's), which never waits
wire [DATA_W-1:0] i_tdata;
wire [KEEP_W-1:0] i_tkeep;
wire              i_tlast;
wire [USER_W-1:0] i_tuser;
wire              hs;
wire              fits;        // the frame fits under both limits and in the memory

wire              first   = !in_frame;
wire [LEN_W-1:0]  len_in  = i_tuser[LEN_W:1];
wire [LEN_W-1:0]  wds_in  = words_of(len_in);
/* verilator lint_off UNUSEDSIGNAL */      // with PIPELINE = 1 only add_w's ADDR_W + 1 bits
wire [CW-1:0]     wds_in_x = {{(CW-LEN_W){1'b0}}, wds_in};
/* verilator lint_on UNUSEDSIGNAL */
wire              bad_len = len_in < MIN_LEN || len_in > MAX_LEN;

generate
if (PIPELINE == 0) begin : g_adm_flat
    reg [1:0] dec_sr;          // a decision was taken 1, 2 cycles ago
    assign s_axis_tready = !(first && dec_sr != 2'b00);
    assign hs      = s_axis_tvalid && s_axis_tready;
    assign i_tdata = s_axis_tdata;
    assign i_tkeep = s_axis_tkeep;
    assign i_tlast = s_axis_tlast;
    assign i_tuser = s_axis_tuser;
    assign fits = {1'b0, qb} + {17'd0, len_in} <= {1'b0, lim_bytes} &&
                  qp < lim_pkts && qp < DDEPTH &&
                  {{(CW-ADDR_W-1){1'b0}}, qw} + wds_in_x <= DEPTH[CW-1:0];
    always @(posedge clk)
        dec_sr <= rst ? 2'b00 : {dec_sr[0], hs && first};
end else begin : g_adm_pipe
    reg signed [33:0]  room_b;
    reg                room_p;
    reg [ADDR_W:0]     room_w;
    reg                a_in_frame;
    reg  [2:0]         a_sr;   // a first beat came in 1, 2, 3 cycles ago
    reg                r_valid, r_last, r_fits;
    reg  [DATA_W-1:0]  r_data;
    reg  [KEEP_W-1:0]  r_keep;
    reg  [USER_W-1:0]  r_user;
    wire               a_first = !a_in_frame;
    assign s_axis_tready = !(a_first && a_sr != 3'b000);
    wire               a_hs    = s_axis_tvalid && s_axis_tready;
    wire [LEN_W-1:0]   a_len   = s_axis_tuser[LEN_W:1];
    wire [CW-1:0]      a_wds   = {{(CW-LEN_W){1'b0}}, words_of(a_len)};
    always @(posedge clk) begin
        room_b <= $signed({2'b0, lim_bytes}) - $signed({2'b0, qb});
        room_p <= qp < lim_pkts && qp < DDEPTH;
        room_w <= DEPTH[ADDR_W:0] - qw;
        // taken for every beat, used at a first one: the room now against the frame's length and words
        r_fits <= room_b >= $signed({18'd0, a_len}) && room_p && {{(CW-ADDR_W-1){1'b0}}, room_w} >= a_wds;
        r_valid <= a_hs;
        if (a_hs) begin
            a_in_frame <= !s_axis_tlast;
            r_data <= s_axis_tdata;
            r_keep <= s_axis_tkeep;
            r_last <= s_axis_tlast;
            r_user <= s_axis_tuser;
        end
        a_sr <= {a_sr[1:0], a_hs && a_first};
        if (rst) begin
            a_in_frame <= 1'b0;
            a_sr       <= 3'b000;
            r_valid    <= 1'b0;
        end
    end
    assign hs      = r_valid;
    assign i_tdata = r_data;
    assign i_tkeep = r_keep;
    assign i_tlast = r_last;
    assign i_tuser = r_user;
    assign fits    = r_fits;
end
endgenerate

wire [1:0]        kind_new = bad_len ? K_MAL : loss_drop ? K_RND : !fits ? K_QD : K_OK;
wire [1:0]        kind_cur = first ? kind_new : f_kind;
wire [LEN_W-1:0]  len_cur  = first ? len_in : f_len;
wire              acc_cur  = kind_cur == K_OK;
localparam [LEN_W-1:0] KEEP_L = KEEP_W[LEN_W-1:0];
wire [LEN_W-1:0]  rem_cur  = first ? len_in : f_rem;
wire              rem_zero = first ? len_in == 0 : f_rem_zero;
wire              rem_le   = first ? len_in <= KEEP_L : f_rem_le;
wire              rem_ge   = first ? len_in >= KEEP_L : f_rem_ge;
wire              beat_ok  = i_tlast ? !rem_zero && rem_le && i_tkeep == keep_of(rem_cur[KEEP_SH-1:0]) && !i_tuser[0]
                                     : rem_ge && i_tkeep == {KEEP_W{1'b1}};
wire              mal_new  = (first ? 1'b0 : f_mal) || !beat_ok;
wire              wr_en    = hs && acc_cur && !rem_zero;
wire [ADDR_W-1:0] start_ptr = first ? wptr : f_start;

wire reserve  = hs && first && kind_new == K_OK;
wire rollback = hs && i_tlast && acc_cur && mal_new;
wire finish   = hs && i_tlast;

assign loss_draw = hs && first && !bad_len;
assign arr_valid = loss_draw;
assign arr_bytes = qb;

always @(posedge clk) begin
    if (hs) begin
        in_frame <= !i_tlast;
        f_mal    <= mal_new;
        // rem - KEEP_W (0 once past the length): the low bytes, and so the last beat's tkeep, stay
        f_rem      <= rem_ge ? rem_cur - KEEP_L : {LEN_W{1'b0}};
        f_rem_zero <= rem_cur <= KEEP_L;
        f_rem_le   <= rem_cur <= 2 * KEEP_L;
        f_rem_ge   <= rem_cur >= 2 * KEEP_L;
        if (first) begin
            f_kind  <= kind_new;
            f_len   <= len_in;
            f_start <= wptr;
        end
    end
    if (rollback)
        wptr <= start_ptr;
    else if (wr_en)
        wptr <= wptr + 1'b1;
    if (rst) begin
        in_frame <= 1'b0;
        wptr     <= {ADDR_W{1'b0}};
    end
end

// ---- verdict pipeline (waits for the flow classifier) -----------------------
// CLS_LAT cycles after the last beat at the input: the input stage is one of them
localparam EV_LAT = PIPELINE == 0 ? CLS_LAT : CLS_LAT - 1;
reg [EV_LAT-1:0]  evp_v, evp_c;
reg [1:0]         evp_k [0:EV_LAT-1];
reg [LEN_W-1:0]   evp_l [0:EV_LAT-1];
integer i;
always @(posedge clk) begin
    evp_v[0] <= finish;
    evp_c[0] <= finish && acc_cur && !mal_new;
    evp_k[0] <= mal_new ? K_MAL : kind_cur;
    evp_l[0] <= len_cur;
    for (i = 1; i < EV_LAT; i = i + 1) begin
        evp_v[i] <= evp_v[i-1];
        evp_c[i] <= evp_c[i-1];
        evp_k[i] <= evp_k[i-1];
        evp_l[i] <= evp_l[i-1];
    end
    if (rst) begin
        evp_v <= {EV_LAT{1'b0}};
        evp_c <= {EV_LAT{1'b0}};
    end
end
assign ev_valid = evp_v[EV_LAT-1];
assign ev_kind  = evp_k[EV_LAT-1];
assign ev_len   = evp_l[EV_LAT-1];
wire   commit   = evp_c[EV_LAT-1];

// ---- descriptor ring: {flow, len}, read registered ----------------------------
reg  [FLOW_W+LEN_W-1:0] dmem [0:DDEPTH-1];
reg  [DESC_ADDR_W:0]    dwp, drp;
reg  [FLOW_W+LEN_W-1:0] head;
reg                     head_v;
wire                    head_pop;
wire                    head_load = (!head_v || head_pop) && dwp != drp;
always @(posedge clk) begin
    if (commit)
        dmem[dwp[DESC_ADDR_W-1:0]] <= {ev_flow, ev_len};
    if (head_load)
        head <= dmem[drp[DESC_ADDR_W-1:0]];
    if (commit)
        dwp <= dwp + 1'b1;
    if (head_load)
        drp <= drp + 1'b1;
    if (head_load)
        head_v <= 1'b1;
    else if (head_pop)
        head_v <= 1'b0;
    if (rst) begin
        dwp    <= 0;
        drp    <= 0;
        head_v <= 1'b0;
    end
end

// ---- egress: read words, rebuild tlast/tkeep --------------------------------
localparam OF_AW = 2, OF_D = 1 << OF_AW;
localparam META_W = KEEP_W + 2 + LEN_W + FLOW_W;   // keep, last, first, len, flow

reg               rd_act;
reg [LEN_W-1:0]   rd_left, rd_len;
reg [FLOW_W-1:0]  rd_flow;
reg [ADDR_W-1:0]  rptr;

reg [OF_AW:0]     of_cnt;
reg [OF_AW:0]     inflight;
wire              credit   = of_cnt + inflight < OF_D;
wire [LEN_W-1:0]  cur_len  = rd_act ? rd_len  : head[LEN_W-1:0];
wire [FLOW_W-1:0] cur_flow = rd_act ? rd_flow : head[FLOW_W+LEN_W-1:LEN_W];
wire [LEN_W-1:0]  cur_left = rd_act ? rd_left : words_of(head[LEN_W-1:0]);
wire              issue    = (rd_act || head_v) && credit;
wire              is_last  = cur_left == 1;
wire [KEEP_SH-1:0] tail    = cur_len[KEEP_SH-1:0];
wire [KEEP_W-1:0] last_keep = tail == 0 ? {KEEP_W{1'b1}} : ~({KEEP_W{1'b1}} << tail);
assign head_pop = issue && !rd_act;

always @(posedge clk) begin
    if (issue) begin
        rptr    <= rptr + 1'b1;
        rd_act  <= !is_last;
        rd_left <= cur_left - 1'b1;
        rd_len  <= cur_len;
        rd_flow <= cur_flow;
    end
    if (rst) begin
        rptr   <= {ADDR_W{1'b0}};
        rd_act <= 1'b0;
    end
end

wire [DATA_W-1:0] ram_q;
wire              ram_v;
cclab_ram #(.WIDTH(DATA_W), .ADDR_W(ADDR_W), .RD_LAT(RAM_LAT)) ram (
    .clk(clk), .rst(rst),
    .wr_en(wr_en), .wr_addr(wptr), .wr_data(i_tdata),
    .rd_en(issue), .rd_addr(rptr), .rd_data(ram_q), .rd_valid(ram_v)
);

// word metadata alongside the RAM latency
reg [META_W-1:0] meta [0:RAM_LAT-1];
always @(posedge clk) begin
    meta[0] <= {is_last ? last_keep : {KEEP_W{1'b1}}, is_last, !rd_act, cur_len, cur_flow};
    for (i = 1; i < RAM_LAT; i = i + 1)
        meta[i] <= meta[i-1];
end

// output FIFO
reg  [DATA_W+META_W-1:0] of_mem [0:OF_D-1];
reg  [OF_AW-1:0]         of_wp, of_rp;
wire [DATA_W+META_W-1:0] of_head = of_mem[of_rp];
wire                     of_pop  = m_axis_tvalid && m_axis_tready;
wire [META_W-1:0]        oh_meta = of_head[META_W-1:0];
wire                     oh_first = oh_meta[LEN_W+FLOW_W];

always @(posedge clk) begin
    if (ram_v) begin
        of_mem[of_wp] <= {ram_q, meta[RAM_LAT-1]};
        of_wp <= of_wp + 1'b1;
    end
    if (of_pop)
        of_rp <= of_rp + 1'b1;
    of_cnt   <= of_cnt + {{OF_AW{1'b0}}, ram_v} - {{OF_AW{1'b0}}, of_pop};
    inflight <= inflight + {{OF_AW{1'b0}}, issue} - {{OF_AW{1'b0}}, ram_v};
    if (rst) begin
        of_wp    <= {OF_AW{1'b0}};
        of_rp    <= {OF_AW{1'b0}};
        of_cnt   <= 0;
        inflight <= 0;
    end
end

assign m_axis_tvalid = of_cnt != 0;
assign m_axis_tdata  = of_head[DATA_W+META_W-1:META_W];
assign m_axis_tkeep  = oh_meta[META_W-1:META_W-KEEP_W];
assign m_axis_tlast  = oh_meta[LEN_W+FLOW_W+1];
assign m_axis_tuser  = {oh_meta[LEN_W+FLOW_W-1:FLOW_W], 1'b0};

// registered: the counters and the occupancy see a departure a cycle later
reg               deq_v;
reg [LEN_W-1:0]   deq_l;
reg [FLOW_W-1:0]  deq_f;
always @(posedge clk) begin
    deq_v <= of_pop && oh_first && !rst;
    deq_l <= oh_meta[LEN_W+FLOW_W-1:FLOW_W];
    deq_f <= oh_meta[FLOW_W-1:0];
end
assign deq_valid = deq_v;
assign deq_len   = deq_l;
assign deq_flow  = deq_f;

// ---- occupancy bookkeeping -----------------------------------------------------
wire [LEN_W-1:0] add_l = reserve   ? len_in  : {LEN_W{1'b0}};
wire [LEN_W-1:0] rb_l  = rollback  ? len_cur : {LEN_W{1'b0}};
wire [LEN_W-1:0] dq_l  = deq_valid ? deq_len : {LEN_W{1'b0}};
/* verilator lint_off UNUSEDSIGNAL */      // an admitted frame's words fit in ADDR_W + 1 bits
wire [CW-1:0]   wds_cur = {{(CW-LEN_W){1'b0}}, words_of(len_cur)};
/* verilator lint_on UNUSEDSIGNAL */
wire [ADDR_W:0] add_w = reserve  ? wds_in_x[ADDR_W:0] : {(ADDR_W+1){1'b0}};
wire [ADDR_W:0] rb_w  = rollback ? wds_cur[ADDR_W:0] : {(ADDR_W+1){1'b0}};
generate
if (PIPELINE == 0) begin : g_occ_flat
    wire [31:0] add_b = {{(32-LEN_W){1'b0}}, add_l};
    wire [31:0] rb_b  = {{(32-LEN_W){1'b0}}, rb_l};
    wire [31:0] dq_b  = {{(32-LEN_W){1'b0}}, dq_l};
    always @(posedge clk) begin
        qb <= qb + add_b - rb_b - dq_b;
        qp <= qp + {31'd0, reserve} - {31'd0, rollback} - {31'd0, deq_valid};
        qw <= qw + add_w - rb_w - {{ADDR_W{1'b0}}, issue};
        if (rst) begin
            qb <= 32'd0;
            qp <= 32'd0;
            qw <= {(ADDR_W+1){1'b0}};
        end
    end
end else begin : g_occ_pipe
    // this cycle's changes summed in narrow signed deltas, added next cycle
    reg signed [LEN_W+2:0]  d_b;
    reg signed [2:0]        d_p;
    /* verilator lint_off UNUSEDSIGNAL */  // qw counts modulo 2^(ADDR_W+1): the top bits are the sign
    reg signed [ADDR_W+2:0] d_w;
    /* verilator lint_on UNUSEDSIGNAL */
    always @(posedge clk) begin
        d_b <= $signed({3'b000, add_l}) - $signed({3'b000, rb_l}) - $signed({3'b000, dq_l});
        d_p <= $signed({2'b00, reserve}) - $signed({2'b00, rollback}) - $signed({2'b00, deq_valid});
        d_w <= $signed({2'b00, add_w}) - $signed({2'b00, rb_w}) - $signed({{(ADDR_W+2){1'b0}}, issue});
        qb  <= qb + {{(32-LEN_W-3){d_b[LEN_W+2]}}, d_b};
        qp  <= qp + {{29{d_p[2]}}, d_p};
        qw  <= qw + d_w[ADDR_W:0];
        if (rst) begin
            d_b <= 0;
            d_p <= 0;
            d_w <= 0;
            qb  <= 32'd0;
            qp  <= 32'd0;
            qw  <= {(ADDR_W+1){1'b0}};
        end
    end
end
endgenerate

assign q_bytes = qb;
assign q_pkts  = qp;

endmodule

`resetall
