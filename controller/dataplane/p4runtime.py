"""A thin synchronous P4Runtime client on finsy's protobuf bindings and grpcio.

finsy (a maintained P4Runtime library) ships P4Runtime bindings generated for
current protobuf; its own Switch API is asyncio, while cclab's monitor is a
thread that calls ``read()``, so this module speaks to the switch directly
with those bindings: primary arbitration on the stream channel, pipeline
push, writes, and batched reads (one ReadRequest, many entities).

Every ``grpc.RpcError`` becomes a :class:`P4RuntimeError` with one line that
says what failed and what to do.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format

from controller.dataplane import DataPlaneError

log = logging.getLogger(__name__)

#: how long one RPC may take before it counts as a failure
RPC_TIMEOUT_S = 10.0


class P4RuntimeError(DataPlaneError):
    """A P4Runtime call failed; the message names the call and the fix."""


def _rpc_error(what: str, exc: grpc.RpcError) -> P4RuntimeError:
    code = exc.code() if hasattr(exc, "code") else None
    detail = " ".join(str(exc.details() if hasattr(exc, "details") else exc).split())
    name = code.name if code is not None else "ERROR"
    hint = (
        "is simple_switch_grpc running? see its log, or run `cclab clean`"
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        else "rebuild the P4 program with `make build` and check the entries the controller writes"
    )
    return P4RuntimeError(f"P4Runtime {what}: {name}: {detail or 'no detail'}; {hint}")


@dataclass
class P4Info:
    """Names to ids of a compiled program's P4Info (text format, from p4c --p4runtime-files)."""

    message: Any
    tables: dict[str, Any] = field(default_factory=dict)
    actions: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> P4Info:
        msg = p4i.P4Info()
        try:
            text_format.Parse(path.read_text(), msg)
        except (OSError, text_format.ParseError) as exc:
            raise P4RuntimeError(f"cannot read P4Info {path}: {exc}; run `make build`") from None
        info = cls(msg)
        for t in msg.tables:
            info.tables[t.preamble.name] = t
        for a in msg.actions:
            info.actions[a.preamble.name] = a
        for c in msg.counters:
            info.counters[c.preamble.name] = c
        return info

    @staticmethod
    def _find(kind: str, table: dict[str, Any], name: str) -> Any:
        """By full name (CclabIngress.flow_stats) or by its last component (flow_stats)."""
        if name in table:
            return table[name]
        hits = [v for k, v in table.items() if k.rsplit(".", 1)[-1] == name]
        if len(hits) != 1:
            raise P4RuntimeError(f"P4Info has {len(hits)} {kind}s named {name!r}; rebuild with `make build`")
        return hits[0]

    def table(self, name: str) -> Any:
        return self._find("table", self.tables, name)

    def action(self, name: str) -> Any:
        return self._find("action", self.actions, name)

    def counter(self, name: str) -> Any:
        return self._find("counter", self.counters, name)

    def counter_id(self, name: str) -> int:
        return int(self.counter(name).preamble.id)

    def match_field_id(self, table: str, name: str) -> int:
        for mf in self.table(table).match_fields:
            if mf.name == name or mf.name.rsplit(".", 1)[-1] == name:
                return int(mf.id)
        raise P4RuntimeError(f"table {table} has no match field {name}; rebuild with `make build`")

    def param_id(self, action: str, name: str) -> int:
        for p in self.action(action).params:
            if p.name == name:
                return int(p.id)
        raise P4RuntimeError(f"action {action} has no parameter {name}; rebuild with `make build`")


