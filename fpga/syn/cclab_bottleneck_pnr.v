// cclab_bottleneck_pnr: the reference build (64-bit, full register map) with
// its AXI4-Lite port behind a byte-wide command port, so that it fits a
// package's pins for place-and-route (the streams keep their full width).
//
// Command: 7 bytes on cmd_data/cmd_valid: op (0 read, 1 write), address
// (2 bytes, high first), data (4 bytes, high first; ignored by a read).  A
// read answers its 4 bytes, high first, on rsp_data/rsp_valid; a write
// answers one byte 0.  A board uses its own host interface (PCIe BAR, a soft
// CPU) instead: this port exists only to place and route the element.

`resetall
`timescale 1ns / 1ps
`default_nettype none

module cclab_bottleneck_pnr #(
    parameter PIPELINE = 1
) (
    input  wire        clk,
    input  wire        rst,

    input  wire [63:0] s_axis_tdata,
    input  wire [7:0]  s_axis_tkeep,
    input  wire        s_axis_tvalid,
    output wire        s_axis_tready,
    input  wire        s_axis_tlast,
    input  wire [16:0] s_axis_tuser,

    output wire [63:0] m_axis_tdata,
    output wire [7:0]  m_axis_tkeep,
    output wire        m_axis_tvalid,
    input  wire        m_axis_tready,
    output wire        m_axis_tlast,

    input  wire [7:0]  cmd_data,
    input  wire        cmd_valid,
    output reg  [7:0]  rsp_data,
    output reg         rsp_valid
);

// registered I/O, so that the paths measured are the element's, not the pads'
// (for timing only: a beat offered while the element is not ready is lost)
reg  [63:0] si_tdata;
reg  [7:0]  si_tkeep;
reg         si_tvalid, si_tlast;
reg  [16:0] si_tuser;
wire        si_tready;
reg         so_tready;
reg  [63:0] so_tdata;
reg  [7:0]  so_tkeep;
reg         so_tvalid, so_tlast, si_tready_q;
wire [63:0] mo_tdata;
wire [7:0]  mo_tkeep;
wire        mo_tvalid, mo_tlast;

always @(posedge clk) begin
    si_tdata    <= s_axis_tdata;
    si_tkeep    <= s_axis_tkeep;
    si_tvalid   <= s_axis_tvalid;
    si_tlast    <= s_axis_tlast;
    si_tuser    <= s_axis_tuser;
    si_tready_q <= si_tready;
    so_tready   <= m_axis_tready;
    so_tdata    <= mo_tdata;
    so_tkeep    <= mo_tkeep;
    so_tvalid   <= mo_tvalid && so_tready;
    so_tlast    <= mo_tlast;
end
assign s_axis_tready = si_tready_q;
assign m_axis_tdata  = so_tdata;
assign m_axis_tkeep  = so_tkeep;
assign m_axis_tvalid = so_tvalid;
assign m_axis_tlast  = so_tlast;

// command port -> AXI4-Lite
reg  [2:0]  n;
reg         op_wr;                 // the command's op: 1 write, 0 read
reg  [15:0] addr;
reg  [31:0] data;
reg         awvalid, wvalid, arvalid, rready, bready;
wire        awready, wready, arready, bvalid, rvalid;
wire [31:0] rdata;
wire [1:0]  bresp, rresp;
reg  [2:0]  out_n;
reg  [31:0] out_sr;

always @(posedge clk) begin
    rsp_valid <= 1'b0;
    if (cmd_valid && !awvalid && !wvalid && !arvalid && !rready && !bready && out_n == 0) begin
        case (n)
            3'd0: op_wr <= cmd_data[0];
            3'd1: addr[15:8] <= cmd_data;
            3'd2: addr[7:0] <= cmd_data;
            default: data <= {data[23:0], cmd_data};
        endcase
        n <= n == 3'd6 ? 3'd0 : n + 1'b1;
        if (n == 3'd6) begin
            if (op_wr) begin
                awvalid <= 1'b1;
                wvalid  <= 1'b1;
                bready  <= 1'b1;
            end else begin
                arvalid <= 1'b1;
                rready  <= 1'b1;
            end
        end
    end
    if (awvalid && awready) awvalid <= 1'b0;
    if (wvalid && wready)   wvalid  <= 1'b0;
    if (arvalid && arready) arvalid <= 1'b0;
    if (bvalid && bready) begin
        bready    <= 1'b0;
        rsp_data  <= {6'd0, bresp};
        rsp_valid <= 1'b1;
    end
    if (rvalid && rready) begin
        rready <= 1'b0;
        out_sr <= rdata;
        out_n  <= 3'd4;
    end
    if (out_n != 0) begin
        rsp_data  <= out_sr[31:24];
        rsp_valid <= 1'b1;
        out_sr    <= {out_sr[23:0], rresp == 2'b00 ? 8'd0 : 8'hff};
        out_n     <= out_n - 1'b1;
    end
    if (rst) begin
        n <= 3'd0; out_n <= 3'd0;
        awvalid <= 1'b0; wvalid <= 1'b0; arvalid <= 1'b0; rready <= 1'b0; bready <= 1'b0;
    end
end

/* verilator lint_off UNUSEDSIGNAL */      // the delay line's memory is inside (DL_EXT_MEM = 0)
wire        unused_wr_en, unused_rd_en;
wire [11:0] unused_wr_addr, unused_rd_addr;
wire [104:0] unused_wr_data;
/* verilator lint_on UNUSEDSIGNAL */

cclab_bottleneck #(
    .DATA_W(64), .PIPELINE(PIPELINE), .AXIL_ADDR_W(16)
) element (
    .clk(clk), .rst(rst),
    .s_axis_tdata(si_tdata), .s_axis_tkeep(si_tkeep), .s_axis_tvalid(si_tvalid && si_tready),
    .s_axis_tready(si_tready), .s_axis_tlast(si_tlast), .s_axis_tuser(si_tuser),
    .m_axis_tdata(mo_tdata), .m_axis_tkeep(mo_tkeep), .m_axis_tvalid(mo_tvalid),
    .m_axis_tready(so_tready), .m_axis_tlast(mo_tlast),
    .s_axil_awaddr(addr), .s_axil_awprot(3'd0), .s_axil_awvalid(awvalid), .s_axil_awready(awready),
    .s_axil_wdata(data), .s_axil_wstrb(4'hf), .s_axil_wvalid(wvalid), .s_axil_wready(wready),
    .s_axil_bresp(bresp), .s_axil_bvalid(bvalid), .s_axil_bready(bready),
    .s_axil_araddr(addr), .s_axil_arprot(3'd0), .s_axil_arvalid(arvalid), .s_axil_arready(arready),
    .s_axil_rdata(rdata), .s_axil_rresp(rresp), .s_axil_rvalid(rvalid), .s_axil_rready(rready),
    .dl_mem_wr_en(unused_wr_en), .dl_mem_wr_addr(unused_wr_addr), .dl_mem_wr_data(unused_wr_data),
    .dl_mem_wr_ready(1'b0), .dl_mem_rd_en(unused_rd_en), .dl_mem_rd_addr(unused_rd_addr),
    .dl_mem_rd_ready(1'b0), .dl_mem_rd_data(105'd0),
    .dl_mem_rd_valid(1'b0)
);

endmodule

`resetall
