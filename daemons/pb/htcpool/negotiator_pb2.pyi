from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RescheduleReply(_message.Message):
    __slots__ = ("next_cycle",)
    NEXT_CYCLE_FIELD_NUMBER: _ClassVar[int]
    next_cycle: int
    def __init__(self, next_cycle: _Optional[int] = ...) -> None: ...

class CycleHistoryRequest(_message.Message):
    __slots__ = ("last",)
    LAST_FIELD_NUMBER: _ClassVar[int]
    last: int
    def __init__(self, last: _Optional[int] = ...) -> None: ...

class CycleRecord(_message.Message):
    __slots__ = ("cycle", "start", "end", "matches", "rejections", "duration", "wall_duration", "slots", "submitters", "rescheduled", "requests", "considered", "significant")
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    WALL_DURATION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTERS_FIELD_NUMBER: _ClassVar[int]
    RESCHEDULED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    SIGNIFICANT_FIELD_NUMBER: _ClassVar[int]
    cycle: int
    start: float
    end: float
    matches: int
    rejections: int
    duration: float
    wall_duration: float
    slots: int
    submitters: int
    rescheduled: bool
    requests: int
    considered: int
    significant: int
    def __init__(self, cycle: _Optional[int] = ..., start: _Optional[float] = ..., end: _Optional[float] = ..., matches: _Optional[int] = ..., rejections: _Optional[int] = ..., duration: _Optional[float] = ..., wall_duration: _Optional[float] = ..., slots: _Optional[int] = ..., submitters: _Optional[int] = ..., rescheduled: _Optional[bool] = ..., requests: _Optional[int] = ..., considered: _Optional[int] = ..., significant: _Optional[int] = ...) -> None: ...

class CycleHistoryReply(_message.Message):
    __slots__ = ("cycles",)
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    cycles: _containers.RepeatedCompositeFieldContainer[CycleRecord]
    def __init__(self, cycles: _Optional[_Iterable[_Union[CycleRecord, _Mapping]]] = ...) -> None: ...
