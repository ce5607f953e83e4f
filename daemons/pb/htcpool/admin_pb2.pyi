from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PingReply(_message.Message):
    __slots__ = ("role", "name", "ready", "pool_time", "status_url", "pid")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    POOL_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_URL_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    role: str
    name: str
    ready: bool
    pool_time: float
    status_url: str
    pid: int
    def __init__(self, role: _Optional[str] = ..., name: _Optional[str] = ..., ready: _Optional[bool] = ..., pool_time: _Optional[float] = ..., status_url: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("fast",)
    FAST_FIELD_NUMBER: _ClassVar[int]
    fast: bool
    def __init__(self, fast: _Optional[bool] = ...) -> None: ...

class Fault(_message.Message):
    __slots__ = ("id", "side", "method", "peer", "delay_s", "jitter_s", "abort_code", "drop", "percent", "start", "stop", "max_active", "clock_offset_s", "clock_drift", "kind", "text")
    ID_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    DELAY_S_FIELD_NUMBER: _ClassVar[int]
    JITTER_S_FIELD_NUMBER: _ClassVar[int]
    ABORT_CODE_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    CLOCK_DRIFT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    id: str
    side: str
    method: str
    peer: str
    delay_s: float
    jitter_s: float
    abort_code: str
    drop: bool
    percent: float
    start: float
    stop: float
    max_active: int
    clock_offset_s: float
    clock_drift: float
    kind: str
    text: str
    def __init__(self, id: _Optional[str] = ..., side: _Optional[str] = ..., method: _Optional[str] = ..., peer: _Optional[str] = ..., delay_s: _Optional[float] = ..., jitter_s: _Optional[float] = ..., abort_code: _Optional[str] = ..., drop: _Optional[bool] = ..., percent: _Optional[float] = ..., start: _Optional[float] = ..., stop: _Optional[float] = ..., max_active: _Optional[int] = ..., clock_offset_s: _Optional[float] = ..., clock_drift: _Optional[float] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class FaultPlan(_message.Message):
    __slots__ = ("faults", "replace")
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    faults: _containers.RepeatedCompositeFieldContainer[Fault]
    replace: bool
    def __init__(self, faults: _Optional[_Iterable[_Union[Fault, _Mapping]]] = ..., replace: _Optional[bool] = ...) -> None: ...

class ClearFaultsRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FaultState(_message.Message):
    __slots__ = ("fault", "fired", "active")
    FAULT_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    fault: Fault
    fired: int
    active: int
    def __init__(self, fault: _Optional[_Union[Fault, _Mapping]] = ..., fired: _Optional[int] = ..., active: _Optional[int] = ...) -> None: ...

class FaultList(_message.Message):
    __slots__ = ("role", "name", "faults", "pool_time", "true_pool_time", "fired_total")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    POOL_TIME_FIELD_NUMBER: _ClassVar[int]
    TRUE_POOL_TIME_FIELD_NUMBER: _ClassVar[int]
    FIRED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    role: str
    name: str
    faults: _containers.RepeatedCompositeFieldContainer[FaultState]
    pool_time: float
    true_pool_time: float
    fired_total: int
    def __init__(self, role: _Optional[str] = ..., name: _Optional[str] = ..., faults: _Optional[_Iterable[_Union[FaultState, _Mapping]]] = ..., pool_time: _Optional[float] = ..., true_pool_time: _Optional[float] = ..., fired_total: _Optional[int] = ...) -> None: ...
