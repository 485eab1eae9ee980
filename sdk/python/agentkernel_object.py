"""Helpers for writing the in-sandbox server of an agentkernel durable object.

Standard library only: copy this file next to your server. Register methods
by name, use ctx.storage for state that survives hibernation, and serve the
daemon's protocol on 127.0.0.1:9333 (or $AGENTKERNEL_OBJECT_PORT)::

    from agentkernel_object import ObjectServer, ObjectError

    server = ObjectServer()

    @server.method("increment")
    def increment(ctx, args):
        n = ctx.storage.get("count", 0) + (args or {}).get("amount", 1)
        ctx.storage.put("count", n)
        return {"value": n}

    server.serve()

A handler gets (ctx, args) and returns any JSON value. Raising ObjectError
(message, status=...) fails the call with that status; any other exception
is a 500. The daemon passes both through to the caller.

One server serves one object (isolation = "object") or many objects of its
class (isolation = "class"): storage is kept per object id, and ctx.storage
is always the storage of the object the call is for, so the same code works
in both modes. Calls to different objects may run at the same time.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

__all__ = ["ObjectServer", "ObjectError", "Context", "Storage", "Alarm", "address"]

DEFAULT_PORT = 9333
PORT_ENV = "AGENTKERNEL_OBJECT_PORT"

MODE_SNAPSHOT = "snapshot"
MODE_WRITE_THROUGH = "write-through"

H_STORAGE_MODE = "X-Agentkernel-Storage-Mode"
H_OBJECT_CLASS = "X-Agentkernel-Object-Class"
H_OBJECT_ID = "X-Agentkernel-Object-Id"
H_ALARM_ID = "X-Agentkernel-Alarm-Id"
H_ALARM_RETRY_COUNT = "X-Agentkernel-Alarm-Retry-Count"
H_ALARM_IS_RETRY = "X-Agentkernel-Alarm-Is-Retry"
H_ENVELOPE = "X-Agentkernel-Envelope"
# Sent on GET /__health: this server keeps storage per object id, so the
# daemon may send it many objects (isolation = "class").
H_OBJECTS = "X-Agentkernel-Objects"


class ObjectError(Exception):
    """A method failure with the HTTP status the caller should see."""

    def __init__(self, message, status=500):
        super().__init__(message)
        self.message = str(message)
        self.status = status if isinstance(status, int) and 400 <= status <= 599 else 500


class CallDoneError(RuntimeError):
    """Storage written after the handler returned (the daemon would never hear of it)."""


class Alarm:
    """The alarm that fired a call."""

    __slots__ = ("id", "retry_count", "is_retry")

    def __init__(self, id, retry_count, is_retry):
        self.id = id
        self.retry_count = retry_count
        self.is_retry = is_retry

    def __repr__(self):
        return "Alarm(id=%r, retry_count=%r, is_retry=%r)" % (self.id, self.retry_count, self.is_retry)


class _Store:
    """One object's storage shared by all its calls; values kept as JSON text
    so a handler never aliases stored data. The lock is this object's only:
    calls to other objects never wait on it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.data = {}

    def dump(self):
        with self.lock:
            items = list(self.data.items())
        return "{" + ",".join(json.dumps(k) + ":" + v for k, v in items) + "}"

    def replace(self, data):
        encoded = {k: _encode(v) for k, v in data.items()}
        with self.lock:
            self.data = encoded


class Storage:
    """The object's key-value storage as one call sees it. Thread-safe. Every
    put and delete is recorded in order for write-through mode."""

    def __init__(self, store):
        self._store = store
        self._writes = []  # guarded by the store's lock: same order as applied
        self._done = False

    def get(self, key, default=None):
        """The value at key (a fresh copy), or default when missing."""
        with self._store.lock:
            raw = self._store.data.get(key)
        return default if raw is None else json.loads(raw)

    def put(self, key, value):
        """Store value (anything json.dumps accepts) at key."""
        _check_key(key)
        raw = _encode(value)
        with self._store.lock:
            if self._done:
                raise CallDoneError("storage used after the method returned")
            self._store.data[key] = raw
            self._writes.append((key, raw))

    def delete(self, key):
        """Remove key; a missing key is not an error (and is still reported)."""
        _check_key(key)
        with self._store.lock:
            if self._done:
                raise CallDoneError("storage used after the method returned")
            self._store.data.pop(key, None)
            self._writes.append((key, None))

    def keys(self):
        """Every key, sorted."""
        with self._store.lock:
            return sorted(self._store.data)

    list = keys

    def __contains__(self, key):
        with self._store.lock:
            return key in self._store.data

    def _finish(self):
        with self._store.lock:
            self._done = True
            return "[" + ",".join(
                '{"key":%s,"delete":true}' % json.dumps(k) if raw is None
                else '{"key":%s,"value":%s}' % (json.dumps(k), raw)
                for k, raw in self._writes) + "]"


