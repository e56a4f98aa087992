// cclab_flow_parse: the 5-tuple of each frame, read as it passes (a tap: it
// holds no data and never stalls the stream).
//
// The key follows the data-plane contract: IPv4 (EtherType 0x0800, version
// 4, IHL >= 5, the 20-byte header inside the frame) gives source, destination
// and protocol; TCP and UDP in the first fragment (fragment offset 0) add the
// ports found after the options (at 14 + 4 * IHL), provided they are inside
// the frame.  Anything else (not IPv4, a header cut short, ports cut short)
// has the all-zero key; IPv4 without ports (other protocols, later
// fragments) has zero ports.  The key is ready two cycles after the last
// beat (key_valid), from the frame's declared length.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_flow_parse #(
    parameter DATA_W = 64,
    parameter KEEP_W = DATA_W / 8,
    parameter LEN_W  = 16,
    parameter USER_W = LEN_W + 1
) (
    input  wire               clk,
    input  wire               rst,

    /* verilator lint_off UNUSEDSIGNAL */   // a tap: tkeep and tuser[0] are the queue's business
    input  wire [DATA_W-1:0]  tap_tdata,
    input  wire [KEEP_W-1:0]  tap_tkeep,
    input  wire               tap_tvalid,
    input  wire               tap_tready,
    input  wire               tap_tlast,
    input  wire [USER_W-1:0]  tap_tuser,
    /* verilator lint_on UNUSEDSIGNAL */

    output reg                key_valid,
    output reg  [103:0]       key          // {src, dst, sport, dport, proto}
);

reg              in_frame, done;
reg [LEN_W:0]    base;                     // offset of this beat's first byte
reg [LEN_W-1:0]  len;
reg [15:0]       etype, sport, dport;
reg [12:0]       frag;                     // fragment offset
reg [7:0]        vihl, proto;
reg [31:0]       src, dst;

wire             hs    = tap_tvalid && tap_tready;
// base is 0 at a frame's first beat: no mux before the offset compares.
// Offsets compare as "this beat starts at o - i" against constants, and the
// ports' offset (at most 14 + 60 + 3) in 8 bits: no wide adder in the path.
wire [LEN_W:0]   b     = base;
wire             near  = b[LEN_W:7] == 0;               // the beat starts below byte 128
wire [6:0]       b7    = b[6:0];
// The ports' offset from the IHL as captured: byte 14 always arrives in an
// earlier beat than the ports (byte 34 at the earliest) when KEEP_W <= 32.
wire [7:0]       poff  = 8'd14 + {2'b00, vihl[3:0], 2'b00};
integer          i;

generate
if (KEEP_W > 32) begin : g_too_wide
    // DATA_W above 256 would bring byte 14 and the ports in one beat
    cclab_flow_parse_supports_at_most_256_bit_data unsupported ();
end
endgenerate

// byte at offset o is in lane o - b of this beat
function at(input [6:0] beat, input integer lane, input integer o);
    at = lane <= o && {25'd0, beat} == o - lane;
endfunction

always @(posedge clk) begin
    done <= hs && tap_tlast;
    if (hs) begin
        in_frame <= !tap_tlast;
        base     <= tap_tlast ? {(LEN_W+1){1'b0}} : b + KEEP_W[LEN_W:0];
        if (!in_frame)
            len <= tap_tuser[LEN_W:1];
        if (near) begin
            for (i = 0; i < KEEP_W; i = i + 1) begin
                if (at(b7, i, 12)) etype[15:8] <= tap_tdata[8*i +: 8];
                if (at(b7, i, 13)) etype[7:0]  <= tap_tdata[8*i +: 8];
                if (at(b7, i, 14)) vihl        <= tap_tdata[8*i +: 8];
                if (at(b7, i, 20)) frag[12:8]  <= tap_tdata[8*i +: 5];
                if (at(b7, i, 21)) frag[7:0]   <= tap_tdata[8*i +: 8];
                if (at(b7, i, 23)) proto       <= tap_tdata[8*i +: 8];
                if (at(b7, i, 26)) src[31:24]  <= tap_tdata[8*i +: 8];
                if (at(b7, i, 27)) src[23:16]  <= tap_tdata[8*i +: 8];
                if (at(b7, i, 28)) src[15:8]   <= tap_tdata[8*i +: 8];
                if (at(b7, i, 29)) src[7:0]    <= tap_tdata[8*i +: 8];
                if (at(b7, i, 30)) dst[31:24]  <= tap_tdata[8*i +: 8];
                if (at(b7, i, 31)) dst[23:16]  <= tap_tdata[8*i +: 8];
                if (at(b7, i, 32)) dst[15:8]   <= tap_tdata[8*i +: 8];
                if (at(b7, i, 33)) dst[7:0]    <= tap_tdata[8*i +: 8];
                if ({1'b0, b7} == poff - i[7:0])          sport[15:8] <= tap_tdata[8*i +: 8];
                if ({1'b0, b7} == poff + 8'd1 - i[7:0])   sport[7:0]  <= tap_tdata[8*i +: 8];
                if ({1'b0, b7} == poff + 8'd2 - i[7:0])   dport[15:8] <= tap_tdata[8*i +: 8];
                if ({1'b0, b7} == poff + 8'd3 - i[7:0])   dport[7:0]  <= tap_tdata[8*i +: 8];
            end
        end
    end
    if (rst) begin
        in_frame <= 1'b0;
        done     <= 1'b0;
        base     <= {(LEN_W+1){1'b0}};
    end
end

// the cycle after the last beat: every byte is captured
wire [LEN_W:0] ports_end = 18 + {{(LEN_W-5){1'b0}}, vihl[3:0], 2'b00};
wire ipv4  = etype == 16'h0800 && len >= 34 && vihl[7:4] == 4'd4 && vihl[3:0] >= 4'd5;
wire ports = (proto == 8'd6 || proto == 8'd17) && frag == 13'd0;
wire fits  = {1'b0, len} >= ports_end;

always @(posedge clk) begin
    key_valid <= done && !rst;
    if (done) begin
        if (!ipv4 || (ports && !fits))
            key <= 104'd0;
        else if (!ports)
            key <= {src, dst, 32'd0, proto};
        else
            key <= {src, dst, sport, dport, proto};
    end
end

endmodule

`resetall
