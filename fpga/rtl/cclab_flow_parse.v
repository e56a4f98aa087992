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
wire [LEN_W:0]   b     = in_frame ? base : {(LEN_W+1){1'b0}};
wire [31:0]      b32   = {{(31-LEN_W){1'b0}}, b};

// IHL of this frame: from this beat when it carries byte 14, else as captured
reg  [3:0]       ihl_now;
integer          i;
always @* begin
    ihl_now = vihl[3:0];
    for (i = 0; i < KEEP_W; i = i + 1)
        if (b32 + i == 14)
            ihl_now = tap_tdata[8*i +: 4];
end
wire [31:0]      poff = 14 + {26'd0, ihl_now, 2'b00};

always @(posedge clk) begin
    done <= hs && tap_tlast;
    if (hs) begin
        in_frame <= !tap_tlast;
        base     <= b + KEEP_W[LEN_W:0];
        if (!in_frame)
            len <= tap_tuser[LEN_W:1];
        for (i = 0; i < KEEP_W; i = i + 1) begin
            case (b32 + i)
                12: etype[15:8] <= tap_tdata[8*i +: 8];
                13: etype[7:0]  <= tap_tdata[8*i +: 8];
                14: vihl        <= tap_tdata[8*i +: 8];
                20: frag[12:8]  <= tap_tdata[8*i +: 5];
                21: frag[7:0]   <= tap_tdata[8*i +: 8];
                23: proto       <= tap_tdata[8*i +: 8];
                26: src[31:24]  <= tap_tdata[8*i +: 8];
                27: src[23:16]  <= tap_tdata[8*i +: 8];
                28: src[15:8]   <= tap_tdata[8*i +: 8];
                29: src[7:0]    <= tap_tdata[8*i +: 8];
                30: dst[31:24]  <= tap_tdata[8*i +: 8];
                31: dst[23:16]  <= tap_tdata[8*i +: 8];
                32: dst[15:8]   <= tap_tdata[8*i +: 8];
                33: dst[7:0]    <= tap_tdata[8*i +: 8];
                default: ;
            endcase
            if (b32 + i == poff)     sport[15:8] <= tap_tdata[8*i +: 8];
            if (b32 + i == poff + 1) sport[7:0]  <= tap_tdata[8*i +: 8];
            if (b32 + i == poff + 2) dport[15:8] <= tap_tdata[8*i +: 8];
            if (b32 + i == poff + 3) dport[7:0]  <= tap_tdata[8*i +: 8];
        end
    end
    if (rst) begin
        in_frame <= 1'b0;
        done     <= 1'b0;
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