def encode(value: int, bitwidth: int) -> bytes:
    """An unsigned value as P4Runtime's canonical bytestring (shortest, big-endian)."""
    if value < 0 or value >= 1 << bitwidth:
        raise P4RuntimeError(f"value {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


class P4RuntimeClient:
    """One connection to one device, as its primary controller."""

    def __init__(self, address: str, device_id: int = 1, election_id: int = 1) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.p4info: P4Info | None = None
        self._channel = grpc.insecure_channel(address)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue[Any] = queue.Queue()
        self._responses: queue.Queue[Any] = queue.Queue()
        self._stream: Any = None
        self._reader: threading.Thread | None = None

    # --- connection ------------------------------------------------------------

    def wait_ready(self, timeout_s: float, alive: Callable[[], bool] | None = None) -> None:
        """Poll Capabilities until the server answers; `alive()` false means the server died."""
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if alive is not None and not alive():
                raise P4RuntimeError(f"the P4Runtime server at {self.address} exited while starting; see its log")
            try:
                self._stub.Capabilities(p4r.CapabilitiesRequest(), timeout=0.5)
                return
            except grpc.RpcError as exc:
                last = f"{exc.code().name}"  # type: ignore[attr-defined]
            time.sleep(0.05)  # poll interval, not a readiness guess
        raise P4RuntimeError(f"P4Runtime server at {self.address} not ready after {timeout_s:g} s ({last})")

    def _request_iter(self) -> Iterator[Any]:
        while True:
            msg = self._requests.get()
            if msg is None:
                return
            yield msg

    def _read_stream(self) -> None:
        try:
            for resp in self._stream:
                self._responses.put(resp)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                self._responses.put(exc)

    def become_primary(self, timeout_s: float = RPC_TIMEOUT_S) -> None:
        """Open the stream channel and win arbitration (needed for writes)."""
        self._stream = self._stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        self._reader.start()
        arb = p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=p4r.Uint128(high=0, low=self.election_id)
        )
        self._requests.put(p4r.StreamMessageRequest(arbitration=arb))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                resp = self._responses.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise P4RuntimeError(
                    f"no arbitration answer from {self.address} within {timeout_s:g} s; is the switch up?"
                ) from None
            if isinstance(resp, grpc.RpcError):
                raise _rpc_error("arbitration", resp)
            if resp.HasField("arbitration"):
                if resp.arbitration.status.code != 0:
                    raise P4RuntimeError(
                        f"not primary on device {self.device_id} ({resp.arbitration.status.message}); "
                        "another controller holds it: stop it or run `cclab clean`"
                    )
                return

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        if self._reader is not None:
            self._reader.join(timeout=2)
            self._reader = None
        self._channel.close()

    # --- pipeline, writes, reads ---------------------------------------------------

    def set_pipeline(self, p4info_path: Path, device_config_path: Path) -> P4Info:
        info = P4Info.load(p4info_path)
        try:
            blob = device_config_path.read_bytes()
        except OSError as exc:
            raise P4RuntimeError(f"cannot read {device_config_path}: {exc.strerror}; run `make build`") from None
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=p4r.Uint128(high=0, low=self.election_id),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=info.message, p4_device_config=blob),
        )
        try:
            self._stub.SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise _rpc_error("SetForwardingPipelineConfig", exc) from None
        self.p4info = info
        return info

    def write(self, updates: Sequence[Any]) -> None:
        req = p4r.WriteRequest(
            device_id=self.device_id,
            election_id=p4r.Uint128(high=0, low=self.election_id),
            updates=list(updates),
        )
        try:
            self._stub.Write(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise _rpc_error("Write", exc) from None

    def read(self, entities: Sequence[Any]) -> list[Any]:
        """One ReadRequest with all `entities`; the entities of every response, in order."""
        req = p4r.ReadRequest(device_id=self.device_id, entities=list(entities))
        out: list[Any] = []
        try:
            for resp in self._stub.Read(req, timeout=RPC_TIMEOUT_S):
                out.extend(resp.entities)
        except grpc.RpcError as exc:
            raise _rpc_error("Read", exc) from None
        return out

    # --- entity builders -----------------------------------------------------------

    def _info(self) -> P4Info:
        if self.p4info is None:
            raise P4RuntimeError("no pipeline set on this connection; the switch node pushes it at start")
        return self.p4info

    def table_entry(
        self,
        table: str,
        action: str,
        params: dict[str, int],
        *,
        exact: dict[str, int] | None = None,
        lpm: dict[str, tuple[int, int]] | None = None,
        default: bool = False,
    ) -> Any:
        """A TableEntry; match values are ints, bit widths come from the P4Info."""
        info = self._info()
        t = info.table(table)
        widths = {mf.name.rsplit(".", 1)[-1]: mf.bitwidth for mf in t.match_fields}
        widths.update({mf.name: mf.bitwidth for mf in t.match_fields})
        matches = []
        for name, value in (exact or {}).items():
            fid = info.match_field_id(table, name)
            matches.append(p4r.FieldMatch(field_id=fid, exact=p4r.FieldMatch.Exact(value=encode(value, widths[name]))))
        for name, (value, plen) in (lpm or {}).items():
            fid = info.match_field_id(table, name)
            matches.append(
                p4r.FieldMatch(field_id=fid, lpm=p4r.FieldMatch.LPM(value=encode(value, widths[name]), prefix_len=plen))
            )
        a = info.action(action)
        pwidths = {p.name: p.bitwidth for p in a.params}
        act = p4r.Action(
            action_id=a.preamble.id,
            params=[
                p4r.Action.Param(param_id=info.param_id(action, k), value=encode(v, pwidths[k]))
                for k, v in params.items()
            ],
        )
        return p4r.TableEntry(
            table_id=t.preamble.id,
            match=matches,
            action=p4r.TableAction(action=act),
            is_default_action=default,
        )

    @staticmethod
    def update(kind: str, table_entry: Any) -> Any:
        types = {"insert": p4r.Update.INSERT, "modify": p4r.Update.MODIFY, "delete": p4r.Update.DELETE}
        return p4r.Update(type=types[kind], entity=p4r.Entity(table_entry=table_entry))

    def counter_entity(self, name: str, index: int | None = None) -> Any:
        """A CounterEntry to read: one index, or every index when `index` is None."""
        ce = p4r.CounterEntry(counter_id=self._info().counter_id(name))
        if index is not None:
            ce.index.index = index
        return p4r.Entity(counter_entry=ce)
