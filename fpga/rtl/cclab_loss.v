// cclab_loss: i.i.d. random loss, one draw per frame against a 32-bit threshold.
//
// A frame is dropped when the draw u (uniform on [0, 2^32)) is below thr, so
// P(drop) = thr / 2^32.  The generator is xoshiro128++ (Blackman and Vigna,
// "Scrambled linear pseudorandom number generators", ACM TOMS 2021): 128 bits
// of state, period 2^128 - 1, only adds, xors, shifts and rotations.  Its
// output passes BigCrush, whose serial and gap tests look at tuples of
// consecutive outputs, so consecutive draws are independent for the loss
// test too: runs of drops are geometric (P(two in a row) = p^2), unlike a
// single-bit LFSR stepped once per draw, whose successive 32-bit windows
// overlap by 31 bits.  One draw is one generator step.
//
// The output is pipelined (s0 + s3, then the rotation and the second add):
// `drop` reflects the state two cycles after a step, so draws must be at
// least three cycles apart (the queue's admission stage guarantees it).  Writing a seed (seed_load) restarts the sequence; the
// state is never all zero (the seed is spread over the four words with fixed
// odd constants).

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_loss (
    input  wire        clk,
    input  wire        rst,

    input  wire [31:0] thr,        // drop probability * 2^32
    input  wire [31:0] seed,
    input  wire        seed_load,  // restart the sequence from seed
    input  wire        draw,       // consume the current draw
    output wire        drop        // current draw < thr
);

reg [31:0] s0, s1, s2, s3;
reg [31:0] out_r, sum03, s0_q;

wire [31:0] rot   = {sum03[24:0], sum03[31:25]};   // rotl(s0 + s3, 7)
wire [31:0] t     = s1 << 9;

wire [31:0] n2 = s2 ^ s0;
wire [31:0] n3 = s3 ^ s1;
wire [31:0] n1 = s1 ^ n2;
wire [31:0] n0 = s0 ^ n3;
wire [31:0] n2t = n2 ^ t;
wire [31:0] n3r = {n3[20:0], n3[31:21]};           // rotl(s3, 11)

always @(posedge clk) begin
    if (rst || seed_load) begin
        s0 <= seed ^ 32'h9e3779b9;
        s1 <= ~seed ^ 32'h7f4a7c15;
        s2 <= {seed[15:0], seed[31:16]} ^ 32'hbf58476d;
        s3 <= 32'h94d049bb;
    end else if (draw) begin
        s0 <= n0;
        s1 <= n1;
        s2 <= n2t;
        s3 <= n3r;
    end
    sum03 <= s0 + s3;
    s0_q  <= s0;
    out_r <= rot + s0_q;
end

assign drop = out_r < thr;

endmodule

`resetall
