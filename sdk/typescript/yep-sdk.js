// @yep/sdk: write a YEP 1.0 capability server in JavaScript. Zero dependencies, Node >= 18.
//
// The wire is one JSON object per line on stdin/stdout. Messages are classified by their
// fields alone: `method` + numeric `id` is a request, `method` alone a notification, a numeric
// `id` without `method` a response. `"jsonrpc"` is accepted, never required, never sent.
//
// Types: ./yep-sdk.d.ts. The wire is described in docs/protocol.md and schema/yep/v1/.

/** The protocol version this SDK speaks. */
export const PROTOCOL_VERSION = "1.0";

/** Every host → server method this SDK handles (requests and notifications). */
export const HOST_METHODS = Object.freeze([
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
]);

/** Every capability token this SDK may advertise in its `initialize` answer. */
export const CAPABILITIES = Object.freeze([
  "tools",
  "streaming",
  "cancel",
  "prompt",
  "dynamic_prompt",
  "hooks",
  "commands",
  "trace",
]);

/** Error codes on the wire (JSON-RPC numbering). */
export const ERROR_CODES = Object.freeze({
  UNCLASSIFIED: 0,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  CANCELLED: -32800,
  INCOMPATIBLE_VERSION: -32001,
});

/** The default cap on one incoming line, in bytes. Longer lines are skipped. */
export const DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024;

/** At EOF or `exit`, requests still running get this long before they are answered cancelled. */
const EOF_GRACE_MS = 1000;

// The real stdout, captured before anyone (the stdout guard included) can replace it.
const realStdoutWrite = process.stdout.write;

/**
 * An error with wire fields. Throw one from a handler to choose the error's `code`,
 * `retryable` and `data`; any other thrown value answers `{code: 0, message}`.
 */
export class YepError extends Error {
  constructor(message, { code = 0, retryable = false, data } = {}) {
    super(message);
    this.name = "YepError";
    this.code = code;
    this.retryable = retryable;
    if (data !== undefined) this.data = data;
  }

  /** The wire error object. */
  toWire() {
    const err = { code: this.code, message: this.message };
    if (this.retryable) err.retryable = true;
    if (this.data !== undefined && this.data !== null) err.data = this.data;
    return err;
  }
}

/** Allow the tool call unchanged (the same as returning `undefined` from a hook). */
export function allow() {
  return { block: false, reason: "", user_message: null };
}

/** Block the tool call, with a reason for the model and an optional message for the user. */
export function block(reason, userMessage) {
  return { block: true, reason: String(reason ?? ""), user_message: userMessage ?? null };
}

/** Allow the tool call with replacement arguments (pre_tool_use only). */
export function modify(args) {
  return { block: false, reason: "", user_message: null, modified_args: args };
}

/** Whether a peer speaking `version` can talk to us: the majors must match. */
export function versionCompatible(version) {
  const major = String(version).trim().split(".")[0];
  return major !== "" && major === PROTOCOL_VERSION.split(".")[0];
}

// ---------------------------------------------------------------------------
// helpers

