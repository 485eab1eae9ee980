"use strict";
// Helpers for writing the in-sandbox server of an agentkernel durable object.
//
// CommonJS, no dependencies: copy this file next to your server. Register
// methods by name, use ctx.storage for state that survives hibernation, and
// serve the daemon's protocol on 127.0.0.1:9333 (or $AGENTKERNEL_OBJECT_PORT):
//
//   const { ObjectServer, ObjectError } = require("./agentkernel-object");
//   const server = new ObjectServer();
//   server.method("increment", (ctx, args) => {
//     const value = ctx.storage.get("count", 0) + ((args && args.amount) || 1);
//     ctx.storage.put("count", value);
//     return { value };
//   });
//   server.listen();
//
// A handler gets (ctx, args) and returns a JSON value or a Promise of one.
// Throwing ObjectError(message, status) fails the call with that status; any
// other error is a 500. The daemon passes both through to the caller.
//
// One server serves one object (isolation = "object") or many objects of its
// class (isolation = "class"): storage is kept per object id, and ctx.storage
// is always the storage of the object the call is for, so the same code works
// in both modes. Calls to different objects may be in flight at once.

const http = require("http");

const DEFAULT_PORT = 9333;
const PORT_ENV = "AGENTKERNEL_OBJECT_PORT";
const MODE_SNAPSHOT = "snapshot";
const MODE_WRITE_THROUGH = "write-through";

// Node lower-cases incoming header names.
const H = {
  storageMode: "x-agentkernel-storage-mode",
  objectClass: "x-agentkernel-object-class",
  objectId: "x-agentkernel-object-id",
  alarmId: "x-agentkernel-alarm-id",
  alarmRetryCount: "x-agentkernel-alarm-retry-count",
  alarmIsRetry: "x-agentkernel-alarm-is-retry",
  envelope: "X-Agentkernel-Envelope",
  // Sent on GET /__health: this server keeps storage per object id, so the
  // daemon may send it many objects (isolation = "class").
  objects: "X-Agentkernel-Objects",
};

// A method failure with the HTTP status the caller should see.
class ObjectError extends Error {
  constructor(message, status = 500) {
    super(String(message));
    this.name = "ObjectError";
    this.status = Number.isInteger(status) && status >= 400 && status <= 599 ? status : 500;
  }
}

// Storage written after the handler settled: the daemon would never hear of it.
class CallDoneError extends Error {
  constructor() {
    super("storage used after the method returned");
    this.name = "CallDoneError";
  }
}

// The object's key-value storage as one call sees it. Values are kept as JSON
// text, so a handler never aliases stored data. Every put and delete is
// recorded in order for write-through mode.
class Storage {
  constructor(store) {
    this._store = store; // Map of key -> JSON text, shared by all the object's calls
    this._writes = [];
    this._done = false;
  }

  // The value at key (a fresh copy), or dflt when missing.
  get(key, dflt = undefined) {
    const raw = this._store.get(key);
    return raw === undefined ? dflt : JSON.parse(raw);
  }

  // Store value (anything JSON.stringify can encode) at key.
  put(key, value) {
    checkKey(key);
    const raw = encode(value, key);
    if (this._done) throw new CallDoneError();
    this._store.set(key, raw);
    this._writes.push([key, raw]);
  }

  // Remove key; a missing key is not an error (and is still reported).
  delete(key) {
    checkKey(key);
    if (this._done) throw new CallDoneError();
    this._store.delete(key);
    this._writes.push([key, null]);
  }

  has(key) {
    return this._store.has(key);
  }

  // Every key, sorted.
  keys() {
    return [...this._store.keys()].sort();
  }

  list() {
    return this.keys();
  }

  _finish() {
    this._done = true;
    return "[" + this._writes.map(([k, raw]) => raw === null
      ? `{"key":${JSON.stringify(k)},"delete":true}`
      : `{"key":${JSON.stringify(k)},"value":${raw}}`).join(",") + "]";
  }
}

// The [host, port] the daemon calls.
function address() {
  return ["127.0.0.1", Number(process.env[PORT_ENV] || DEFAULT_PORT)];
}

// Dispatches the daemon's calls to registered methods.
class ObjectServer {
  constructor() {
    this._methods = new Map();
    // Object id -> Map of key -> JSON text. A request without
    // X-Agentkernel-Object-Id is the object "".
    this._stores = new Map();
    // Daemons from before isolation = "class" name the object on method
    // calls but not on /__storage, and give a server one object. So until a
    // /__storage request names an object (_named), the first object called
    // (_bound) shares its storage with the object "" that header-less
    // /__storage requests address.
    this._named = false;
    this._bound = null;
  }

  // Register fn(ctx, args) under name.
  method(name, fn) {
    if (typeof name !== "string" || name === "" || name.includes("/")) {
      throw new Error(`invalid method name ${JSON.stringify(name)}`);
    }
    if (name.startsWith("__")) {
      throw new Error(`method name ${JSON.stringify(name)}: names starting with "__" are reserved`);
    }
    if (typeof fn !== "function") throw new TypeError(`method ${JSON.stringify(name)}: handler is not a function`);
    if (this._methods.has(name)) throw new Error(`method ${JSON.stringify(name)} registered twice`);
    this._methods.set(name, fn);
    return this;
  }