class Context:
    """One method call: which object, which mode, the alarm (or None), storage."""

    def __init__(self, method, headers, storage):
        self.method = method
        self.object_class = headers.get(H_OBJECT_CLASS, "")
        self.object_id = headers.get(H_OBJECT_ID, "")
        mode = headers.get(H_STORAGE_MODE, "")
        self.mode = MODE_WRITE_THROUGH if mode == MODE_WRITE_THROUGH else MODE_SNAPSHOT
        self.headers = headers
        self.storage = storage
        self.alarm = None
        alarm_id = headers.get(H_ALARM_ID, "")
        if alarm_id:
            try:
                retries = int(headers.get(H_ALARM_RETRY_COUNT, "0"))
            except ValueError:
                retries = 0
            self.alarm = Alarm(alarm_id, retries, headers.get(H_ALARM_IS_RETRY, "") == "true")


def address():
    """The (host, port) the daemon calls: 127.0.0.1 on $AGENTKERNEL_OBJECT_PORT or 9333."""
    return ("127.0.0.1", int(os.environ.get(PORT_ENV) or DEFAULT_PORT))


class _Stores:
    """The storage of every object this server holds, by object id (a request
    without X-Agentkernel-Object-Id is the object "").

    Daemons from before isolation = "class" name the object on method calls
    but not on /__storage, and give a server one object. So until a
    /__storage request names an object, the first object called shares its
    storage with the object "" that header-less /__storage requests address.
    """

    def __init__(self):
        self._lock = threading.Lock()  # guards the fields below, not the stores
        self._by_id = {}
        self._named = False  # a /__storage request has named an object
        self._bound = None  # the object sharing ""'s storage until then

    def _open(self, object_id):
        store = self._by_id.get(object_id)
        if store is None:
            store = self._by_id[object_id] = _Store()
        return store

    def _storage_request(self, object_id):
        if object_id and not self._named:
            self._named = True
            if self._bound is not None:
                self._by_id.pop("", None)  # the bound object keeps the storage
                self._bound = None

    def for_call(self, object_id):
        """The store a method call of the object uses, created empty."""
        with self._lock:
            if object_id and not self._named and self._bound is None:
                self._bound = object_id
                self._by_id[object_id] = self._open("")
            return self._open(object_id)

    def get(self, object_id):
        """The object's store for GET /__storage, or None when not held."""
        with self._lock:
            self._storage_request(object_id)
            return self._by_id.get(object_id)

    def open(self, object_id):
        """The object's store for POST /__storage, created empty."""
        with self._lock:
            self._storage_request(object_id)
            return self._open(object_id)

    def forget(self, object_id):
        """Drop the object's storage (its calls still running keep theirs)."""
        with self._lock:
            self._storage_request(object_id)
            self._by_id.pop(object_id, None)
            if self._bound is not None and object_id in ("", self._bound):
                self._by_id.pop("", None)
                self._by_id.pop(self._bound, None)
                self._bound = None


