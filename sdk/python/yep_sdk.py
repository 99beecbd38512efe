"""A zero-dependency Python SDK for writing YEP 1.0 capability servers.

YEP is the line-delimited JSON protocol that ``yep`` (an extension host for AI coding
agents) speaks to its capability servers over stdio. This module mirrors the Rust
``yep-sdk`` crate: register handlers on a :class:`Server`, then call :meth:`Server.serve`.

    from yep_sdk import Server

    server = Server("echo", instructions="Use the echo tool to repeat text back.")

    @server.tool("echo")
    def echo(args, ctx):
        return {"echoed": args.get("text", "")}

    server.serve()

Wire rules (see ``docs/protocol.md`` and ``schema/yep/v1/``): one JSON object per line;
``method`` + numeric ``id`` is a request, ``method`` alone a notification, numeric ``id``
without ``method`` a response; ``jsonrpc`` is accepted, never sent; null params are omitted.

Standard library only; Python >= 3.9.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import threading
import time
import types
from typing import (Any, Annotated, Callable, Dict, List, Literal, Optional, Tuple, Union,
                    get_args, get_origin, get_type_hints)

__all__ = [
    "PROTOCOL_VERSION",
    "HOST_METHODS",
    "SERVER_METHODS",
    "CAPABILITIES",
    "MAX_FRAME_BYTES",
    "EOF_GRACE",
    "Server",
    "Context",
    "Notifier",
    "YepError",
    "block",
    "modify",
    "version_compatible",
]

__version__ = "0.1.0"

# ---------------------------------------------------------------------------------------------
# Protocol metadata (checked against schema/yep/v1/meta.json by the tests)

#: The protocol version this SDK speaks.
PROTOCOL_VERSION = "1.0"

#: Host -> server methods (requests and notifications) the SDK handles.
HOST_METHODS = (
    "initialize",
    "initialized",
    "tool/call",
    "hook/fire",
    "prompt/contribution",
    "command/execute",
    "config/changed",
    "trace/event",
    "shutdown",
    "cancel",
    "workspace/changed",
    "exit",
)

#: Server -> host methods the SDK sends.
SERVER_METHODS = ("tool/update", "status/changed", "ui/ask", "log")

#: Every capability token the SDK may advertise in its `initialize` answer.
CAPABILITIES = (
    "tools",
    "streaming",
    "cancel",
    "prompt",
    "dynamic_prompt",
    "hooks",
    "commands",
    "trace",
)

#: The longest incoming line accepted; longer lines are skipped.
MAX_FRAME_BYTES = 4 * 1024 * 1024

#: At EOF/`exit`, requests still running get this many seconds before they are cancelled.
EOF_GRACE = 1.0

#: Notifications waiting for their handler before the reader waits too.
_ORDERED_QUEUE = 1024

# Error codes (JSON-RPC numbering).
CODE_UNCLASSIFIED = 0
CODE_METHOD_NOT_FOUND = -32601
CODE_INVALID_PARAMS = -32602
CODE_INTERNAL_ERROR = -32603
CODE_CANCELLED = -32800
CODE_INCOMPATIBLE_VERSION = -32001

# Requests that run handler code, each on its own thread.
_WORK_METHODS = ("tool/call", "hook/fire", "prompt/contribution", "command/execute")


def _note(message: str) -> None:
    """A diagnostic line on stderr (the host logs it)."""
    try:
        sys.stderr.write("yep-sdk: %s\n" % message)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr gone: nothing left to tell
        pass


def _major(version: str) -> Optional[str]:
    major = version.strip().split(".")[0]
    return major or None


def version_compatible(version: str) -> bool:
    """Whether a peer speaking ``version`` can talk to us: the majors must match."""
    major = _major(version)
    return major is not None and major == _major(PROTOCOL_VERSION)


# ---------------------------------------------------------------------------------------------
# Errors and hook helpers


class YepError(Exception):
    """An error with an explicit wire shape. Raise it from a handler to control ``code``,
    ``retryable`` and ``data``; any other exception becomes ``{"code": 0, "message": str(exc)}``.
    ``Context.ask`` raises it when the host answers the question with an error."""

    def __init__(self, message: str, code: int = CODE_UNCLASSIFIED, retryable: bool = False,
                 data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.data = data

    def to_wire(self) -> Dict[str, Any]:
        err: Dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retryable:
            err["retryable"] = True
        if self.data is not None:
            err["data"] = self.data
        return err

    @classmethod
    def from_wire(cls, value: Any) -> "YepError":
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            code = value.get("code", 0)
            return cls(value["message"], code if isinstance(code, int) else 0,
                       bool(value.get("retryable", False)), value.get("data"))
        return cls("malformed error object")


def _failure() -> str:
    """The exception being handled, with its traceback. ``traceback`` is imported here, on the
    first failure: importing it costs a cold start about 6 ms, a fifth of the interpreter's."""
    import traceback

    return traceback.format_exc()


def _error(code: int, message: str) -> Dict[str, Any]:
    return {"code": code, "message": message}


def _cancelled_error() -> Dict[str, Any]:
    return _error(CODE_CANCELLED, "cancelled")


def block(reason: str, user_message: Optional[str] = None) -> Dict[str, Any]:
    """A hook decision that blocks the tool call (``pre_tool_use`` only)."""
    decision: Dict[str, Any] = {"block": True, "reason": reason}
    if user_message is not None:
        decision["user_message"] = user_message
    return decision


def modify(args: Any) -> Dict[str, Any]:
    """A hook decision that replaces the tool call's arguments (``pre_tool_use`` only)."""
    return {"modified_args": args}


# ---------------------------------------------------------------------------------------------
# The wire


def _encode(obj: Any) -> bytes:
    # ASCII-only JSON: always valid UTF-8 and never contains a raw newline.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