  // An http.Server running the protocol, not yet listening.
  createServer() {
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        this._route(req, Buffer.concat(chunks).toString("utf8")).then(
          ([status, body, extra]) => send(res, status, body, extra),
          (err) => send(res, 500, JSON.stringify({ error: String(err && err.message || err) })));
      });
    });
    return server;
  }

  // Listen on address(); resolves with the http.Server once listening.
  listen() {
    const [host, port] = address();
    const server = this.createServer();
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve(server));
    });
  }

  async _route(req, body) {
    const path = decodeURIComponent(req.url.split("?")[0]);
    if (path === "/__health") {
      if (req.method !== "GET") return notAllowed("GET");
      return [200, '{"ok":true}', { [H.objects]: "many" }];
    }
    if (path === "/__storage") {
      if (!["GET", "POST", "DELETE"].includes(req.method)) return notAllowed("GET, POST, DELETE");
      const id = req.headers[H.objectId] || "";
      if (id !== "" && !this._named) {
        this._named = true;
        if (this._bound !== null) {
          this._stores.delete(""); // the bound object keeps the storage
          this._bound = null;
        }
      }
      if (req.method === "GET") return [200, dump(this._stores.get(id))];
      if (req.method === "DELETE") {
        // Forget the object; calls of it still running keep their Map.
        this._stores.delete(id);
        if (this._bound !== null && (id === "" || id === this._bound)) {
          this._stores.delete("");
          this._stores.delete(this._bound);
          this._bound = null;
        }
        return [204, ""];
      }
      let data;
      try {
        data = body.trim() === "" ? null : JSON.parse(body);
      } catch (e) {
        data = [];
      }
      if (data === null) data = {};
      if (typeof data !== "object" || Array.isArray(data)) {
        return [400, JSON.stringify({ error: "restore storage: body must be a JSON object of key to value" })];
      }
      const entries = Object.entries(data).map(([k, v]) => [k, JSON.stringify(v)]);
      // Refill the same Map (no await in between, so atomically): calls still
      // running hold a Storage over it and must see the restored data.
      const store = this._open(id);
      store.clear();
      for (const [k, raw] of entries) store.set(k, raw);
      return [200, '{"ok":true}'];
    }
    if (req.method !== "POST") return notAllowed("POST");
    return this._call(path.slice(1), req.headers, body);
  }

  // The object's Map, created empty on first use.
  _open(id) {
    let store = this._stores.get(id);
    if (store === undefined) {
      store = new Map();
      this._stores.set(id, store);
    }
    return store;
  }

  async _call(name, headers, body) {
    const id = headers[H.objectId] || "";
    if (id !== "" && !this._named && this._bound === null) {
      this._bound = id;
      this._stores.set(id, this._open(""));
    }
    const storage = new Storage(this._open(id));
    const mode = headers[H.storageMode] === MODE_WRITE_THROUGH ? MODE_WRITE_THROUGH : MODE_SNAPSHOT;
    const ctx = {
      method: name,
      class: headers[H.objectClass] || "",
      id: headers[H.objectId] || "",
      mode,
      alarm: null,
      headers,
      storage,
    };
    if (headers[H.alarmId]) {
      ctx.alarm = {
        id: headers[H.alarmId],
        retryCount: parseInt(headers[H.alarmRetryCount], 10) || 0,
        isRetry: headers[H.alarmIsRetry] === "true",
      };
    }
    let status = 200;
    let field = "result";
    let value;
    try {
      const text = body.trim();
      let args;
      try {
        args = text === "" ? null : JSON.parse(text);
      } catch (e) {
        throw new ObjectError(`args are not valid JSON: ${e.message}`, 400);
      }
      const fn = this._methods.get(name);
      if (!fn) throw new ObjectError(`unknown method ${JSON.stringify(name)}`, 404);
      const result = await fn(ctx, args);
      value = result === undefined ? "null" : encode(result, "result");
    } catch (err) {
      status = err instanceof ObjectError ? err.status : 500;
      field = "error";
      const msg = err instanceof Error ? (err instanceof ObjectError ? err.message : `${err.name}: ${err.message}`) : String(err);
      value = JSON.stringify(msg);
    }
    const writes = storage._finish();
    if (mode === MODE_WRITE_THROUGH) {
      return [status, `{"${field}":${value},"writes":${writes}}`, { [H.envelope]: "1" }];
    }
    return [status, field === "result" ? value : `{"error":${value}}`];
  }
}

function send(res, status, body, extra) {
  if (status === 204) {
    res.writeHead(204, extra || {});
    res.end();
    return;
  }
  const buf = Buffer.from(body, "utf8");
  res.writeHead(status, Object.assign({ "Content-Type": "application/json", "Content-Length": buf.length }, extra || {}));
  res.end(buf);
}

// dump is an object's whole storage as JSON ({} for one this server lacks).
function dump(store) {
  if (store === undefined) return "{}";
  return "{" + [...store].map(([k, raw]) => JSON.stringify(k) + ":" + raw).join(",") + "}";
}

function notAllowed(allow) {
  return [405, JSON.stringify({ error: `method not allowed; use ${allow}` }), { Allow: allow }];
}

function checkKey(key) {
  if (typeof key !== "string" || key === "") {
    throw new TypeError(`storage key must be a non-empty string, got ${JSON.stringify(key)}`);
  }
}

// encode is JSON.stringify that refuses what JSON cannot hold instead of
// silently storing "undefined" or null.
function encode(value, what) {
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new TypeError(`${what}: ${value} is not a JSON number`);
  }
  const raw = JSON.stringify(value);
  if (raw === undefined) throw new TypeError(`${what}: value is not JSON`);
  return raw;
}

module.exports = { ObjectServer, ObjectError, CallDoneError, Storage, address, MODE_SNAPSHOT, MODE_WRITE_THROUGH };
