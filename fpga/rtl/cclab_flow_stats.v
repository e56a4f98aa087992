// cclab_flow_stats: per-flow counters by exact 5-tuple, with a fallback entry.
//
// The controller installs up to N_FLOWS keys (cfg_*); a frame whose key
// matches none is counted on entry N_FLOWS, the fallback.  Each entry has the
// eight counters of the contract, in this order (index c, CNT_W bits each):
//   0 forwarded bytes      1 forwarded packets
//   2 random-drop bytes    3 random-drop packets
//   4 queue-drop bytes     5 queue-drop packets
//   6 enqueued bytes       7 enqueued packets
// "Enqueued" counts every well-formed arrival (dropped ones too), so that
// enqueued - forwarded - drops is what the queue holds.  Malformed frames
// are counted once, on their own counter, and on no flow.
//
// key -> flow index is one registered stage (flow_idx, valid a cycle after
// key_valid); the queue waits for it (its CLS_LAT).  Installing a key while
// frames flow: clear its valid bit, write the key, set it again.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_flow_stats #(
    parameter N_FLOWS = 8,
    parameter FLOW_W  = $clog2(N_FLOWS + 1),
    parameter LEN_W   = 16,
    parameter CNT_W   = 64
) (
    input  wire              clk,
    input  wire              rst,

    input  wire              key_valid,
    input  wire [103:0]      key,
    output reg  [FLOW_W-1:0] flow_idx,

    input  wire              ev_valid,
    input  wire [1:0]        ev_kind,      // 0 enqueued, 1 random drop, 2 queue drop, 3 malformed
    input  wire [LEN_W-1:0]  ev_len,
    input  wire [FLOW_W-1:0] ev_flow,
    input  wire              deq_valid,
    input  wire [LEN_W-1:0]  deq_len,
    input  wire [FLOW_W-1:0] deq_flow,
    input  wire              clear,

    input  wire              cfg_wr,
    input  wire [FLOW_W-1:0] cfg_entry,
    input  wire [1:0]        cfg_word,     // 0 src, 1 dst, 2 {sport, dport}, 3 {valid[31], proto[7:0]}
    input  wire [31:0]       cfg_wdata,

    input  wire [FLOW_W-1:0] rd_entry,
    input  wire [3:0]        rd_word,      // 0..3 key words as cfg_word; 8 + c: counter c
    output reg  [CNT_W-1:0]  rd_data,      // a cycle after rd_entry/rd_word
    output reg  [31:0]       malformed
);

localparam NE = N_FLOWS + 1;

reg [103:0]     keys  [0:N_FLOWS-1];
reg [N_FLOWS-1:0] kv;
reg [NE*8*CNT_W-1:0] cnt;                   // counter k at [k*CNT_W +: CNT_W]

// ---- match ----------------------------------------------------------------------
integer i;
reg [FLOW_W-1:0] hit;
always @* begin
    hit = N_FLOWS[FLOW_W-1:0];
    for (i = N_FLOWS - 1; i >= 0; i = i - 1)
        if (kv[i] && keys[i] == key)
            hit = i[FLOW_W-1:0];
end
always @(posedge clk)
    if (key_valid)
        flow_idx <= hit;

// Entry indices and loop counters meet at their natural widths below (an index
// of FLOW_W bits into N_FLOWS keys, an integer loop variable against it).
/* verilator lint_off WIDTH */

// ---- key table --------------------------------------------------------------------
always @(posedge clk) begin
    if (cfg_wr && cfg_entry < N_FLOWS) begin
        case (cfg_word)
            2'd0: keys[cfg_entry][103:72] <= cfg_wdata;
            2'd1: keys[cfg_entry][71:40]  <= cfg_wdata;
            2'd2: keys[cfg_entry][39:8]   <= cfg_wdata;
            default: begin
                keys[cfg_entry][7:0] <= cfg_wdata[7:0];
                kv[cfg_entry]        <= cfg_wdata[31];
            end
        endcase
    end
    if (rst)
        kv <= {N_FLOWS{1'b0}};
end

// ---- counters ---------------------------------------------------------------------
wire [CNT_W-1:0] ev_b  = {{(CNT_W-LEN_W){1'b0}}, ev_len};
wire [CNT_W-1:0] dq_b  = {{(CNT_W-LEN_W){1'b0}}, deq_len};
wire [CNT_W-1:0] one   = {{(CNT_W-1){1'b0}}, 1'b1};
wire             ev_ok = ev_valid && ev_kind != 2'd3;
integer e;
always @(posedge clk) begin
    for (e = 0; e < NE; e = e + 1) begin
        if (deq_valid && deq_flow == e) begin
            cnt[(e*8 + 0)*CNT_W +: CNT_W] <= cnt[(e*8 + 0)*CNT_W +: CNT_W] + dq_b;
            cnt[(e*8 + 1)*CNT_W +: CNT_W] <= cnt[(e*8 + 1)*CNT_W +: CNT_W] + one;
        end
        if (ev_ok && ev_flow == e) begin
            cnt[(e*8 + 6)*CNT_W +: CNT_W] <= cnt[(e*8 + 6)*CNT_W +: CNT_W] + ev_b;
            cnt[(e*8 + 7)*CNT_W +: CNT_W] <= cnt[(e*8 + 7)*CNT_W +: CNT_W] + one;
            if (ev_kind == 2'd1) begin
                cnt[(e*8 + 2)*CNT_W +: CNT_W] <= cnt[(e*8 + 2)*CNT_W +: CNT_W] + ev_b;
                cnt[(e*8 + 3)*CNT_W +: CNT_W] <= cnt[(e*8 + 3)*CNT_W +: CNT_W] + one;
            end
            if (ev_kind == 2'd2) begin
                cnt[(e*8 + 4)*CNT_W +: CNT_W] <= cnt[(e*8 + 4)*CNT_W +: CNT_W] + ev_b;
                cnt[(e*8 + 5)*CNT_W +: CNT_W] <= cnt[(e*8 + 5)*CNT_W +: CNT_W] + one;
            end
        end
    end
    if (ev_valid && ev_kind == 2'd3)
        malformed <= malformed + 1'b1;
    if (rst || clear) begin
        cnt <= {(NE*8*CNT_W){1'b0}};
        malformed <= 32'd0;
    end
end


// ---- read -------------------------------------------------------------------------
always @* begin
    rd_data = {CNT_W{1'b0}};
    if (rd_word[3])
        rd_data = cnt[(rd_entry * 8 + rd_word[2:0]) * CNT_W +: CNT_W];
    else if (rd_entry < N_FLOWS)
        case (rd_word[1:0])
            2'd0: rd_data[31:0] = keys[rd_entry][103:72];
            2'd1: rd_data[31:0] = keys[rd_entry][71:40];
            2'd2: rd_data[31:0] = keys[rd_entry][39:8];
            default: rd_data[31:0] = {kv[rd_entry], 23'd0, keys[rd_entry][7:0]};
        endcase
end
/* verilator lint_on WIDTH */

endmodule

`resetall
