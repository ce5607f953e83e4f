from daemons.pb.htcpool import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

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