const CANCELLED = () => ({ code: ERROR_CODES.CANCELLED, message: "cancelled" });

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function isId(v) {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function note(text) {
  try {
    process.stderr.write(`yep-sdk: ${text}\n`);
  } catch {
    // stderr is gone too; nothing left to tell.
  }
}

class InvalidParams extends Error {}

/** The params of `method` as an object (null/absent → `{}`), or InvalidParams. */
function paramsObject(method, params) {
  if (params === null || params === undefined) return {};
  if (!isObject(params)) throw new InvalidParams(`invalid params for ${method}: expected an object`);
  return params;
}

/** One field of `p` with its wire default, type-checked. */
function field(method, p, key, type, fallback) {
  const v = p[key];
  if (v === undefined || v === null) return fallback;
  const ok =
    type === "id" ? isId(v) : type === "any" ? true : typeof v === type;
  if (!ok) throw new InvalidParams(`invalid params for ${method}: \`${key}\` must be a ${type === "id" ? "non-negative integer" : type}`);
  return v;
}

function toWireError(err) {
  if (err instanceof YepError) return err.toWire();
  if (err instanceof Error) return { code: 0, message: err.message };
  return { code: 0, message: String(err) };
}

function hookDecision(d) {
  if (d === undefined || d === null) return allow();
  if (!isObject(d)) throw new YepError("a hook handler must return a decision object or undefined");
  const out = {
    block: d.block === true,
    reason: typeof d.reason === "string" ? d.reason : "",
    user_message: typeof d.user_message === "string" ? d.user_message : null,
  };
  if (d.modified_args !== undefined) out.modified_args = d.modified_args;
  return out;
}

function commandResult(r) {
  if (r === undefined || r === null) return { success: true, message: "" };
  if (typeof r === "string") return { success: true, message: r };
  if (!isObject(r)) return { success: true, message: String(r) };
  return {
    success: r.success !== false,
    message: typeof r.message === "string" ? r.message : "",
  };
}

function configStatus(s) {
  if (s === undefined || s === null || s === "ok") return "ok";
  if (s === "restart-required") return "restart-required";
  if (isObject(s)) return configStatus(s.status);
  throw new YepError(`a config handler must return "ok" or "restart-required", got ${JSON.stringify(s)}`);
}

/** Route stray console output and stdout writes to stderr, for good. */
function guardStdout() {
  const toStderr = (...args) => console.error(...args);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  process.stdout.write = function write(chunk, encoding, cb) {
    return process.stderr.write(chunk, encoding, cb);
  };
}

// ---------------------------------------------------------------------------
// what handlers get

/** Sends server → host notifications from anywhere: handlers, onStart, timers. */
class Notifier {
  #conn;

  constructor(conn) {
    this.#conn = conn;
  }

  /** Push a status-bar string (`status/changed`). An empty text clears it. */
  status(text, level = "ok", detail) {
    const params = { status: String(text ?? ""), level };
    if (detail !== undefined && detail !== null) params.detail = String(detail);
    this.#conn.notify("status/changed", params);
  }

  /** Send a log line to the host (`log`): `error`, `warn`, `info`, `debug` or `trace`. */
  log(text, level = "info") {
    this.#conn.notify("log", { message: String(text ?? ""), level });
  }
}

/** The context a request handler runs in. */
class Context extends Notifier {
  #conn;
  #controller;

  constructor(conn, requestId, controller) {
    super(conn);
    this.#conn = conn;
    this.#controller = controller;
    /** The envelope id of the request being handled. */
    this.requestId = requestId;
  }

  /** Aborted when the host cancels this request (or the connection ends before it answers). */
  get signal() {
    return this.#controller.signal;
  }

  /** Whether the host cancelled this request. Whatever the handler returns now is dropped. */
  get cancelled() {
    return this.#controller.signal.aborted;
  }

  /** Stream one progress line (`tool/update`). Nothing is sent once the call was cancelled. */
  update(text) {
    if (this.cancelled) return;
    this.#conn.notify("tool/update", { request_id: this.requestId, output: String(text ?? "") });
  }

  /**
   * Ask the user a question (`ui/ask`). Resolves with the answer, or `null` when the user
   * dismissed it or this request was cancelled meanwhile (`askRefused` then says why, when
   * the host cancelled it without asking anyone). Rejects with a YepError when the
   * host refuses the request or the connection ends.
   */
  ask(prompt, options = {}) {
    this.askRefused = null;
    return this.#conn.ask(prompt, options, this.#controller.signal, (why) => {
      this.askRefused = why;
    });
  }
}

// ---------------------------------------------------------------------------
// typed tools: a JSON Schema (or anything with `toJSONSchema()`) checks the arguments

/** A schema as JSON: a JSON Schema object as it is; a schema library's through its
 * `toJSONSchema()` method, or the Standard JSON Schema interface (`~standard.jsonSchema`, as
 * zod 4.2+, Valibot and ArkType offer). The root's `$schema` is dropped: a manifest does not
 * need it. */
export function jsonSchemaOf(schema) {
  let doc = schema;
  const standard = doc?.["~standard"]?.jsonSchema;
  if (doc !== null && typeof doc === "object" && typeof doc.toJSONSchema === "function") doc = doc.toJSONSchema();
  else if (typeof standard?.input === "function") doc = standard.input({ target: "draft-2020-12" });
  if (!isObject(doc)) {
    throw new TypeError("a tool schema must be a JSON Schema object, or offer toJSONSchema() or ~standard.jsonSchema");
  }
  doc = JSON.parse(JSON.stringify(doc));
  delete doc.$schema;
  return doc;
}

class BadArgs extends Error {
  constructor(path, message) {
    super(message);
    this.path = path;
  }
}

const KIND = { boolean: "a boolean", integer: "an integer", number: "a number", string: "a string", null: "null", array: "an array", object: "an object" };

function kindOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function isKind(v, type) {
  const k = kindOf(v);
  return k === type || (type === "number" && k === "integer");
}

function at(path, key) {
  return typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : String(key);
}

/** The schema a local `$ref` points at: `#` (the root) or a JSON Pointer below it. */
function resolveRef(root, ref) {
  let target = ref === "#" || ref.startsWith("#/") ? root : undefined;
  for (const part of ref.length > 2 ? ref.slice(2).split("/") : []) {
    const key = decodeURIComponent(part).replaceAll("~1", "/").replaceAll("~0", "~");
    target = target !== null && typeof target === "object" && Object.hasOwn(target, key) ? target[key] : undefined;
  }
  if (target === undefined) throw new BadArgs("", `the tool's schema has a $ref the SDK cannot follow: ${ref}`);
  return target;
}