class _Wire:
    """One line per write, flushed, under a lock so concurrent handlers never interleave."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._broken = False

    def send_bytes(self, data: bytes) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError) as err:
                # The host is gone; the reader sees EOF next.
                self._broken = True
                _note("failed to write to the host: %s" % err)

    def send(self, obj: Any) -> None:
        self.send_bytes(_encode(obj))

    def close(self) -> None:
        """Close the writer; later sends (a straggling handler's log) are dropped quietly."""
        with self._lock:
            self._broken = True
            try:
                self._out.close()
            except (OSError, ValueError):
                pass

    def notify(self, method: str, params: Any = None) -> None:
        msg: Dict[str, Any] = {"method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def answer(self, id: int, result: Any = None, error: Optional[Dict[str, Any]] = None) -> None:
        if error is not None:
            self.send({"id": id, "error": error})
            return
        try:
            data = _encode({"id": id, "result": result})
        except (TypeError, ValueError) as err:
            data = _encode({"id": id, "error": _error(
                CODE_INTERNAL_ERROR, "result is not JSON-serializable: %s" % err)})
        self.send_bytes(data)


# ---------------------------------------------------------------------------------------------
# What handlers get


class Notifier:
    """Sends server -> host notifications from anywhere: handlers, ``on_start``, your threads."""

    def __init__(self, session: "_Session") -> None:
        self._session = session

    def status(self, text: str, level: str = "ok", detail: Optional[str] = None) -> None:
        """Push a status-bar string (``status/changed``); ``level`` is ok, warn or error.
        An empty ``text`` clears the field."""
        params: Dict[str, Any] = {"status": text, "level": level}
        if detail is not None:
            params["detail"] = detail
        self._session.wire.notify("status/changed", params)

    def log(self, text: str, level: str = "info") -> None:
        """Send a log line to the host (``log``): error, warn, info, debug or trace."""
        self._session.wire.notify("log", {"message": text, "level": level})


class _Call:
    """One in-flight request's cancellation flag."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()

    def cancel(self) -> None:
        self.event.set()


class Context(Notifier):
    """What a tool or command handler can do besides return: progress, cancellation,
    questions, status and logs."""

    def __init__(self, session: "_Session", request_id: int, call: _Call) -> None:
        super().__init__(session)
        self._request_id = request_id
        self._call = call
        #: Why the host cancelled the last :meth:`ask` without asking anyone (no UI takes
        #: questions, a secret it will not relay), or None.
        self.ask_refused: Optional[str] = None

    @property
    def request_id(self) -> int:
        """The envelope id of the request being handled."""
        return self._request_id

    @property
    def cancelled(self) -> bool:
        """Whether the host cancelled this call. It already has its ``cancelled`` answer, so
        the handler should stop; whatever it returns is dropped."""
        return self._call.event.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on cancellation. True when cancelled."""
        return self._call.event.wait(max(0.0, seconds))

    def update(self, text: str) -> None:
        """Stream one progress line for this call (``tool/update``). Nothing is sent once the
        call was cancelled."""
        if self.cancelled:
            return
        self._session.wire.notify("tool/update", {"request_id": self._request_id,
                                                  "output": str(text)})

    def ask(self, prompt: str, secret: bool = False, options: Optional[List[str]] = None,
            placeholder: Optional[str] = None) -> Optional[str]:
        """Ask the user a question (``ui/ask``) and wait for the answer.

        Returns the answer, or None when the user dismissed the question or this call was
        cancelled while waiting (:attr:`ask_refused` then says why, when the host cancelled it
        without asking anyone). Raises :class:`YepError` when the host refuses the request.
        """
        self.ask_refused = None
        params: Dict[str, Any] = {"prompt": prompt}
        if placeholder is not None:
            params["placeholder"] = placeholder
        if secret:
            params["secret"] = True
        if options:
            params["options"] = list(options)
        session = self._session
        slot: "queue.Queue[Tuple[bool, Any]]" = queue.Queue(maxsize=1)
        id = session.new_ask(slot)
        session.wire.send({"id": id, "method": "ui/ask", "params": params})
        try:
            while True:
                if self.cancelled:
                    return None
                try:
                    ok, value = slot.get(timeout=0.02)
                except queue.Empty:
                    continue
                if not ok:
                    raise YepError.from_wire(value)
                if not isinstance(value, dict) or value.get("cancelled"):
                    reason = value.get("reason") if isinstance(value, dict) else None
                    self.ask_refused = reason if isinstance(reason, str) else None
                    return None
                answer = value.get("answer", "")
                return answer if isinstance(answer, str) else str(answer)
        finally:
            session.forget_ask(id)


# ---------------------------------------------------------------------------------------------
# Typed tools: a handler's parameters are its arguments. The schema comes from the signature
# and type hints, and arguments are checked and converted before the handler runs.


class _NoSchema(TypeError):
    """A type hint with no JSON Schema (raised at registration, naming the parameter)."""


def _cleandoc(doc: Optional[str]) -> str:
    """A docstring without its common indentation (``inspect.cleandoc``, which would cost a
    cold start the ``inspect`` import)."""
    lines = (doc or "").expandtabs().split("\n")
    indents = [len(l) - len(l.lstrip()) for l in lines[1:] if l.strip()]
    margin = min(indents) if indents else 0
    out = [lines[0].strip()] + [l[margin:].rstrip() for l in lines[1:]]
    return "\n".join(out).strip()


def _is_typeddict(tp: Any) -> bool:
    return (isinstance(tp, type) and issubclass(tp, dict)
            and hasattr(tp, "__required_keys__") and hasattr(tp, "__annotations__"))


def _is_dataclass(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__dataclass_fields__")


def _is_enum(tp: Any) -> bool:
    # An Enum hint means its module was imported: look it up rather than import it here.
    enum = sys.modules.get("enum")
    return enum is not None and isinstance(tp, type) and issubclass(tp, enum.Enum)


# `Union[A, B]`, and `A | B` where Python has it.
_UNIONS: Tuple[Any, ...] = (Union,) + ((types.UnionType,) if hasattr(types, "UnionType") else ())


def _json_type(value: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return None


def _enum_schema(values: List[Any]) -> Dict[str, Any]:
    for v in values:
        if _json_type(v) is None or (isinstance(v, float) and v != v):
            raise _NoSchema("%r is not a JSON value (a Literal or Enum value must be a str, int, "
                            "float, bool or None)" % (v,))
    schema: Dict[str, Any] = {"enum": values}
    kinds = {_json_type(v) for v in values}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _strip_required(hint: Any) -> Any:
    """A TypedDict key's hint without its ``Required``/``NotRequired`` mark (which
    ``__required_keys__`` already counts)."""
    import typing

    marks = tuple(m for m in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None))
                  if m is not None)
    while get_origin(hint) in marks and marks:
        hint = get_args(hint)[0]
    if get_origin(hint) is Annotated:
        inner = _strip_required(get_args(hint)[0])
        return Annotated[(inner,) + tuple(get_args(hint)[1:])]  # type: ignore[misc]
    return hint


def _hints(tp: Any) -> Dict[str, Any]:
    return get_type_hints(tp, include_extras=True)


_FIELDS: Dict[Any, List[Tuple[str, Any, bool, Any]]] = {}


def _fields(tp: Any) -> List[Tuple[str, Any, bool, Any]]:
    """A TypedDict's or dataclass's fields: (name, hint, required, default or _MISSING), read
    once per type (a call converts with them again and again)."""
    fields = _FIELDS.get(tp)
    if fields is None:
        fields = _FIELDS[tp] = _read_fields(tp)
    return fields


def _read_fields(tp: Any) -> List[Tuple[str, Any, bool, Any]]:
    hints = _hints(tp)
    if _is_typeddict(tp):
        return [(k, _strip_required(h), k in tp.__required_keys__, _MISSING)
                for k, h in hints.items()]
    dataclasses = sys.modules["dataclasses"]
    missing = dataclasses.MISSING
    out = []
    for f in tp.__dataclass_fields__.values():
        if getattr(f, "_field_type", None) is not getattr(dataclasses, "_FIELD", None):
            continue  # a ClassVar or InitVar pseudo-field
        if not f.init:
            continue  # not an argument of the constructor
        default = f.default if f.default is not missing else _MISSING
        required = f.default is missing and f.default_factory is missing
        out.append((f.name, hints.get(f.name, Any), required, default))
    return out


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def _json_default(value: Any) -> Any:
    """A default as the schema shows it, or _MISSING when it is not JSON."""
    if _is_enum(type(value)):
        value = value.value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _MISSING
    return value


def _object_schema(fields: List[Tuple[str, Any, bool, Any]], depth: int) -> Dict[str, Any]:
    props: Dict[str, Any] = {}
    required = []
    for name, hint, req, default in fields:
        try:
            prop = _schema(hint, depth + 1)
        except _NoSchema as err:
            raise _NoSchema("`%s`: %s" % (name, err)) from None
        shown = _json_default(default) if default is not _MISSING else _MISSING
        if shown is not _MISSING:
            prop = dict(prop, default=shown)
        props[name] = prop
        if req:
            required.append(name)
    schema: Dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def _schema(tp: Any, depth: int = 0) -> Dict[str, Any]:
    """The JSON Schema of a type hint."""
    if depth > 32:
        raise _NoSchema("the type nests too deep (a recursive type?)")
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        schema = _schema(args[0], depth)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return dict(schema, description=" ".join(notes)) if notes else schema
    if tp is Any:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp in (list, List) or origin is list:
        return {"type": "array", "items": _schema(args[0], depth + 1)} if args else {"type": "array"}
    if tp in (dict, Dict) or origin is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise _NoSchema("a dict's keys must be str, not %r" % (args[0],))
        return {"type": "object", "additionalProperties": _schema(args[1], depth + 1)}
    if origin in _UNIONS:
        return {"anyOf": [_schema(a, depth + 1) for a in args]}
    if origin is Literal:
        return _enum_schema(list(args))
    if _is_enum(tp):
        return _enum_schema([m.value for m in tp])
    if _is_typeddict(tp) or _is_dataclass(tp):
        schema = _object_schema(_fields(tp), depth)
        doc = _cleandoc(tp.__doc__)
        if doc.startswith(tp.__name__ + "("):
            doc = ""  # the docstring dataclass writes when there is none
        return dict(schema, description=doc) if doc else schema
    raise _NoSchema("no JSON Schema for %r (use str, int, float, bool, list, dict, Optional, "
                    "Literal, an Enum, a TypedDict or a dataclass)" % (tp,))


class _BadArgs(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


_KINDS = {"boolean": "a boolean", "integer": "an integer", "number": "a number",
          "string": "a string", "null": "null"}


def _got(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return _KINDS.get(_json_type(value) or "", type(value).__name__)


def _at(path: str, key: Any) -> str:
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    return "%s.%s" % (path, key) if path else str(key)


# At most this many characters of a value (or of a list of allowed values, twice this) in an
# error message.
_PREVIEW = 80


def _preview(value: Any) -> str:
    """A bounded rendering of ``value`` for an error message."""
    if isinstance(value, (list, dict)):
        return _got(value)
    if isinstance(value, str):
        if len(value) > _PREVIEW:
            return "%s… (%d characters)" % (json.dumps(value[:_PREVIEW]), len(value))
        return json.dumps(value)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return _got(value)
    return text if len(text) <= _PREVIEW else "%s… (%d characters)" % (text[:_PREVIEW], len(text))


# Values a typed tool's arguments may be checked against a hint per call (each list item, dict
# value and field costs one; `Any`, and `list`/`dict` of `Any`, cost nothing more). Past it
# (a huge list, or unions nested in unions, which cost arms^depth) the call is refused as too
# large to check, never passed through unchecked: the TypeScript SDK's budget.
_CHECK_BUDGET = 10_000


class _TooComplex(Exception):
    pass


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


class _Members:
    """A Literal's or Enum's values indexed once: a call looks its argument up (by type and
    value, as ``True`` is not ``1``) instead of comparing it with each member, and a string
    longer than the longest member is refused without being hashed."""

    __slots__ = ("tp", "table", "longest", "shown")

    def __init__(self, tp: Any) -> None:
        self.tp = tp  # held, so the id this is cached under stays this type's
        pairs = [(m.value, m) for m in tp] if _is_enum(tp) else [(v, v) for v in get_args(tp)]
        self.table: Dict[Tuple[type, Any], Any] = {}
        for value, out in pairs:
            self.table.setdefault((type(value), value), out)
        self.longest = max((len(v) for v, _ in pairs if isinstance(v, str)), default=-1)
        values = [v for v, _ in pairs]
        self.shown = json.dumps(values)
        if len(self.shown) > 4 * _PREVIEW:
            shown = []
            size = 0
            for v in values:
                size += len(_preview(v)) + 2
                if size > 2 * _PREVIEW:
                    break
                shown.append(_preview(v))
            self.shown = "[%s, …] (%d values)" % (", ".join(shown), len(values))

    def get(self, value: Any) -> Any:
        """The member ``value`` names, or _MISSING."""
        if _json_type(value) is None or (isinstance(value, str) and len(value) > self.longest):
            return _MISSING
        return self.table.get((type(value), value), _MISSING)


# By id: hashing a Literal hashes all its values, the cost this index is here to save.
_MEMBERS: Dict[int, _Members] = {}


def _members(tp: Any) -> _Members:
    members = _MEMBERS.get(id(tp))
    if members is None or members.tp is not tp:
        members = _MEMBERS[id(tp)] = _Members(tp)
    return members


_FIELD_NAMES: Dict[Any, frozenset] = {}


def _convert_fields(value: Any, fields: List[Tuple[str, Any, bool, Any]], path: str,
                    budget: _Budget) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise _BadArgs(path, "expected an object, got %s" % _got(value))
    out = {}
    for name, hint, required, _default in fields:
        if name in value:
            out[name] = _convert(value[name], hint, _at(path, name), budget)
        elif required:
            raise _BadArgs(path, "missing field `%s`" % name)
    return out


def _fits_exactly(value: Any, tp: Any) -> bool:
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if tp in (bool, int, float, str):
        return type(value) is tp
    if isinstance(value, dict) and (_is_typeddict(tp) or _is_dataclass(tp)):
        names = _FIELD_NAMES.get(tp)
        if names is None:
            names = _FIELD_NAMES[tp] = frozenset(name for name, _, _, _ in _fields(tp))
        # Not set(value): a huge object is not copied to find its first unknown key.
        return len(value) <= len(names) and all(k in names for k in value)
    return False


def _convert(value: Any, tp: Any, path: str, budget: _Budget) -> Any:
    """``value`` (parsed JSON) as ``tp``, or _BadArgs naming where it is wrong (_TooComplex
    once the budget is spent)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return _convert(value, args[0], path, budget)
    if tp is Any:
        return value
    budget.left -= 1
    if budget.left < 0:
        raise _TooComplex()
    if tp is None or tp is type(None):
        if value is None:
            return None
        raise _BadArgs(path, "expected null, got %s" % _got(value))
    if tp is bool or tp is str:
        if isinstance(value, tp):
            return value
        raise _BadArgs(path, "expected %s, got %s" % (_KINDS["boolean" if tp is bool else "string"], _got(value)))
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _BadArgs(path, "expected an integer, got %s" % _got(value))
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                raise _BadArgs(path, "the number is too large") from None
        raise _BadArgs(path, "expected a number, got %s" % _got(value))
    if tp in (list, List) or origin is list:
        if not isinstance(value, list):
            raise _BadArgs(path, "expected an array, got %s" % _got(value))
        if not args or args[0] is Any:
            return value
        return [_convert(v, args[0], _at(path, i), budget) for i, v in enumerate(value)]
    if tp in (dict, Dict) or origin is dict:
        if not isinstance(value, dict):
            raise _BadArgs(path, "expected an object, got %s" % _got(value))
        if not args or args[1] is Any:
            return value
        return {k: _convert(v, args[1], _at(path, k), budget) for k, v in value.items()}
    if origin in _UNIONS:
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        # An arm the value fits exactly (3 for int before float, an object whose keys are all
        # the arm's fields) before the first that merely takes it.
        for arm in sorted(arms, key=lambda a: not _fits_exactly(value, a)):
            try:
                return _convert(value, arm, path, budget)
            except _BadArgs:
                pass
        if len(arms) == 1:
            return _convert(value, arms[0], path, budget)  # its own error says best what is wrong
        raise _BadArgs(path, "%s matches none of the allowed types" % _got(value))
    if origin is Literal or _is_enum(tp):
        members = _members(tp)
        found = members.get(value)
        if found is _MISSING:
            raise _BadArgs(path, "expected one of %s, got %s" % (members.shown, _preview(value)))
        return found
    if _is_typeddict(tp):
        return _convert_fields(value, _fields(tp), path, budget)
    if _is_dataclass(tp):
        return tp(**_convert_fields(value, _fields(tp), path, budget))
    return value


def _admits_none(hint: Any) -> bool:
    if hint is Any or hint is None or hint is type(None):
        return True
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _admits_none(args[0])
    if origin in _UNIONS:
        return any(_admits_none(a) for a in args)
    return origin is Literal and None in args


def _none_default(hint: Any, default: Any) -> Any:
    """A parameter defaulting to None takes null too (``x: int = None`` is
    ``Optional[int]``), as Python before 3.11 reads it: the schema is the same on every
    version."""
    if default is None and not _admits_none(hint):
        return Optional[hint]
    return hint


class _TypedTool:
    """A handler called with its arguments as keyword parameters (and ``ctx`` if it takes it)."""

    def __init__(self, name: str, func: Callable[..., Any], description: Optional[str]) -> None:
        self.func = func
        func = _unwrap(func)
        code = func.__code__
        if code.co_flags & 0x04:  # *args
            raise TypeError("tool `%s`: a typed handler cannot take *args" % name)
        if getattr(code, "co_posonlyargcount", 0):
            raise TypeError("tool `%s`: a typed handler cannot take positional-only parameters" % name)
        names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        positional = names[:code.co_argcount]
        if hasattr(func, "__self__"):
            names, positional = names[1:], positional[1:]  # a bound method's self
        defaults: Dict[str, Any] = {}
        for pname, value in zip(reversed(positional), reversed(func.__defaults__ or ())):
            defaults[pname] = value
        defaults.update(func.__kwdefaults__ or {})
        try:
            hints = get_type_hints(func, include_extras=True)
        except Exception as err:  # noqa: BLE001 - an unresolvable annotation
            raise TypeError("tool `%s`: cannot read its type hints: %s" % (name, err)) from None
        self.name = name
        self.ctx_name = next((n for n in names if n == "ctx" or hints.get(n) is Context), None)
        self.extra = bool(code.co_flags & 0x08)  # **kwargs: unknown arguments reach it
        self.fields = [(n, _none_default(hints.get(n, Any), defaults.get(n, _MISSING)),
                        n not in defaults, defaults.get(n, _MISSING))
                       for n in names if n != self.ctx_name]
        try:
            self.schema = _object_schema(self.fields, 0)
        except _NoSchema as err:
            raise TypeError("tool `%s`: parameter %s" % (name, err)) from None
        if not self.fields:
            self.schema.pop("properties")
        self.description = description if description is not None else _cleandoc(func.__doc__)

    def served(self) -> Dict[str, Any]:
        tool: Dict[str, Any] = {"name": self.name, "schema": self.schema}
        if self.description:
            tool["description"] = self.description
        return tool

    def __call__(self, args: Any, ctx: "Context") -> Any:
        try:
            kwargs = _convert_fields(args, self.fields, "", _Budget(_CHECK_BUDGET))
        except _BadArgs as err:
            where = "`%s`: " % err.path if err.path else ""
            raise YepError("invalid arguments for `%s`: %s%s" % (self.name, where, err.message),
                           CODE_INVALID_PARAMS) from None
        except _TooComplex:
            # Refused, never passed on unchecked.
            raise YepError("invalid arguments for `%s`: the arguments are too large or complex "
                           "to check within the SDK's budget of %s checks"
                           % (self.name, format(_CHECK_BUDGET, ",")), CODE_INVALID_PARAMS) from None
        if self.extra and isinstance(args, dict):
            known = {n for n, _, _, _ in self.fields}
            kwargs.update((k, v) for k, v in args.items() if k not in known and k != self.ctx_name)
        if self.ctx_name is not None:
            kwargs[self.ctx_name] = ctx
        return self.func(**kwargs)


_MAPPINGS = ("dict", "Dict", "Mapping", "MutableMapping", "Any")


def _mapping_hint(hint: Any) -> bool:
    """Whether a hint (an object, or a string under ``from __future__ import annotations``)
    says "the argument object": absent, ``Any``, or a dict/mapping of any parameters."""
    if hint is None or hint is Any:
        return True
    if isinstance(hint, str):
        return hint.split("[")[0].strip().rsplit(".", 1)[-1] in _MAPPINGS
    origin = get_origin(hint) or hint
    return getattr(origin, "__name__", "") in _MAPPINGS


def _unwrap(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` read through decorators that kept ``__wrapped__`` (functools.wraps), as
    ``inspect.unwrap`` does, a cycle included."""
    seen = {id(func)}
    while hasattr(func, "__wrapped__") and len(seen) < 100:
        func = func.__wrapped__
        if id(func) in seen:
            break
        seen.add(id(func))
    return func


def _raw(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is a raw handler, called as ``f(args, ctx)`` with the argument object:
    exactly two positional parameters, the first unannotated or a dict/``Any``
    (``def f(args, ctx)``, ``def f(params: Dict[str, Any], ctx)``, ``lambda a, c: ...``), the
    second unannotated or ``Context``, any more with defaults; or one taking ``*args``
    (``lambda *a: ...``). Anything else is typed."""
    func = _unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None:
        return True  # a callable object: called as it always was
    names = code.co_varnames[:code.co_argcount]
    if hasattr(func, "__self__"):
        names = names[1:]
    hints = getattr(func, "__annotations__", {})
    if code.co_flags & 0x04:  # *args: called with (args, ctx) as it always was
        return len(names) <= 2 and (not names or _mapping_hint(hints.get(names[0])))
    # Parameters past (args, ctx) that have defaults were never filled by a call either.
    defaults = len(func.__defaults__ or ())
    kw_required = [n for n in code.co_varnames[code.co_argcount:code.co_argcount
                                               + code.co_kwonlyargcount]
                   if n not in (func.__kwdefaults__ or {})]
    if len(names) < 2 or len(names) - defaults > 2 or kw_required:
        return False
    second = hints.get(names[1])
    return _mapping_hint(hints.get(names[0])) and (
        second is None or second is Context or second == "Context")


# ---------------------------------------------------------------------------------------------
# The server builder


def _named(arg: Any, register: Callable[[str, Callable[..., Any]], None]) -> Any:
    """Support both ``@server.tool("name")`` and bare ``@server.tool``."""
    if callable(arg):
        register(arg.__name__, arg)
        return arg

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        register(arg if arg is not None else func.__name__, func)
        return func

    return decorator


def _slot(setter: Callable[[Callable[..., Any]], None], func: Any) -> Any:
    """Support both ``@server.hook`` and ``@server.hook()``."""
    if func is None:
        def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
            setter(f)
            return f
        return decorator
    setter(func)
    return func


class Server:
    """A capability server under construction. Register handlers, then :meth:`serve`."""

    def __init__(self, name: str, instructions: Optional[str] = None,
                 max_concurrency: int = 64, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.name = name
        self.instructions = instructions
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_frame_bytes = int(max_frame_bytes)
        self._tools: Dict[str, Callable[..., Any]] = {}
        self._served: Dict[str, Dict[str, Any]] = {}
        self._commands: Dict[str, Callable[..., Any]] = {}
        self._hook: Optional[Callable[..., Any]] = None
        self._dynamic_prompt: Optional[Callable[..., Any]] = None
        self._config: Optional[Callable[..., Any]] = None
        self._workspace: Optional[Callable[..., Any]] = None
        self._trace: Optional[Callable[..., Any]] = None
        self._start: Optional[Callable[..., Any]] = None

    # -- registration ------------------------------------------------------------------------

    def tool(self, name: Any = None, *, description: Optional[str] = None) -> Any:
        """``@server.tool("name")``: serve a tool. Raising answers the call with an error.

        A typed handler names its arguments as parameters, ``def forecast(city: str,
        days: int = 3, *, ctx)``: the argument schema comes from the hints (str, int, float,
        bool, list[T], dict[str, T], Optional, Union, Literal, Enum, TypedDict, dataclasses,
        ``Annotated[T, "description"]``), a default makes a parameter optional, and the
        docstring (or ``description=``) describes the tool. Arguments are checked and
        converted before it runs; a bad one is answered with an error naming it, and so are
        arguments too large to check in 10,000 steps (one per list item, dict value or field
        checked against a hint): they never reach the handler unchecked. ``ctx`` is the
        parameter so named (or annotated ``Context``).

        A raw handler, ``def f(args, ctx)``, gets the argument object as it came: a handler
        is raw when its first two positional parameters are an unannotated (or dict/Any)
        one and ``ctx`` and any more have defaults, or when it takes ``*args``."""
        def register(tool_name: str, func: Callable[..., Any]) -> None:
            if _raw(func):
                served: Dict[str, Any] = {"name": tool_name}
                if description:
                    served["description"] = description
                self._tools[tool_name] = func
            else:
                typed = _TypedTool(tool_name, func, description)
                served = typed.served()
                self._tools[tool_name] = typed
            self._served[tool_name] = served

        return _named(name, register)

    def command(self, name: Any = None) -> Any:
        """``@server.command("name")``: serve a slash command; ``def c(arguments: str, ctx)``
        returning a message string or a ``{"success", "message"}`` dict."""
        return _named(name, self._commands.__setitem__)

    def hook(self, func: Any = None) -> Any:
        """``@server.hook``: answer ``hook/fire``; ``def h(params) -> None | dict``."""
        return _slot(lambda f: setattr(self, "_hook", f), func)

    def dynamic_prompt(self, func: Any = None) -> Any:
        """``@server.dynamic_prompt``: recompute the system-prompt contribution per turn."""
        return _slot(lambda f: setattr(self, "_dynamic_prompt", f), func)

    def on_config(self, func: Any = None) -> Any:
        """``@server.on_config``: ``def c(config) -> "ok" | "restart-required" | None``; called
        with ``initialize.config`` at handshake (answer ignored) and on ``config/changed``."""
        return _slot(lambda f: setattr(self, "_config", f), func)

    def on_workspace(self, func: Any = None) -> Any:
        """``@server.on_workspace``: ``def w(root: str)`` on ``workspace/changed``."""
        return _slot(lambda f: setattr(self, "_workspace", f), func)

    def on_trace(self, func: Any = None) -> Any:
        """``@server.on_trace``: ``def t(event: dict)`` per ``trace/event``, in order."""
        return _slot(lambda f: setattr(self, "_trace", f), func)

    def on_start(self, func: Any = None) -> Any:
        """``@server.on_start``: ``def s(ctx)`` once the handshake completes (``initialized``);
        ``ctx`` has ``.status()`` and ``.log()``."""
        return _slot(lambda f: setattr(self, "_start", f), func)

    # -- introspection -----------------------------------------------------------------------

    def capabilities(self) -> List[str]:
        """The capability tokens this server advertises, given its handlers."""
        caps = ["tools", "streaming", "cancel"]
        flags = [
            (self.instructions is not None, "prompt"),
            (self._dynamic_prompt is not None, "dynamic_prompt"),
            (self._hook is not None, "hooks"),
            (bool(self._commands), "commands"),
            (self._trace is not None, "trace"),
        ]
        caps.extend(token for on, token in flags if on)
        return caps

    # -- running -----------------------------------------------------------------------------

    def serve(self) -> None:
        """Serve on this process's stdin/stdout until EOF or ``exit``.

        The real stdout is kept privately for the wire; fd 1 and ``sys.stdout`` are then
        pointed at stderr, so a stray ``print()`` in a handler lands in the host's log instead
        of corrupting the wire.
        """
        wire = _guard_stdout()
        _Session(self, sys.stdin.buffer, wire, close_output=True).run()

    def serve_on(self, input: Any, output: Any) -> None:
        """Serve on a binary reader (with ``readline(limit)``) and a binary writer. Returns at
        EOF or ``exit``, once every request has its answer and the notification handlers
        have run."""
        _Session(self, input, output).run()


def _guard_stdout() -> Any:
    """Re-point fd 1 and ``sys.stdout`` at stderr; return a private writer on the real stdout."""
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb")


# ---------------------------------------------------------------------------------------------
# The serve loop


class _InvalidParams(Exception):
    pass


def _uint(value: Any) -> Optional[int]:
    """A u64 id, or None (strings, negatives, floats and bools count as absent)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 64:
        return value
    return None


def _object(params: Any) -> Dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise _InvalidParams("expected an object, got %s" % type(params).__name__)
    return params


def _field(params: Dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = params.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _InvalidParams("field %r: expected %s" % (key, kind.__name__))
    return value


_EOF = object()


class _TooLong:
    def __init__(self, size: int) -> None:
        self.size = size


def _read_line(reader: Any, cap: int) -> Any:
    """One line without its newline, ``_EOF``, or ``_TooLong`` (the rest of it drained)."""
    line = reader.readline(cap + 1)
    if not line:
        return _EOF
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        return line
    if len(line) <= cap:
        return line  # the last line, without a newline
    total = len(line)
    while True:
        chunk = reader.readline(64 * 1024)
        if not chunk:
            break
        if chunk.endswith(b"\n"):
            total += len(chunk) - 1
            break
        total += len(chunk)
    return _TooLong(total)


class _Session:
    """One run of a server on one connection."""

    def __init__(self, server: Server, input: Any, output: Any,
                 close_output: bool = False) -> None:
        self.server = server
        self.close_output = close_output
        self.input = input
        self.wire = _Wire(output)
        self.cv = threading.Condition()
        self.inflight: Dict[int, _Call] = {}
        self.answering = 0
        self.asks: Dict[int, "queue.Queue[Tuple[bool, Any]]"] = {}
        self.asks_lock = threading.Lock()
        self.ids = itertools.count(1)
        self.slots = threading.BoundedSemaphore(server.max_concurrency)
        self.ordered: "queue.Queue[Any]" = queue.Queue(maxsize=_ORDERED_QUEUE)
        self.notifier = Notifier(self)

    # -- reverse requests --------------------------------------------------------------------

    def new_ask(self, slot: "queue.Queue[Tuple[bool, Any]]") -> int:
        with self.asks_lock:
            id = next(self.ids)
            self.asks[id] = slot
        return id

    def forget_ask(self, id: int) -> None:
        with self.asks_lock:
            self.asks.pop(id, None)

    # -- main loop ---------------------------------------------------------------------------

    def run(self) -> None:
        ordered = threading.Thread(target=self._ordered_loop, name="yep-notifications",
                                   daemon=True)
        ordered.start()
        try:
            cap = self.server.max_frame_bytes
            while True:
                line = _read_line(self.input, cap)
                if line is _EOF:
                    break
                if isinstance(line, _TooLong):
                    _note("skipping a %d-byte line over the %d-byte frame cap"
                          % (line.size, cap))
                    continue
                if not line.strip():
                    continue
                if not self._dispatch(line):
                    break
        finally:
            self._end(ordered)

    def _dispatch(self, line: bytes) -> bool:
        """Handle one line; False on ``exit``."""
        try:
            msg = json.loads(line)
        except ValueError as err:
            _note("skipping malformed wire line: %s" % err)
            return True
        if not isinstance(msg, dict):
            _note("skipping malformed wire line: not a JSON object")
            return True
        method = msg.get("method")
        if method is not None and not isinstance(method, str):
            _note("skipping malformed wire line: method is not a string")
            return True
        id = _uint(msg.get("id"))
        params = msg.get("params")
        if method is not None and id is not None:
            self._request(id, method, params)
        elif method is not None:
            return self._notification(method, params)
        elif id is not None:
            self._response(id, msg)
        else:
            _note("skipping a wire line that is neither request, notification nor response")
        return True

    def _response(self, id: int, msg: Dict[str, Any]) -> None:
        with self.asks_lock:
            slot = self.asks.pop(id, None)
        if slot is None:
            return
        if msg.get("error") is not None:
            slot.put((False, msg["error"]))
        else:
            slot.put((True, msg.get("result")))

    def _notification(self, method: str, params: Any) -> bool:
        if method == "exit":
            return False
        try:
            if method == "initialized":
                self.ordered.put(("initialized", None))
            elif method == "trace/event":
                self.ordered.put(("trace", _object(params)))
            elif method == "workspace/changed":
                root = _field(_object(params), "workspace_root", str, "")
                self.ordered.put(("workspace", root))
            # Unknown notifications are ignored.
        except _InvalidParams as err:
            _note("ignoring %s with bad params: %s" % (method, err))
        return True

    def _request(self, id: int, method: str, params: Any) -> None:
        try:
            if method == "initialize":
                self._initialize(id, _object(params))
            elif method == "cancel":
                self._cancel(id, _object(params))
            elif method == "shutdown":
                # Answered by the ordered thread, after every earlier notification.
                self.ordered.put(("shutdown", id))
            elif method == "config/changed":
                self._config_changed(id, _object(params))
            elif method in _WORK_METHODS:
                self._start_work(id, method, _object(params))
            else:
                self.wire.answer(id, error=_error(
                    CODE_METHOD_NOT_FOUND, "method not supported by this host: %s" % method))
        except _InvalidParams as err:
            self.wire.answer(id, error=_error(
                CODE_INVALID_PARAMS, "invalid params for %s: %s" % (method, err)))

    # -- control requests (answered by the reader) -------------------------------------------

    def _initialize(self, id: int, params: Dict[str, Any]) -> None:
        version = _field(params, "protocol_version", str, "")
        if version and not version_compatible(version):
            self.wire.answer(id, error=_error(
                CODE_INCOMPATIBLE_VERSION,
                "host speaks YEP %s, incompatible with this server (%s)"
                % (version, PROTOCOL_VERSION)))
            return
        server = self.server
        if server._config is not None:
            try:
                server._config(params.get("config"))
            except Exception:  # noqa: BLE001
                _note("on_config failed at handshake:\n" + _failure())
        capability_params: Dict[str, Any] = {
            "tools": [server._served[name] for name in sorted(server._tools)],
        }
        if server.instructions is not None:
            capability_params["prompt"] = {"static": server.instructions}
        self.wire.answer(id, {
            "protocol_version": PROTOCOL_VERSION,
            "name": server.name,
            "capabilities": server.capabilities(),
            "capability_params": capability_params,
        })

    def _cancel(self, id: int, params: Dict[str, Any]) -> None:
        target = _uint(params.get("id", 0))
        if target is None:
            raise _InvalidParams("field 'id': expected an unsigned integer")
        with self.cv:
            call = self.inflight.pop(target, None)
            if call is not None:
                self.answering += 1
        if call is not None:
            call.cancel()
            try:
                # The cancelled call resolves now, not when its handler notices.
                self.wire.answer(target, error=_cancelled_error())
            finally:
                self._answered()
        self.wire.answer(id, {"cancelled": call is not None})

    def _config_changed(self, id: int, params: Dict[str, Any]) -> None:
        handler = self.server._config
        status = "restart-required"
        if handler is not None:
            try:
                answer = handler(params.get("config"))
            except Exception:  # noqa: BLE001
                _note("on_config failed:\n" + _failure())
                answer = "restart-required"
            if answer is None or answer == "ok":
                status = "ok"
            elif answer != "restart-required":
                _note("on_config returned %r; treating it as restart-required" % (answer,))
        self.wire.answer(id, {"status": status})

    # -- work requests (each on its own thread) ----------------------------------------------

    def _start_work(self, id: int, method: str, params: Dict[str, Any]) -> None:
        call = _Call()
        with self.cv:
            self.inflight[id] = call
        thread = threading.Thread(target=self._work, args=(id, method, params, call),
                                  name="yep-%s-%d" % (method, id), daemon=True)
        try:
            thread.start()
        except RuntimeError as err:
            with self.cv:
                mine = self.inflight.get(id) is call
                if mine:
                    del self.inflight[id]
                    self.answering += 1
            if mine:
                try:
                    self.wire.answer(id, error=_error(
                        CODE_INTERNAL_ERROR, "could not start a thread: %s" % err))
                finally:
                    self._answered()

    def _work(self, id: int, method: str, params: Dict[str, Any], call: _Call) -> None:
        with self.slots:
            with self.cv:
                if self.inflight.get(id) is not call:
                    return  # cancelled before it started: already answered
            ctx = Context(self, id, call)
            result: Any = None
            error: Optional[Dict[str, Any]] = None
            try:
                result = self._handle(method, params, ctx)
            except YepError as err:
                error = err.to_wire()
            except BaseException as err:  # noqa: BLE001 - a handler must never kill the call
                error = _error(CODE_UNCLASSIFIED, str(err) or type(err).__name__)
            # Whoever removes the entry answers: a cancelled call was already answered.
            with self.cv:
                mine = self.inflight.get(id) is call
                if mine:
                    del self.inflight[id]
                    self.answering += 1
            if not mine:
                return
            try:
                self.wire.answer(id, result, error)
            finally:
                self._answered()

    def _answered(self) -> None:
        with self.cv:
            self.answering -= 1
            self.cv.notify_all()

    def _handle(self, method: str, params: Dict[str, Any], ctx: Context) -> Any:
        server = self.server
        if method == "tool/call":
            name = _field(params, "name", str, "")
            handler = server._tools.get(name)
            if handler is None:
                raise YepError("no such tool: %s" % name)
            args = params.get("args")
            return handler(args if args is not None else {}, ctx)
        if method == "hook/fire":
            fire = dict(params)
            fire.setdefault("event", "")
            fire.setdefault("tool_name", "")
            if fire.get("args") is None:
                fire["args"] = {}
            decision = server._hook(fire) if server._hook is not None else None
            if decision is None:
                return {"block": False}
            if not isinstance(decision, dict):
                raise TypeError("a hook must return None or a dict, not %s"
                                % type(decision).__name__)
            return decision
        if method == "prompt/contribution":
            text = server._dynamic_prompt() if server._dynamic_prompt is not None else ""
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise TypeError("a dynamic prompt must return a str, not %s"
                                % type(text).__name__)
            return {"text": text}
        if method == "command/execute":
            name = _field(params, "name", str, "")
            arguments = _field(params, "arguments", str, "")
            handler = server._commands.get(name)
            if handler is None:
                raise YepError("no such command: %s" % name)
            out = handler(arguments, ctx)
            if out is None:
                return {"success": True, "message": ""}
            if isinstance(out, str):
                return {"success": True, "message": out}
            if not isinstance(out, dict):
                raise TypeError("a command must return a str or a dict, not %s"
                                % type(out).__name__)
            return out
        raise YepError("method not supported by this host: %s" % method, CODE_METHOD_NOT_FOUND)

    # -- notifications, in order -------------------------------------------------------------

    def _ordered_loop(self) -> None:
        server = self.server
        while True:
            item = self.ordered.get()
            if item is None:
                return
            kind, payload = item
            try:
                if kind == "shutdown":
                    self.wire.answer(payload, {})
                elif kind == "initialized" and server._start is not None:
                    server._start(self.notifier)
                elif kind == "trace" and server._trace is not None:
                    server._trace(payload)
                elif kind == "workspace" and server._workspace is not None:
                    server._workspace(payload)
            except Exception:  # noqa: BLE001
                _note("%s handler failed:\n%s" % (kind, _failure()))

    # -- the end -----------------------------------------------------------------------------

    def _end(self, ordered: threading.Thread) -> None:
        """No more input. Let in-flight requests finish (up to EOF_GRACE), answer the rest
        ``cancelled`` so every request gets exactly one answer, let the notification handlers
        finish what already arrived, then return."""
        with self.cv:
            self.cv.wait_for(lambda: not self.inflight and not self.answering, EOF_GRACE)
            rest = list(self.inflight.items())
            self.inflight.clear()
        for id, call in rest:
            call.cancel()
            self.wire.answer(id, error=_cancelled_error())
        with self.cv:
            self.cv.wait_for(lambda: not self.answering, EOF_GRACE)
        self.ordered.put(None)
        ordered.join()
        if self.close_output:
            self.wire.close()
