-- rddp's dissector for DDP over SCTP (RFC 5043), for tshark 4.x.
-- PPID 16: DDP-SSN(16) | DDP segment (header RFC 5041: tagged 14 / untagged 18 octets)
-- PPID 17: DDP-SSN(16) | Function Code(16) | Private Data (0..512, none on Terminate)
-- Besides the fields, `rddp_sctp.summary` renders each chunk as one line that the
-- wire test compares with what rddp sent.
-- Usage: tshark -X lua_script:rddp_sctp.lua -r FILE -T fields -e rddp_sctp.summary
local p = Proto("rddp_sctp", "rddp DDP over SCTP")
local f = {
  ssn = ProtoField.uint16("rddp_sctp.ssn", "DDP-SSN"),
  fc = ProtoField.uint16("rddp_sctp.function", "Function Code", base.DEC,
    { [1] = "Initiate", [2] = "Accept", [3] = "Reject", [4] = "Terminate" }),
  pd = ProtoField.bytes("rddp_sctp.private_data", "Private Data"),
  t = ProtoField.bool("rddp_sctp.ddp.tagged", "Tagged"),
  l = ProtoField.bool("rddp_sctp.ddp.last", "Last"),
  dv = ProtoField.uint8("rddp_sctp.ddp.dv", "DDP version"),
  stag = ProtoField.uint32("rddp_sctp.ddp.stag", "STag", base.HEX),
  to = ProtoField.uint64("rddp_sctp.ddp.to", "Tagged Offset", base.HEX),
  qn = ProtoField.uint32("rddp_sctp.ddp.qn", "Queue Number"),
  msn = ProtoField.uint32("rddp_sctp.ddp.msn", "Message Sequence Number"),
  mo = ProtoField.uint32("rddp_sctp.ddp.mo", "Message Offset"),
  len = ProtoField.uint32("rddp_sctp.ddp.payload_len", "Payload length"),
  summary = ProtoField.string("rddp_sctp.summary", "Summary"),
}
p.fields = { f.ssn, f.fc, f.pd, f.t, f.l, f.dv, f.stag, f.to, f.qn, f.msn, f.mo, f.len, f.summary }

local function segment(tvb, pinfo, tree)
  local n = tvb:len()
  local t = tree:add(p, tvb(), "DDP Segment chunk (PPID 16)")
  local ssn = tvb(0, 2):uint()
  t:add(f.ssn, tvb(0, 2))
  if n < 2 + 14 then
    t:add(f.summary, "seg malformed")
    return n
  end
  local c = tvb(2, 1):uint()
  local tagged = bit.band(c, 0x80) ~= 0
  local last = bit.band(c, 0x40) ~= 0
  local dv = bit.band(c, 0x03)
  t:add(f.t, tvb(2, 1), tagged)
  t:add(f.l, tvb(2, 1), last)
  t:add(f.dv, tvb(2, 1), dv)
  local s
  if tagged then
    t:add(f.stag, tvb(4, 4))
    t:add(f.to, tvb(8, 8))
    t:add(f.len, n - 16)
    s = string.format("seg ssn=%d T=1 L=%d dv=%d stag=%08x to=%s len=%d", ssn,
      last and 1 or 0, dv, tvb(4, 4):uint(), tvb(8, 8):uint64():tohex(), n - 16)
  elseif n >= 2 + 18 then
    t:add(f.qn, tvb(8, 4))
    t:add(f.msn, tvb(12, 4))
    t:add(f.mo, tvb(16, 4))
    t:add(f.len, n - 20)
    s = string.format("seg ssn=%d T=0 L=%d dv=%d qn=%d msn=%d mo=%d len=%d", ssn,
      last and 1 or 0, dv, tvb(8, 4):uint(), tvb(12, 4):uint(), tvb(16, 4):uint(), n - 20)
  else
    s = "seg malformed"
  end
  t:add(f.summary, s)
  pinfo.cols.protocol = "DDP/SCTP"
  return n
end

local function control(tvb, pinfo, tree)
  local n = tvb:len()
  local t = tree:add(p, tvb(), "DDP Stream Session Control (PPID 17)")
  if n < 4 then
    t:add(f.summary, "ctl malformed")
    return n
  end
  t:add(f.ssn, tvb(0, 2))
  t:add(f.fc, tvb(2, 2))
  if n > 4 then t:add(f.pd, tvb(4)) end
  t:add(f.summary, string.format("ctl ssn=%d fc=%d pd=%d", tvb(0, 2):uint(), tvb(2, 2):uint(), n - 4))
  pinfo.cols.protocol = "DDP/SCTP"
  return n
end

local seg = Proto("rddp_sctp_seg", "rddp DDP Segment chunk")
local ctl = Proto("rddp_sctp_ctl", "rddp DDP Stream Session Control")
function seg.dissector(tvb, pinfo, tree) return segment(tvb, pinfo, tree) end
function ctl.dissector(tvb, pinfo, tree) return control(tvb, pinfo, tree) end
local ppi = DissectorTable.get("sctp.ppi")
ppi:add(16, seg)
ppi:add(17, ctl)
