// cclab_qhist: histogram of the queue depth seen by arriving frames.
//
// Each well-formed arrival adds one to bin min(depth >> shift, BINS - 1),
// depth being the bytes queued before it (so bin b holds arrivals that found
// [b, b + 1) * 2^shift bytes, the last bin everything above).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_qhist #(
    parameter BINS   = 16,
    parameter BIN_W  = $clog2(BINS)
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             sample,
    input  wire [31:0]      depth,
    input  wire [4:0]       shift,
    input  wire             clear,
    input  wire [BIN_W-1:0] rd_bin,
    output reg  [31:0]      rd_data         // a cycle after rd_bin
);

reg [31:0] hist [0:BINS-1];
reg        s_q;
reg [31:0] d_q;
always @(posedge clk) begin
    s_q <= sample && !rst;
    d_q <= depth >> shift;
end
wire [BIN_W-1:0] b = d_q >= BINS ? BINS[BIN_W-1:0] - 1'b1 : d_q[BIN_W-1:0];

integer i;
always @(posedge clk) begin
    if (s_q)
        hist[b] <= hist[b] + 1'b1;
    if (rst || clear)
        for (i = 0; i < BINS; i = i + 1)
            hist[i] <= 32'd0;
end

always @(posedge clk)
    rd_data <= hist[rd_bin];

endmodule

`resetall
