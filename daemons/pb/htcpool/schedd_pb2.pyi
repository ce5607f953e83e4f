from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    REMOVE: _ClassVar[Action]
    HOLD: _ClassVar[Action]
    RELEASE: _ClassVar[Action]
    EDIT: _ClassVar[Action]

class ClaimEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLAIM_EVENT_UNSPECIFIED: _ClassVar[ClaimEventKind]
    JOB_EXITED: _ClassVar[ClaimEventKind]
    JOB_EVICTED: _ClassVar[ClaimEventKind]
    CLAIM_LOST: _ClassVar[ClaimEventKind]
    CLAIM_READY: _ClassVar[ClaimEventKind]
ACTION_UNSPECIFIED: Action
REMOVE: Action
HOLD: Action
RELEASE: Action
EDIT: Action
CLAIM_EVENT_UNSPECIFIED: ClaimEventKind
JOB_EXITED: ClaimEventKind
JOB_EVICTED: ClaimEventKind
CLAIM_LOST: ClaimEventKind
CLAIM_READY: ClaimEventKind

class SubmitRequest(_message.Message):
    __slots__ = ("submit_description", "submit_file", "owner", "queue_items")
    SUBMIT_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_FILE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ITEMS_FIELD_NUMBER: _ClassVar[int]
    submit_description: str
    submit_file: str
    owner: str
    queue_items: _containers.RepeatedCompositeFieldContainer[QueueItems]
    def __init__(self, submit_description: _Optional[str] = ..., submit_file: _Optional[str] = ..., owner: _Optional[str] = ..., queue_items: _Optional[_Iterable[_Union[QueueItems, _Mapping]]] = ...) -> None: ...

class QueueItems(_message.Message):
    __slots__ = ("line", "items")
    LINE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    line: int
    items: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, line: _Optional[int] = ..., items: _Optional[_Iterable[str]] = ...) -> None: ...

