// cclab_shaper: token-bucket shaper for rate R on an AXI4-Stream of frames.
//
// A frame is charged at its start: the first beat passes when the bucket is
// not negative, and its length (tuser[LEN_W:1] on the first beat) is taken
// from the bucket at once, which may leave it negative; the rest of the
// frame passes without a check.  Every cycle the bucket gains `rate`, up to
// `burst` bytes.  Over a long busy period the bytes sent are rate * cycles,
// the deficit of the last frame being at most one frame.
//
//   rate   bytes per cycle in Q8.24 (R[bit/s] / 8 / f_clk * 2^24)
//   burst  bytes the bucket holds (at least one maximum frame)
//   enable 0: frames pass at line rate, the bucket is held full
//
// PIPELINE = 0 is the textbook form: the charge, the refill and the cap are
// one adder chain in one cycle (about 60 MHz on ECP5).  PIPELINE = 1 splits
// it: the increment (rate, or rate - len in the cycle after a start) and the
// cap test are precomputed a cycle ahead, so each cycle holds one 57-bit add
// and one compare side by side.  A charge then lands one cycle after its
// start, before the next first beat can arrive (a frame has at least two
// beats at 64 bit; the queue drops shorter ones as malformed), and a first
// beat waits one cycle at the head (`armed`) so that its length is in the
// precomputed registers: at most one idle cycle per frame, which only a rate
// within a beat per frame of line rate notices.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_shaper #(
    parameter DATA_W   = 64,
    parameter KEEP_W   = DATA_W / 8,
    parameter LEN_W    = 16,
    parameter USER_W   = LEN_W + 1,
    parameter FRAC     = 24,           // fractional bits of rate and bucket
    parameter PIPELINE = 1
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

    input  wire              enable,
    input  wire [31:0]       rate,         // Q8.24 bytes per cycle
    input  wire [31:0]       burst         // bytes
);

localparam TOK_W = 33 + FRAC;              // signed: sign, 32 integer bits, FRAC

reg  signed [TOK_W-1:0] tokens;
reg                     in_frame;

wire signed [TOK_W-1:0] rate_fx  = {{(TOK_W-32){1'b0}}, rate} <<< (FRAC - 24);
wire signed [TOK_W-1:0] burst_fx = {1'b0, burst, {FRAC{1'b0}}};
wire        [LEN_W-1:0] len      = s_axis_tuser[LEN_W:1];
wire signed [TOK_W-1:0] len_fx   = {{(33-LEN_W){1'b0}}, len, {FRAC{1'b0}}};

// armed: the head frame's first beat has been shown for a cycle, so the
// pipelined form has its length in its precomputed registers (always 1 when
// PIPELINE = 0).
reg  armed;
wire pass  = in_frame || !enable || (!tokens[TOK_W-1] && armed);
wire start = !in_frame && s_axis_tvalid && m_axis_tready && pass;

assign m_axis_tdata  = s_axis_tdata;
assign m_axis_tkeep  = s_axis_tkeep;
assign m_axis_tlast  = s_axis_tlast;
assign m_axis_tuser  = s_axis_tuser;
assign m_axis_tvalid = s_axis_tvalid && pass;
assign s_axis_tready = m_axis_tready && pass;

always @(posedge clk) begin
    if (rst || PIPELINE == 0)
        armed <= PIPELINE == 0;
    else
        armed <= s_axis_tvalid && !in_frame && !s_axis_tready;
    if (rst)
        in_frame <= 1'b0;
    else if (s_axis_tvalid && s_axis_tready)
        in_frame <= !s_axis_tlast;
end

generate
if (PIPELINE == 0) begin : g_flat
    wire signed [TOK_W-1:0] sum = tokens + rate_fx - (start ? len_fx : {TOK_W{1'b0}});
    always @(posedge clk) begin
        if (rst || !enable)
            tokens <= burst_fx;
        else
            tokens <= (sum > burst_fx) ? burst_fx : sum;
    end
end else begin : g_pipe
    // inc: what the bucket gains next cycle; over: tokens + inc would pass the
    // cap, i.e. tokens > burst - inc (both registered one cycle ahead).
    reg  signed [TOK_W-1:0] inc;
    reg  signed [TOK_W-1:0] cap_lim;       // burst - inc
    reg  signed [TOK_W-1:0] bmr;           // burst - rate
    reg  signed [TOK_W-1:0] bmr_len;       // burst - rate + len of the head frame
    reg  signed [TOK_W-1:0] rml;           // rate - len of the head frame
    always @(posedge clk) begin
        bmr     <= burst_fx - rate_fx;
        bmr_len <= bmr + len_fx;
        rml     <= rate_fx - len_fx;
        inc     <= start ? rml : rate_fx;
        cap_lim <= start ? bmr_len : bmr;
        if (rst || !enable)
            tokens <= burst_fx;
        else if (tokens > cap_lim)
            tokens <= burst_fx;
        else
            tokens <= tokens + inc;
    end
end
endgenerate

endmodule

`resetall