const TOO_LONG = Symbol("too long");

/** `v` as JSON with each object's keys sorted (so equal JSON values read the same), or null
 * once it would pass `limit` characters: nothing past the limit is read or written. */
function canonicalJson(v, limit) {
  const parts = [];
  let size = 0;
  const put = (text) => {
    size += text.length;
    if (size > limit) throw TOO_LONG;
    parts.push(text);
  };
  const walk = (v) => {
    if (typeof v === "string") {
      if (v.length + 2 > limit - size) throw TOO_LONG; // escaping only lengthens it
      put(JSON.stringify(v));
    } else if (v === null || typeof v !== "object") {
      put(JSON.stringify(v) ?? "null");
    } else if (Array.isArray(v)) {
      if (2 * v.length + 1 > limit - size) throw TOO_LONG; // "[" + v.length items and commas + "]"
      put("[");
      for (let i = 0; i < v.length; i++) {
        if (i > 0) put(",");
        walk(v[i]);
      }
      put("]");
    } else {
      const keys = Object.keys(v);
      if (4 * keys.length + 1 > limit - size) throw TOO_LONG; // '"":0,' at the least for each
      keys.sort();
      put("{");
      keys.forEach((key, i) => {
        put(i > 0 ? "," : "");
        walk(key);
        put(":");
        walk(v[key]);
      });
      put("}");
    }
  };
  try {
    walk(v);
    return parts.join("");
  } catch (err) {
    if (err === TOO_LONG) return null;
    throw err;
  }
}

/** At most PREVIEW characters of a value, for an error message. */
const PREVIEW = 80;

function preview(v) {
  if (typeof v === "string" && v.length > PREVIEW) {
    return `${JSON.stringify(v.slice(0, PREVIEW))}… (${v.length} characters)`;
  }
  return canonicalJson(v, PREVIEW) ?? (Array.isArray(v) ? `an array of ${v.length} items` : KIND[kindOf(v)]);
}

/**
 * The members of an `enum` (or the one `const`), indexed once per schema: a Set of the
 * primitives, compared as they are, and one of the objects' and arrays' canonical JSON, so a
 * check is one lookup, not a comparison with each member. A string longer than the longest
 * string member, or an object or array whose JSON is longer than the longest such member,
 * cannot match: it is refused before it is hashed or serialized.
 */
class Members {
  constructor(values) {
    this.primitives = new Set();
    this.composites = new Set();
    this.longestString = -1;
    this.longestComposite = -1;
    for (const m of values) {
      if (m !== null && typeof m === "object") {
        const json = canonicalJson(m, Infinity);
        this.composites.add(json);
        this.longestComposite = Math.max(this.longestComposite, json.length);
      } else {
        this.primitives.add(m);
        if (typeof m === "string") this.longestString = Math.max(this.longestString, m.length);
      }
    }
    // What an error message shows of them: the whole list when short.
    const full = JSON.stringify(values);
    if (full.length <= 4 * PREVIEW) {
      this.shown = full;
    } else {
      let shown = "[";
      for (const m of values) {
        const one = canonicalJson(m, PREVIEW) ?? "…";
        if (shown.length + one.length > 2 * PREVIEW) break;
        shown += `${one},`;
      }
      this.shown = `${shown}…] (${values.length} values)`;
    }
  }

  has(value) {
    if (value !== null && typeof value === "object") {
      if (this.composites.size === 0) return false;
      const json = canonicalJson(value, this.longestComposite);
      return json !== null && this.composites.has(json);
    }
    if (typeof value === "string" && value.length > this.longestString) return false;
    return this.primitives.has(value);
  }
}

const ENUMS = new WeakMap();
const CONSTS = new WeakMap();

/** The indexed members of `schema`'s enum (or const), made on its first check. */
function members(cache, schema, values) {
  let index = cache.get(schema);
  if (index === undefined) {
    index = new Members(values);
    cache.set(schema, index);
  }
  return index;
}

/** The length of `s` in code points (what minLength and maxLength count), found without
 * reading it when its UTF-16 length decides: n units hold between n/2 and n code points. */
function longerThan(s, n) {
  if (s.length <= n) return false;
  if (s.length > 2 * n) return true;
  let points = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff || i === 0 || (s.charCodeAt(i - 1) & 0xfc00) !== 0xd800) points++;
    if (points > n) return true;
  }
  return false;
}

/** Schemas a check may visit per call. Past this (a huge array, or a union nested deep in a
 * recursive schema, which costs arms^depth), the call is refused as too large to check:
 * never passed through unchecked. */
const CHECK_BUDGET = 10_000;

/** How deep a check may follow schemas (`$ref`s, unions and nested values alike). */
const CHECK_DEPTH = 64;

class TooComplex extends Error {}