class SubmitReply(_message.Message):
    __slots__ = ("cluster_id", "count")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    cluster_id: int
    count: int
    def __init__(self, cluster_id: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class QueryJobsRequest(_message.Message):
    __slots__ = ("constraint", "projection", "history", "limit", "autoclusters")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    PROJECTION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AUTOCLUSTERS_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    projection: _containers.RepeatedScalarFieldContainer[str]
    history: bool
    limit: int
    autoclusters: bool
    def __init__(self, constraint: _Optional[str] = ..., projection: _Optional[_Iterable[str]] = ..., history: _Optional[bool] = ..., limit: _Optional[int] = ..., autoclusters: _Optional[bool] = ...) -> None: ...

class QueryJobsReply(_message.Message):
    __slots__ = ("ads",)
    ADS_FIELD_NUMBER: _ClassVar[int]
    ads: _containers.RepeatedCompositeFieldContainer[_common_pb2.ClassAd]
    def __init__(self, ads: _Optional[_Iterable[_Union[_common_pb2.ClassAd, _Mapping]]] = ...) -> None: ...

class ActRequest(_message.Message):
    __slots__ = ("action", "job_ids", "constraint", "reason", "edits")
    class EditsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ACTION_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EDITS_FIELD_NUMBER: _ClassVar[int]
    action: Action
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    constraint: str
    reason: str
    edits: _containers.ScalarMap[str, str]
    def __init__(self, action: _Optional[_Union[Action, str]] = ..., job_ids: _Optional[_Iterable[str]] = ..., constraint: _Optional[str] = ..., reason: _Optional[str] = ..., edits: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ActReply(_message.Message):
    __slots__ = ("affected", "job_ids", "denied_job_ids")
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    DENIED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    affected: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    denied_job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, affected: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ..., denied_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class NegotiatorMessage(_message.Message):
    __slots__ = ("start", "send_requests", "match", "reject", "end", "outcomes", "bundle")
    START_FIELD_NUMBER: _ClassVar[int]
    SEND_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    start: NegotiateStart
    send_requests: SendRequests
    match: MatchFound
    reject: RequestRejected
    end: NegotiateEnd
    outcomes: Outcomes
    bundle: Bundle
    def __init__(self, start: _Optional[_Union[NegotiateStart, _Mapping]] = ..., send_requests: _Optional[_Union[SendRequests, _Mapping]] = ..., match: _Optional[_Union[MatchFound, _Mapping]] = ..., reject: _Optional[_Union[RequestRejected, _Mapping]] = ..., end: _Optional[_Union[NegotiateEnd, _Mapping]] = ..., outcomes: _Optional[_Union[Outcomes, _Mapping]] = ..., bundle: _Optional[_Union[Bundle, _Mapping]] = ...) -> None: ...

class Bundle(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[NegotiatorMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[NegotiatorMessage, _Mapping]]] = ...) -> None: ...

class NegotiateStart(_message.Message):
    __slots__ = ("submitter", "significant_attrs", "cycle", "pool_time", "job_constraint", "prefetch", "prefetched")
    SUBMITTER_FIELD_NUMBER: _ClassVar[int]
    SIGNIFICANT_ATTRS_FIELD_NUMBER: _ClassVar[int]
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    POOL_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    PREFETCHED_FIELD_NUMBER: _ClassVar[int]
    submitter: str
    significant_attrs: _containers.RepeatedScalarFieldContainer[str]
    cycle: int
    pool_time: float
    job_constraint: str
    prefetch: bool
    prefetched: int
    def __init__(self, submitter: _Optional[str] = ..., significant_attrs: _Optional[_Iterable[str]] = ..., cycle: _Optional[int] = ..., pool_time: _Optional[float] = ..., job_constraint: _Optional[str] = ..., prefetch: _Optional[bool] = ..., prefetched: _Optional[int] = ...) -> None: ...

class SendRequests(_message.Message):
    __slots__ = ("max_requests",)
    MAX_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    max_requests: int
    def __init__(self, max_requests: _Optional[int] = ...) -> None: ...

class MatchFound(_message.Message):
    __slots__ = ("request_id", "claim_id", "slot_ad", "consumed", "preempting", "slot_name", "startd_address")
    class ConsumedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_AD_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    PREEMPTING_FIELD_NUMBER: _ClassVar[int]
    SLOT_NAME_FIELD_NUMBER: _ClassVar[int]
    STARTD_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    claim_id: str
    slot_ad: _common_pb2.ClassAd
    consumed: _containers.ScalarMap[str, int]
    preempting: str
    slot_name: str
    startd_address: str
    def __init__(self, request_id: _Optional[str] = ..., claim_id: _Optional[str] = ..., slot_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ..., consumed: _Optional[_Mapping[str, int]] = ..., preempting: _Optional[str] = ..., slot_name: _Optional[str] = ..., startd_address: _Optional[str] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("match", "reject")
    MATCH_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    match: MatchFound
    reject: RequestRejected
    def __init__(self, match: _Optional[_Union[MatchFound, _Mapping]] = ..., reject: _Optional[_Union[RequestRejected, _Mapping]] = ...) -> None: ...

class Outcomes(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[Outcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[Outcome, _Mapping]]] = ...) -> None: ...

class RequestRejected(_message.Message):
    __slots__ = ("request_id", "reason")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    reason: str
    def __init__(self, request_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class NegotiateEnd(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ScheddMessage(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: ResourceRequests
    def __init__(self, requests: _Optional[_Union[ResourceRequests, _Mapping]] = ...) -> None: ...

class ResourceRequest(_message.Message):
    __slots__ = ("request_id", "ad", "count")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AD_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    ad: _common_pb2.ClassAd
    count: int
    def __init__(self, request_id: _Optional[str] = ..., ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class ResourceRequests(_message.Message):
    __slots__ = ("requests", "no_more")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    NO_MORE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ResourceRequest]
    no_more: bool
    def __init__(self, requests: _Optional[_Iterable[_Union[ResourceRequest, _Mapping]]] = ..., no_more: _Optional[bool] = ...) -> None: ...

class ClaimEvent(_message.Message):
    __slots__ = ("claim_id", "job_id", "kind", "pool_time", "exit_code", "reason", "slot_name", "job_start", "slot_ad")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POOL_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SLOT_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_START_FIELD_NUMBER: _ClassVar[int]
    SLOT_AD_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    job_id: str
    kind: ClaimEventKind
    pool_time: float
    exit_code: int
    reason: str
    slot_name: str
    job_start: float
    slot_ad: _common_pb2.ClassAd
    def __init__(self, claim_id: _Optional[str] = ..., job_id: _Optional[str] = ..., kind: _Optional[_Union[ClaimEventKind, str]] = ..., pool_time: _Optional[float] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., slot_name: _Optional[str] = ..., job_start: _Optional[float] = ..., slot_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ...) -> None: ...

class ClaimEventsRequest(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ClaimEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ClaimEvent, _Mapping]]] = ...) -> None: ...

class ClaimEventsReply(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    def __init__(self, accepted: _Optional[int] = ...) -> None: ...
