from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UpdateAdsRequest(_message.Message):
    __slots__ = ("ads", "invalidate_type", "invalidate_names", "refresh_type", "refreshes")
    ADS_FIELD_NUMBER: _ClassVar[int]
    INVALIDATE_TYPE_FIELD_NUMBER: _ClassVar[int]
    INVALIDATE_NAMES_FIELD_NUMBER: _ClassVar[int]
    REFRESH_TYPE_FIELD_NUMBER: _ClassVar[int]
    REFRESHES_FIELD_NUMBER: _ClassVar[int]
    ads: _containers.RepeatedCompositeFieldContainer[_common_pb2.ClassAd]
    invalidate_type: str
    invalidate_names: _containers.RepeatedScalarFieldContainer[str]
    refresh_type: str
    refreshes: _containers.RepeatedCompositeFieldContainer[AdRefresh]
    def __init__(self, ads: _Optional[_Iterable[_Union[_common_pb2.ClassAd, _Mapping]]] = ..., invalidate_type: _Optional[str] = ..., invalidate_names: _Optional[_Iterable[str]] = ..., refresh_type: _Optional[str] = ..., refreshes: _Optional[_Iterable[_Union[AdRefresh, _Mapping]]] = ...) -> None: ...

class AdRefresh(_message.Message):
    __slots__ = ("names", "items", "own_items")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    OWN_ITEMS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    items: str
    own_items: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., items: _Optional[str] = ..., own_items: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateAdsReply(_message.Message):
    __slots__ = ("updated", "invalidated", "refreshed", "refresh_missed")
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    REFRESHED_FIELD_NUMBER: _ClassVar[int]
    REFRESH_MISSED_FIELD_NUMBER: _ClassVar[int]
    updated: int
    invalidated: int
    refreshed: int
    refresh_missed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, updated: _Optional[int] = ..., invalidated: _Optional[int] = ..., refreshed: _Optional[int] = ..., refresh_missed: _Optional[_Iterable[str]] = ...) -> None: ...

class InvalidateAdsRequest(_message.Message):
    __slots__ = ("my_type", "names", "constraint")
    MY_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    my_type: str
    names: _containers.RepeatedScalarFieldContainer[str]
    constraint: str
    def __init__(self, my_type: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., constraint: _Optional[str] = ...) -> None: ...

class InvalidateAdsReply(_message.Message):
    __slots__ = ("invalidated",)
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    invalidated: int
    def __init__(self, invalidated: _Optional[int] = ...) -> None: ...

class QueryAdsRequest(_message.Message):
    __slots__ = ("my_type", "constraint", "projection", "include_private")
    MY_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    PROJECTION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PRIVATE_FIELD_NUMBER: _ClassVar[int]
    my_type: str
    constraint: str
    projection: _containers.RepeatedScalarFieldContainer[str]
    include_private: bool
    def __init__(self, my_type: _Optional[str] = ..., constraint: _Optional[str] = ..., projection: _Optional[_Iterable[str]] = ..., include_private: _Optional[bool] = ...) -> None: ...

class QueryAdsReply(_message.Message):
    __slots__ = ("ads",)
    ADS_FIELD_NUMBER: _ClassVar[int]
    ads: _containers.RepeatedCompositeFieldContainer[_common_pb2.ClassAd]
    def __init__(self, ads: _Optional[_Iterable[_Union[_common_pb2.ClassAd, _Mapping]]] = ...) -> None: ...