/**
 * `value` checked against `schema`, with each missing property that has a `default` filled
 * in. Throws BadArgs naming where it fails. The keywords checked are those docs/authoring.md
 * lists (type, properties, required, additionalProperties, items, enum, const, anyOf, oneOf,
 * allOf, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength,
 * minItems, maxItems, local $ref); others (pattern, format, ...) are left to the host, whose
 * regex engine cannot be made to backtrack for minutes.
 */
function check(schema, value, path, root, budget, depth = 0) {
  if (schema === true || schema === undefined) return value;
  if (schema === false) throw new BadArgs(path, "no value is allowed here");
  if (--budget.left < 0) {
    throw new TooComplex(`the arguments are too large or complex to check within the SDK's budget of ${String(CHECK_BUDGET).replace(/\B(?=(\d{3})+$)/g, ",")} schema visits`);
  }
  if (depth > CHECK_DEPTH) throw new TooComplex(`the arguments nest too deep to check: the SDK follows schemas at most ${CHECK_DEPTH} levels deep`);
  if (typeof schema.$ref === "string") return check(resolveRef(root, schema.$ref), value, path, root, budget, depth + 1);
  const types = schema.type === undefined ? null : [].concat(schema.type);
  if (types && !types.some((t) => isKind(value, t))) {
    throw new BadArgs(path, `expected ${types.map((t) => KIND[t] ?? t).join(" or ")}, got ${KIND[kindOf(value)]}`);
  }
  if (Array.isArray(schema.enum)) {
    const allowed = members(ENUMS, schema, schema.enum);
    if (!allowed.has(value)) throw new BadArgs(path, `expected one of ${allowed.shown}, got ${preview(value)}`);
  }
  if ("const" in schema) {
    const allowed = members(CONSTS, schema, [schema.const]);
    if (!allowed.has(value)) throw new BadArgs(path, `expected ${preview(schema.const)}, got ${preview(value)}`);
  }
  // Every arm sees the value as it came; the defaults each fills in are merged after.
  const base = value;
  for (const sub of schema.allOf ?? []) {
    const filled = check(sub, base, path, root, budget, depth + 1);
    if (filled !== base && isObject(filled) && isObject(value)) value = { ...filled, ...value };
  }
  for (const [key, exactlyOne] of [["anyOf", false], ["oneOf", true]]) {
    const arms = schema[key];
    if (!Array.isArray(arms)) continue;
    const fits = [];
    for (const arm of arms) {
      try {
        fits.push(check(arm, base, path, root, budget, depth + 1));
      } catch (err) {
        if (!(err instanceof BadArgs)) throw err;
      }
      if (fits.length > (exactlyOne ? 1 : 0)) break;
    }
    if (fits.length === 0) {
      // `T or null` fails as T does: its own error says best what is wrong.
      const real = arms.filter((a) => !(isObject(a) && a.type === "null"));
      if (real.length === 1) check(real[0], base, path, root, budget, depth + 1);
      throw new BadArgs(path, `${KIND[kindOf(base)]} matches none of the allowed schemas`);
    }
    if (exactlyOne && fits.length > 1) throw new BadArgs(path, "matches more than one of the allowed schemas (oneOf)");
    if (fits[0] !== base && isObject(fits[0]) && isObject(value)) value = { ...fits[0], ...value };
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) throw new BadArgs(path, `must be at least ${schema.minimum}, got ${value}`);
    if (schema.maximum !== undefined && value > schema.maximum) throw new BadArgs(path, `must be at most ${schema.maximum}, got ${value}`);
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) throw new BadArgs(path, `must be more than ${schema.exclusiveMinimum}, got ${value}`);
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) throw new BadArgs(path, `must be less than ${schema.exclusiveMaximum}, got ${value}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && !longerThan(value, schema.minLength - 1)) throw new BadArgs(path, `must be at least ${schema.minLength} characters long`);
    if (schema.maxLength !== undefined && longerThan(value, schema.maxLength)) throw new BadArgs(path, `must be at most ${schema.maxLength} characters long`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) throw new BadArgs(path, `must have at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) throw new BadArgs(path, `must have at most ${schema.maxItems} items`);
    // Each item costs a visit: a huge array runs out of budget and is refused.
    if (isObject(schema.items) || schema.items === false) {
      let out = value;
      for (let i = 0; i < value.length; i++) {
        const item = check(schema.items, value[i], at(path, i), root, budget, depth + 1);
        if (item !== value[i]) {
          if (out === value) out = value.slice();
          out[i] = item;
        }
      }
      value = out;
    }
  }
  if (isObject(value) && (schema.properties || schema.required || schema.additionalProperties !== undefined)) {
    const props = isObject(schema.properties) ? schema.properties : {};
    // Copied only once something changes (a default filled in), and each key set as its own
    // property (a `__proto__` key stays a key).
    let out = value;
    const put = (key, v) => {
      if (out === value) {
        if (Object.hasOwn(value, key) && value[key] === v) return;
        out = { ...value };
      }
      Object.defineProperty(out, key, { value: v, writable: true, enumerable: true, configurable: true });
    };
    for (const key of schema.required ?? []) {
      const fallback = Object.hasOwn(props, key) && isObject(props[key]) && Object.hasOwn(props[key], "default");
      if (!Object.hasOwn(value, key) && !fallback) throw new BadArgs(path, `missing field \`${key}\``);
    }
    for (const [key, sub] of Object.entries(props)) {
      if (Object.hasOwn(value, key)) put(key, check(sub, value[key], at(path, key), root, budget, depth + 1));
      else if (isObject(sub) && Object.hasOwn(sub, "default")) put(key, structuredClone(sub.default));
    }
    // With patternProperties (left to the host), which other keys are allowed is not known here.
    // `true` allows any other key as it is: nothing to visit.
    const extra = schema.additionalProperties;
    if (extra !== undefined && extra !== true && schema.patternProperties === undefined) {
      for (const key of Object.keys(value)) {
        if (Object.hasOwn(props, key)) continue;
        if (extra === false) throw new BadArgs(path, `unknown field \`${key}\``);
        put(key, check(extra, value[key], at(path, key), root, budget, depth + 1));
      }
    }
    value = out;
  }
  return value;
}