class ObjectServer:
    """Dispatches the daemon's calls to registered methods."""

    def __init__(self):
        self._methods = {}
        self._stores = _Stores()

    def method(self, name, fn=None):
        """Register fn(ctx, args) under name; usable as a decorator."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError("invalid method name %r" % (name,))
        if name.startswith("__"):
            raise ValueError('method name %r: names starting with "__" are reserved' % name)
        if name in self._methods:
            raise ValueError("method %r registered twice" % name)

        def register(f):
            if not callable(f):
                raise TypeError("method %r: handler is not callable" % name)
            self._methods[name] = f
            return f

        return register if fn is None else register(fn)

    def make_server(self, addr=None):
        """An unstarted ThreadingHTTPServer bound to addr (default address())."""
        server = ThreadingHTTPServer(addr or address(), self._handler_class())
        server.daemon_threads = True
        return server

    def serve(self, addr=None):
        """Serve forever on addr (default address())."""
        server = self.make_server(addr)
        try:
            server.serve_forever()
        finally:
            server.server_close()

    def _call(self, name, headers, body):
        """Run one call; returns (status, extra headers, body bytes)."""
        storage = Storage(self._stores.for_call(headers.get(H_OBJECT_ID, "")))
        ctx = Context(name, headers, storage)
        extra = {H_ENVELOPE: "1"} if ctx.mode == MODE_WRITE_THROUGH else {}
        status, field, value = 200, "result", None
        try:
            text = body.decode("utf-8").strip()
            args = json.loads(text) if text else None
        except ValueError as e:
            status, field, value = 400, "error", json.dumps("args are not valid JSON: %s" % e)
        else:
            fn = self._methods.get(name)
            if fn is None:
                status, field, value = 404, "error", json.dumps("unknown method %s" % json.dumps(name))
            else:
                try:
                    value = json.dumps(fn(ctx, args), separators=(",", ":"))
                except ObjectError as e:
                    status, field, value = e.status, "error", json.dumps(e.message)
                except Exception as e:  # any handler failure is the caller's 500
                    status, field, value = 500, "error", json.dumps("%s: %s" % (type(e).__name__, e))
        writes = storage._finish()
        if ctx.mode == MODE_WRITE_THROUGH:
            out = '{"%s":%s,"writes":%s}' % (field, value, writes)
        elif field == "result":
            out = value
        else:
            out = '{"error":%s}' % value
        return status, extra, out.encode("utf-8")

    def _handler_class(self):
        obj = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keeps the daemon's connection alive between calls.
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle on, the
            # second waits ~40 ms for the daemon's delayed ACK.
            disable_nagle_algorithm = True

            def log_message(self, format, *args):
                pass  # one line per call would swamp the sandbox's log

            def _send(self, status, body, extra=None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status, message, extra=None):
                self._send(status, json.dumps({"error": message}).encode("utf-8"), extra)

            def _body(self):
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()  # the CRLF after each chunk
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n > 0 else b""

            def _path(self):
                return self.path.split("?", 1)[0]

            def _object_id(self):
                return self.headers.get(H_OBJECT_ID, "")

            def do_GET(self):
                path = self._path()
                if path == "/__health":
                    self._send(200, b'{"ok":true}', {H_OBJECTS: "many"})
                elif path == "/__storage":
                    store = obj._stores.get(self._object_id())
                    self._send(200, store.dump().encode("utf-8") if store else b"{}")
                else:
                    self._body()
                    self._error(405, "method not allowed; use POST", {"Allow": "POST"})

            def do_POST(self):
                path = self._path()
                body = self._body()
                if path == "/__health":
                    self._error(405, "method not allowed; use GET", {"Allow": "GET"})
                elif path == "/__storage":
                    text = body.decode("utf-8", "replace").strip()
                    try:
                        data = json.loads(text) if text else None
                    except ValueError:
                        data = []  # reported as not an object below
                    if data is None:
                        data = {}
                    if not isinstance(data, dict):
                        self._error(400, "restore storage: body must be a JSON object of key to value")
                        return
                    obj._stores.open(self._object_id()).replace(data)
                    self._send(200, b'{"ok":true}')
                else:
                    status, extra, out = obj._call(unquote(path[1:]), self.headers, body)
                    self._send(status, out, extra)

            def do_DELETE(self):
                path = self._path()
                self._body()
                if path == "/__storage":
                    obj._stores.forget(self._object_id())
                    self.send_response(204)
                    self.end_headers()
                else:
                    self._error(405, "method not allowed")

            def _not_allowed(self):
                self._body()
                self._error(405, "method not allowed")

            do_PUT = do_PATCH = _not_allowed

        return Handler


def _encode(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _check_key(key):
    if not isinstance(key, str) or not key:
        raise ValueError("storage key must be a non-empty string, got %r" % (key,))
