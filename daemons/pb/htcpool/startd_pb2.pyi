from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DrainHow(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAIN_HOW_UNSPECIFIED: _ClassVar[DrainHow]
    GRACEFUL: _ClassVar[DrainHow]
    QUICK: _ClassVar[DrainHow]
    FAST: _ClassVar[DrainHow]
DRAIN_HOW_UNSPECIFIED: DrainHow
GRACEFUL: DrainHow
QUICK: DrainHow
FAST: DrainHow

class DrainJobsRequest(_message.Message):
    __slots__ = ("machine", "how", "resume_on_completion", "check_expr", "start_expr", "reason", "request_id")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    HOW_FIELD_NUMBER: _ClassVar[int]
    RESUME_ON_COMPLETION_FIELD_NUMBER: _ClassVar[int]
    CHECK_EXPR_FIELD_NUMBER: _ClassVar[int]
    START_EXPR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    machine: str
    how: DrainHow
    resume_on_completion: bool
    check_expr: str
    start_expr: str
    reason: str
    request_id: str
    def __init__(self, machine: _Optional[str] = ..., how: _Optional[_Union[DrainHow, str]] = ..., resume_on_completion: _Optional[bool] = ..., check_expr: _Optional[str] = ..., start_expr: _Optional[str] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DrainJobsReply(_message.Message):
    __slots__ = ("ok", "reason", "request_id")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    request_id: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelDrainJobsRequest(_message.Message):
    __slots__ = ("machine", "request_id")
    MACHINE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    machine: str
    request_id: str
    def __init__(self, machine: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelDrainJobsReply(_message.Message):
    __slots__ = ("ok", "reason")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class RequestClaimRequest(_message.Message):
    __slots__ = ("claim_id", "job_ad", "schedd_name", "schedd_address", "submitter", "resources")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_AD_FIELD_NUMBER: _ClassVar[int]
    SCHEDD_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDD_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTER_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    job_ad: _common_pb2.ClassAd
    schedd_name: str
    schedd_address: str
    submitter: str
    resources: _containers.ScalarMap[str, int]
    def __init__(self, claim_id: _Optional[str] = ..., job_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ..., schedd_name: _Optional[str] = ..., schedd_address: _Optional[str] = ..., submitter: _Optional[str] = ..., resources: _Optional[_Mapping[str, int]] = ...) -> None: ...

class RequestClaimReply(_message.Message):
    __slots__ = ("ok", "reason", "claim_id", "slot_ad", "leftover_ad", "leftover_claim_id", "pending")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_AD_FIELD_NUMBER: _ClassVar[int]
    LEFTOVER_AD_FIELD_NUMBER: _ClassVar[int]
    LEFTOVER_CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    claim_id: str
    slot_ad: _common_pb2.ClassAd
    leftover_ad: _common_pb2.ClassAd
    leftover_claim_id: str
    pending: bool
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., claim_id: _Optional[str] = ..., slot_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ..., leftover_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ..., leftover_claim_id: _Optional[str] = ..., pending: _Optional[bool] = ...) -> None: ...

class ActivateClaimRequest(_message.Message):
    __slots__ = ("claim_id", "job_ad")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_AD_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    job_ad: _common_pb2.ClassAd
    def __init__(self, claim_id: _Optional[str] = ..., job_ad: _Optional[_Union[_common_pb2.ClassAd, _Mapping]] = ...) -> None: ...

class ActivateClaimReply(_message.Message):
    __slots__ = ("ok", "reason", "start_time")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    start_time: float
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., start_time: _Optional[float] = ...) -> None: ...

class RequestClaimsRequest(_message.Message):
    __slots__ = ("claims",)
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    claims: _containers.RepeatedCompositeFieldContainer[RequestClaimRequest]
    def __init__(self, claims: _Optional[_Iterable[_Union[RequestClaimRequest, _Mapping]]] = ...) -> None: ...

class RequestClaimsReply(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[RequestClaimReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[RequestClaimReply, _Mapping]]] = ...) -> None: ...

class ActivateClaimsRequest(_message.Message):
    __slots__ = ("activations",)
    ACTIVATIONS_FIELD_NUMBER: _ClassVar[int]
    activations: _containers.RepeatedCompositeFieldContainer[ActivateClaimRequest]
    def __init__(self, activations: _Optional[_Iterable[_Union[ActivateClaimRequest, _Mapping]]] = ...) -> None: ...

class ActivateClaimsReply(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[ActivateClaimReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[ActivateClaimReply, _Mapping]]] = ...) -> None: ...

class ReleaseClaimRequest(_message.Message):
    __slots__ = ("claim_ids", "reason")
    CLAIM_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    claim_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, claim_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ReleaseClaimReply(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: int
    def __init__(self, released: _Optional[int] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("claim_ids", "schedd_address", "round_trip")
    CLAIM_IDS_FIELD_NUMBER: _ClassVar[int]
    SCHEDD_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROUND_TRIP_FIELD_NUMBER: _ClassVar[int]
    claim_ids: _containers.RepeatedScalarFieldContainer[str]
    schedd_address: str
    round_trip: float
    def __init__(self, claim_ids: _Optional[_Iterable[str]] = ..., schedd_address: _Optional[str] = ..., round_trip: _Optional[float] = ...) -> None: ...

class KeepAliveReply(_message.Message):
    __slots__ = ("unknown_claim_ids", "idle_claim_ids")
    UNKNOWN_CLAIM_IDS_FIELD_NUMBER: _ClassVar[int]
    IDLE_CLAIM_IDS_FIELD_NUMBER: _ClassVar[int]
    unknown_claim_ids: _containers.RepeatedScalarFieldContainer[str]
    idle_claim_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, unknown_claim_ids: _Optional[_Iterable[str]] = ..., idle_claim_ids: _Optional[_Iterable[str]] = ...) -> None: ...