/** The arguments of a call to `tool`, checked against its schema (InvalidParams if not). */
function checkArgs(tool, schema, args) {
  try {
    return check(schema, args ?? {}, "", schema, { left: CHECK_BUDGET });
  } catch (err) {
    if (!(err instanceof BadArgs) && !(err instanceof TooComplex)) throw err;
    // Too large or deep to check is refused too: unchecked arguments never reach the handler.
    const where = err.path ? `\`${err.path}\`: ` : "";
    throw new InvalidParams(`invalid arguments for \`${tool}\`: ${where}${err.message}`);
  }
}

// ---------------------------------------------------------------------------
// the server

/** A capability server. Register handlers (each call returns `this`), then `await serve()`. */
export class Server {
  #name;
  #instructions;
  #maxFrameBytes;
  #tools = new Map();
  #commands = new Map();
  #hook = null;
  #dynamicPrompt = null;
  #config = null;
  #workspace = null;
  #trace = null;
  #start = null;
  #served = false;

  constructor(name, options = {}) {
    this.#name = String(name);
    this.#instructions = options.instructions ?? null;
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  /** The name sent in the handshake. */
  get name() {
    return this.#name;
  }

  /**
   * Serve a tool: `handler(args, ctx)` returns (or resolves to) the result value.
   * `tool(name, { description, schema, outputSchema }, handler)` also says what it takes:
   * `schema` (a JSON Schema object, or anything with `toJSONSchema()`, such as a zod schema)
   * goes in the handshake, and each call's arguments are checked against it (defaults filled
   * in) before the handler runs; a bad one is answered with an error naming the field, and
   * arguments too large to check within CHECK_BUDGET schema visits are refused too.
   */
  tool(name, spec, handler) {
    name = String(name);
    if (handler === undefined) [spec, handler] = [{}, spec];
    if (typeof handler !== "function") throw new TypeError(`tool \`${name}\`: the handler must be a function`);
    const served = { name };
    if (spec.description !== undefined) served.description = String(spec.description);
    if (spec.schema !== undefined) served.schema = jsonSchemaOf(spec.schema);
    if (spec.outputSchema !== undefined) served.output_schema = jsonSchemaOf(spec.outputSchema);
    const run = served.schema === undefined ? handler : (args, ctx) => handler(checkArgs(name, served.schema, args), ctx);
    this.#tools.set(name, { run, served });
    return this;
  }

  /** Answer `hook/fire`: return a decision (`block()`, `modify()`) or undefined to allow. */
  onHook(handler) {
    this.#hook = handler;
    return this;
  }

  /** Recompute the system-prompt contribution per turn (`prompt/contribution`). */
  dynamicPrompt(handler) {
    this.#dynamicPrompt = handler;
    return this;
  }

  /** Serve a slash command: `handler(argumentsText, ctx)` returns a message or `{success, message}`. */
  command(name, handler) {
    this.#commands.set(String(name), handler);
    return this;
  }

  /** Receive config: `initialize.config` at handshake, then every `config/changed`. */
  onConfig(handler) {
    this.#config = handler;
    return this;
  }

  /** Receive `workspace/changed`: the new workspace root. */
  onWorkspace(handler) {
    this.#workspace = handler;
    return this;
  }

  /** Receive `trace/event` notifications, in arrival order. */
  onTrace(handler) {
    this.#trace = handler;
    return this;
  }

  /** Run once the handshake completes (`initialized`), e.g. to push a first status. */
  onStart(handler) {
    this.#start = handler;
    return this;
  }

  /**
   * Serve until EOF or `exit`. Without options, serves on this process's stdin/stdout and
   * points stray stdout output (console.log, process.stdout.write) at stderr. Pass
   * `{input, output}` streams to serve elsewhere (tests, sockets); no guard is installed then.
   */
  serve(options = {}) {
    if (this.#served) return Promise.reject(new Error("serve() may only be called once"));
    this.#served = true;
    const input = options.input ?? process.stdin;
    const output = options.output ?? process.stdout;
    let write;
    if (output === process.stdout) {
      write = (line) => realStdoutWrite.call(process.stdout, line);
      if (options.guardStdout !== false) guardStdout();
    } else {
      write = (line) => output.write(line);
    }
    const handlers = {
      name: this.#name,
      instructions: this.#instructions,
      tools: this.#tools,
      commands: this.#commands,
      hook: this.#hook,
      dynamicPrompt: this.#dynamicPrompt,
      config: this.#config,
      workspace: this.#workspace,
      trace: this.#trace,
      start: this.#start,
    };
    const conn = new Connection(handlers, input, output, write, this.#maxFrameBytes);
    return conn.run();
  }
}

/** One served connection: framing, dispatch, cancellation, shutdown. */
class Connection {
  constructor(handlers, input, output, write, maxFrame) {
    this.h = handlers;
    this.input = input;
    this.output = output;
    this.rawWrite = write;
    this.maxFrame = maxFrame;
    /** Requests running, by envelope id: their AbortControllers. */
    this.inflight = new Map();
    /** Our `ui/ask` requests awaiting the host, by our own id. */
    this.asks = new Map();
    this.nextId = 1;
    /** Notifications (and shutdown) run in arrival order on this chain. */
    this.ordered = Promise.resolve();
    /** Config handler calls, one at a time. */
    this.configChain = Promise.resolve();
    this.ending = false;
    this.writable = true;
    this.notifier = new Notifier(this);
    // Line assembly.
    this.parts = [];
    this.size = 0;
    this.dropping = 0;
  }

  run() {
    return new Promise((resolve) => {
      this.resolveServe = resolve;
      this.onData = (chunk) => this.feed(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
      this.onEnd = () => {
        this.flushTail();
        this.end();
      };
      this.onError = (err) => {
        note(`reading from the host failed: ${err.message}`);
        this.end();
      };
      this.onOutputError = (err) => {
        this.writable = false;
        note(`failed to write to the host: ${err.message}`);
      };
      this.output.on?.("error", this.onOutputError);
      this.input.on("data", this.onData);
      this.input.on("end", this.onEnd);
      this.input.on("close", this.onEnd);
      this.input.on("error", this.onError);
      this.input.resume?.();
    });
  }

  // -- output ---------------------------------------------------------------

  send(msg) {
    if (!this.writable) return;
    try {
      this.rawWrite(JSON.stringify(msg) + "\n");
    } catch (err) {
      this.writable = false;
      note(`failed to write to the host: ${err.message}`);
    }
  }

  notify(method, params) {
    const msg = { method };
    if (params !== undefined && params !== null) msg.params = params;
    this.send(msg);
  }

  answer(id, result) {
    this.send({ id, result: result === undefined ? null : result });
  }

  fail(id, error) {
    this.send({ id, error });
  }

  // -- input ----------------------------------------------------------------

  /** Split bytes into lines, never holding more than maxFrame bytes of one line. */
  feed(buf) {
    let start = 0;
    while (!this.ending) {
      const nl = buf.indexOf(10, start);
      const end = nl === -1 ? buf.length : nl;
      const len = end - start;
      if (this.dropping > 0) {
        this.dropping += len;
      } else if (this.size + len > this.maxFrame) {
        this.dropping = this.size + len;
        this.parts = [];
        this.size = 0;
      } else if (len > 0) {
        this.parts.push(buf.subarray(start, end));
        this.size += len;
      }
      if (nl === -1) return;
      this.lineDone();
      start = nl + 1;
    }
  }

  lineDone() {
    if (this.dropping > 0) {
      note(`skipping a ${this.dropping}-byte line over the ${this.maxFrame}-byte frame cap`);
      this.dropping = 0;
      return;
    }
    const line = Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.line(line.toString("utf8"));
  }

  /** A last line without its newline still counts. */
  flushTail() {
    if (this.ending) return;
    if (this.dropping > 0 || this.size > 0) this.lineDone();
  }

  line(text) {
    if (text.trim() === "") return;
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (err) {
      note(`skipping malformed wire line: line is not valid JSON: ${err.message}`);
      return;
    }
    if (!isObject(msg)) {
      note("skipping malformed wire line: not a JSON object");
      return;
    }
    const method = typeof msg.method === "string" ? msg.method : null;
    const id = isId(msg.id) ? msg.id : null;
    const params = msg.params ?? null;
    if (method !== null && id !== null) this.request(id, method, params);
    else if (method !== null) this.notification(method, params);
    else if (id !== null) this.response(id, msg);
    else note("skipping malformed wire line: neither a request, a notification nor a response");
  }

  // -- dispatch -------------------------------------------------------------

  response(id, msg) {
    const pending = this.asks.get(id);
    if (!pending) return;
    this.asks.delete(id);
    if (msg.error !== undefined && msg.error !== null) {
      const e = msg.error;
      const message = isObject(e) && typeof e.message === "string" ? e.message : "malformed error object on the wire";
      pending.reject(
        new YepError(message, {
          code: isObject(e) && typeof e.code === "number" ? e.code : 0,
          retryable: isObject(e) && e.retryable === true,
          data: isObject(e) ? e.data : undefined,
        }),
      );
    } else {
      pending.resolve(msg.result ?? null);
    }
  }

  notification(method, params) {
    switch (method) {
      case "initialized":
        if (this.h.start) this.order(method, () => this.h.start(this.notifier));
        break;
      case "trace/event": {
        if (!this.h.trace) break;
        if (!isObject(params)) {
          note(`ignoring ${method} with bad params`);
          break;
        }
        const event = { event_type: "", id: "", ts: "", session_id: "", ...params };
        this.order(method, () => this.h.trace(event));
        break;
      }
      case "workspace/changed": {
        if (!this.h.workspace) break;
        const root = isObject(params) && typeof params.workspace_root === "string" ? params.workspace_root : null;
        if (root === null) {
          note(`ignoring ${method} with bad params`);
          break;
        }
        this.order(method, () => this.h.workspace(root));
        break;
      }
      case "exit":
        this.end();
        break;
      default:
        // Unknown notifications are ignored (forward compatibility).
        break;
    }
  }

  /** Run `fn` after every notification handler queued before it. */
  order(what, fn) {
    this.ordered = this.ordered.then(fn).then(
      () => {},
      (err) => note(`${what} handler failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  }

  /** Serialize config handler calls. Resolves with the handler's answer (or rejects). */
  configure(config) {
    const run = this.configChain.then(() => this.h.config(config));
    this.configChain = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  request(id, method, params) {
    switch (method) {
      case "initialize":
        return this.respond(id, method, () => this.initialize(paramsObject(method, params)));
      case "cancel":
        return this.respond(id, method, () => this.cancel(paramsObject(method, params)));
      case "config/changed":
        return this.respond(id, method, async () => {
          const p = paramsObject(method, params);
          if (!this.h.config) return { status: "restart-required" };
          return { status: configStatus(await this.configure(p.config ?? null)) };
        });
      case "shutdown":
        this.order(method, () => this.answer(id, {}));
        return;
      case "tool/call":
      case "hook/fire":
      case "prompt/contribution":
      case "command/execute": {
        const controller = new AbortController();
        this.inflight.set(id, controller);
        const ctx = new Context(this, id, controller);
        // Start after the rest of this chunk: a cancel right behind the call means it never runs.
        Promise.resolve()
          .then(() => {
            if (this.inflight.get(id) !== controller) return undefined;
            return this.work(method, params, ctx);
          })
          .then(
            (result) => {
              if (this.inflight.get(id) !== controller) return;
              this.inflight.delete(id);
              this.answer(id, result);
            },
            (err) => {
              if (this.inflight.get(id) !== controller) return;
              this.inflight.delete(id);
              this.fail(id, err instanceof InvalidParams ? { code: ERROR_CODES.INVALID_PARAMS, message: err.message } : toWireError(err));
            },
          );
        return;
      }
      default:
        this.fail(id, {
          code: ERROR_CODES.METHOD_NOT_FOUND,
          message: `method not supported by this host: ${method}`,
        });
    }
  }

  /** Answer a request handled outside the in-flight table. */
  respond(id, method, fn) {
    let result;
    try {
      result = fn();
    } catch (err) {
      result = Promise.reject(err);
    }
    Promise.resolve(result).then(
      (value) => this.answer(id, value),
      (err) =>
        this.fail(
          id,
          err instanceof InvalidParams ? { code: ERROR_CODES.INVALID_PARAMS, message: err.message } : toWireError(err),
        ),
    );
  }

  async work(method, params, ctx) {
    switch (method) {
      case "tool/call": {
        const p = paramsObject(method, params);
        const name = field(method, p, "name", "string", "");
        const tool = this.h.tools.get(name);
        if (!tool) throw new YepError(`no such tool: ${name}`);
        const result = await tool.run(p.args ?? null, ctx);
        return result === undefined ? null : result;
      }
      case "hook/fire": {
        const p = paramsObject(method, params);
        const fire = {
          event: field(method, p, "event", "string", ""),
          tool_name: field(method, p, "tool_name", "string", ""),
          args: p.args ?? null,
        };
        if (p.result !== undefined) fire.result = p.result;
        return hookDecision(this.h.hook ? await this.h.hook(fire) : undefined);
      }
      case "prompt/contribution": {
        const text = this.h.dynamicPrompt ? await this.h.dynamicPrompt() : "";
        return { text: text === undefined || text === null ? "" : String(text) };
      }
      case "command/execute": {
        const p = paramsObject(method, params);
        const name = field(method, p, "name", "string", "");
        const args = field(method, p, "arguments", "string", "");
        const command = this.h.commands.get(name);
        if (!command) throw new YepError(`no such command: ${name}`);
        return commandResult(await command(args, ctx));
      }
      default:
        throw new YepError(`method not supported by this host: ${method}`, { code: ERROR_CODES.METHOD_NOT_FOUND });
    }
  }

  async initialize(p) {
    const version = field("initialize", p, "protocol_version", "string", "");
    if (version.trim() !== "" && !versionCompatible(version)) {
      throw new YepError(`host speaks YEP ${version}, incompatible with this server (${PROTOCOL_VERSION})`, {
        code: ERROR_CODES.INCOMPATIBLE_VERSION,
      });
    }
    if (this.h.config) {
      try {
        await this.configure(p.config ?? null); // The answer does not matter at handshake.
      } catch (err) {
        note(`config handler failed at handshake: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const h = this.h;
    const capabilities = ["tools", "streaming", "cancel"];
    if (h.instructions !== null) capabilities.push("prompt");
    if (h.dynamicPrompt) capabilities.push("dynamic_prompt");
    if (h.hook) capabilities.push("hooks");
    if (h.commands.size > 0) capabilities.push("commands");
    if (h.trace) capabilities.push("trace");
    const capability_params = { tools: [...h.tools.values()].map((t) => t.served) };
    if (h.instructions !== null) capability_params.prompt = { static: String(h.instructions) };
    return { protocol_version: PROTOCOL_VERSION, name: h.name, capabilities, capability_params };
  }

  cancel(p) {
    const target = field("cancel", p, "id", "id", 0);
    const controller = this.inflight.get(target);
    if (!controller) return { cancelled: false };
    this.inflight.delete(target);
    // The cancelled call resolves now, not when its handler notices.
    this.fail(target, CANCELLED());
    controller.abort();
    return { cancelled: true };
  }

  // -- reverse requests -----------------------------------------------------

  ask(prompt, options, signal, refused = () => {}) {
    const params = { prompt: String(prompt ?? "") };
    if (options.placeholder !== undefined && options.placeholder !== null) params.placeholder = String(options.placeholder);
    if (options.secret) params.secret = true;
    if (Array.isArray(options.options) && options.options.length > 0) params.options = options.options.map(String);
    if (signal?.aborted) return Promise.resolve(null);
    if (this.ending) return Promise.reject(new YepError("the host closed the connection"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.asks.delete(id);
        resolve(null);
      };
      const settle = (fn) => (value) => {
        signal?.removeEventListener("abort", onAbort);
        fn(value);
      };
      this.asks.set(id, {
        resolve: settle((result) => {
          if (!isObject(result) || result.cancelled === true) {
            if (isObject(result) && typeof result.reason === "string") refused(result.reason);
            return resolve(null);
          }
          resolve(typeof result.answer === "string" ? result.answer : "");
        }),
        reject: settle(reject),
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.send({ id, method: "ui/ask", params });
    });
  }

  // -- the end --------------------------------------------------------------

  /**
   * No more input. Questions to the host can no longer be answered; running requests get
   * EOF_GRACE_MS to answer, the rest are answered cancelled (exactly one answer each);
   * notification handlers finish what already arrived; then serve() resolves.
   */
  async end() {
    if (this.ending) return;
    this.ending = true;
    this.input.off?.("data", this.onData);
    this.input.off?.("end", this.onEnd);
    this.input.off?.("close", this.onEnd);
    this.input.off?.("error", this.onError);
    if (this.input === process.stdin) {
      // Let the process exit even when the host sent `exit` without closing our stdin.
      this.input.pause();
      this.input.destroy();
    }
    const asks = [...this.asks.values()];
    this.asks.clear();
    for (const pending of asks) pending.reject(new YepError("the host closed the connection"));
    if (this.inflight.size > 0) {
      await new Promise((resolve) => {
        const deadline = Date.now() + EOF_GRACE_MS;
        const poll = () => {
          if (this.inflight.size === 0 || Date.now() >= deadline) resolve();
          else setTimeout(poll, 5);
        };
        poll();
      });
    }
    const rest = [...this.inflight];
    this.inflight.clear();
    for (const [id, controller] of rest) {
      this.fail(id, CANCELLED());
      controller.abort();
    }
    await this.ordered;
    this.output.off?.("error", this.onOutputError);
    // Keep swallowing a late EPIPE so it cannot crash the process.
    this.output.on?.("error", () => {});
    this.resolveServe();
  }
}
