// cclab_ram: simple dual-port RAM behind the element's memory port.
//
// One write port, one read port; a read issued with rd_en returns its word
// RD_LAT cycles later with rd_valid.  This is the memory model of the
// simulation and the block RAM of the reference build; a board with DDR puts
// an AXI4 master with the same port (rd_valid for a variable latency) in its
// place, the users holding at most their prefetch depth of reads in flight.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_ram #(
    parameter WIDTH  = 73,
    parameter ADDR_W = 10,
    parameter RD_LAT = 2     // cycles from rd_en to rd_valid (>= 1)
) (
    input  wire              clk,
    input  wire              rst,

    input  wire              wr_en,
    input  wire [ADDR_W-1:0] wr_addr,
    input  wire [WIDTH-1:0]  wr_data,

    input  wire              rd_en,
    input  wire [ADDR_W-1:0] rd_addr,
    output wire [WIDTH-1:0]  rd_data,
    output wire              rd_valid
);

reg [WIDTH-1:0] mem [0:(1<<ADDR_W)-1];
reg [WIDTH-1:0] rd_q [0:RD_LAT-1];
reg [RD_LAT-1:0] vld_q;

integer i;

always @(posedge clk) begin
    if (wr_en)
        mem[wr_addr] <= wr_data;
    if (rd_en)
        rd_q[0] <= mem[rd_addr];
    for (i = 1; i < RD_LAT; i = i + 1)
        rd_q[i] <= rd_q[i-1];
end

generate
if (RD_LAT == 1) begin : g_lat1
    always @(posedge clk)
        vld_q <= rst ? 1'b0 : rd_en;
end else begin : g_latn
    always @(posedge clk)
        vld_q <= rst ? {RD_LAT{1'b0}} : {vld_q[RD_LAT-2:0], rd_en};
end
endgenerate

assign rd_data  = rd_q[RD_LAT-1];
assign rd_valid = vld_q[RD_LAT-1];

endmodule

`resetall
