from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UserPrioRequest(_message.Message):
    __slots__ = ("all_users",)
    ALL_USERS_FIELD_NUMBER: _ClassVar[int]
    all_users: bool
    def __init__(self, all_users: _Optional[bool] = ...) -> None: ...

class UserPrioEntry(_message.Message):
    __slots__ = ("name", "effective_priority", "real_priority", "priority_factor", "weighted_in_use", "accumulated_usage_hours", "begin_usage_time", "last_usage_time", "is_group", "quota", "submitter_limit", "submitter_share")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REAL_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_IN_USE_FIELD_NUMBER: _ClassVar[int]
    ACCUMULATED_USAGE_HOURS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_USAGE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USAGE_TIME_FIELD_NUMBER: _ClassVar[int]
    IS_GROUP_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    SUBMITTER_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SUBMITTER_SHARE_FIELD_NUMBER: _ClassVar[int]
    name: str
    effective_priority: float
    real_priority: float
    priority_factor: float
    weighted_in_use: float
    accumulated_usage_hours: float
    begin_usage_time: float
    last_usage_time: float
    is_group: bool
    quota: float
    submitter_limit: float
    submitter_share: float
    def __init__(self, name: _Optional[str] = ..., effective_priority: _Optional[float] = ..., real_priority: _Optional[float] = ..., priority_factor: _Optional[float] = ..., weighted_in_use: _Optional[float] = ..., accumulated_usage_hours: _Optional[float] = ..., begin_usage_time: _Optional[float] = ..., last_usage_time: _Optional[float] = ..., is_group: _Optional[bool] = ..., quota: _Optional[float] = ..., submitter_limit: _Optional[float] = ..., submitter_share: _Optional[float] = ...) -> None: ...

class UserPrioReply(_message.Message):
    __slots__ = ("last_update", "entries")
    LAST_UPDATE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    last_update: float
    entries: _containers.RepeatedCompositeFieldContainer[UserPrioEntry]
    def __init__(self, last_update: _Optional[float] = ..., entries: _Optional[_Iterable[_Union[UserPrioEntry, _Mapping]]] = ...) -> None: ...

class SetUserPrioRequest(_message.Message):
    __slots__ = ("name", "factor", "priority")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    name: str
    factor: float
    priority: float
    def __init__(self, name: _Optional[str] = ..., factor: _Optional[float] = ..., priority: _Optional[float] = ...) -> None: ...

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
    __slots__ = ("cycle", "start", "end", "matches", "rejections", "duration", "wall_duration", "slots", "submitters", "rescheduled", "requests", "considered", "significant", "pool_weight", "cpu_duration", "slot_groups", "autoclusters", "phases", "evaluations", "preemptions", "order", "failed", "error", "prefetched", "reschedule_wait", "prefetched_resumed", "stream_messages", "stream_writes")
    class PhasesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
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
    POOL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CPU_DURATION_FIELD_NUMBER: _ClassVar[int]
    SLOT_GROUPS_FIELD_NUMBER: _ClassVar[int]
    AUTOCLUSTERS_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PREFETCHED_FIELD_NUMBER: _ClassVar[int]
    RESCHEDULE_WAIT_FIELD_NUMBER: _ClassVar[int]
    PREFETCHED_RESUMED_FIELD_NUMBER: _ClassVar[int]
    STREAM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STREAM_WRITES_FIELD_NUMBER: _ClassVar[int]
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
    pool_weight: float
    cpu_duration: float
    slot_groups: int
    autoclusters: int
    phases: _containers.ScalarMap[str, float]
    evaluations: int
    preemptions: int
    order: _containers.RepeatedScalarFieldContainer[str]
    failed: _containers.RepeatedScalarFieldContainer[str]
    error: str
    prefetched: int
    reschedule_wait: float
    prefetched_resumed: int
    stream_messages: int
    stream_writes: int
    def __init__(self, cycle: _Optional[int] = ..., start: _Optional[float] = ..., end: _Optional[float] = ..., matches: _Optional[int] = ..., rejections: _Optional[int] = ..., duration: _Optional[float] = ..., wall_duration: _Optional[float] = ..., slots: _Optional[int] = ..., submitters: _Optional[int] = ..., rescheduled: _Optional[bool] = ..., requests: _Optional[int] = ..., considered: _Optional[int] = ..., significant: _Optional[int] = ..., pool_weight: _Optional[float] = ..., cpu_duration: _Optional[float] = ..., slot_groups: _Optional[int] = ..., autoclusters: _Optional[int] = ..., phases: _Optional[_Mapping[str, float]] = ..., evaluations: _Optional[int] = ..., preemptions: _Optional[int] = ..., order: _Optional[_Iterable[str]] = ..., failed: _Optional[_Iterable[str]] = ..., error: _Optional[str] = ..., prefetched: _Optional[int] = ..., reschedule_wait: _Optional[float] = ..., prefetched_resumed: _Optional[int] = ..., stream_messages: _Optional[int] = ..., stream_writes: _Optional[int] = ...) -> None: ...

class CycleHistoryReply(_message.Message):
    __slots__ = ("cycles",)
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    cycles: _containers.RepeatedCompositeFieldContainer[CycleRecord]
    def __init__(self, cycles: _Optional[_Iterable[_Union[CycleRecord, _Mapping]]] = ...) -> None: ...
