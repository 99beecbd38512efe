// Types for @yep/sdk (./yep-sdk.js): a YEP 1.0 capability server SDK for Node >= 18.

/** A JSON value as it travels on the wire. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The protocol version this SDK speaks. */
export declare const PROTOCOL_VERSION: "1.0";

/** A host → server method this SDK handles. */
export type HostMethod =
  | "initialize"
  | "initialized"
  | "tool/call"
  | "hook/fire"
  | "prompt/contribution"
  | "command/execute"
  | "config/changed"
  | "trace/event"
  | "shutdown"
  | "cancel"
  | "workspace/changed"
  | "exit";

/** Every host → server method this SDK handles (requests and notifications). */
export declare const HOST_METHODS: readonly HostMethod[];

/** A capability token this SDK may advertise. */
export type Capability =
  | "tools"
  | "streaming"
  | "cancel"
  | "prompt"
  | "dynamic_prompt"
  | "hooks"
  | "commands"
  | "trace";

/** Every capability token this SDK may advertise in its `initialize` answer. */
export declare const CAPABILITIES: readonly Capability[];

/** Error codes on the wire (JSON-RPC numbering). */
export declare const ERROR_CODES: Readonly<{
  UNCLASSIFIED: 0;
  METHOD_NOT_FOUND: -32601;
  INVALID_PARAMS: -32602;
  INTERNAL_ERROR: -32603;
  CANCELLED: -32800;
  INCOMPATIBLE_VERSION: -32001;
}>;

/** The default cap on one incoming line (4 MiB). Longer lines are skipped. */
export declare const DEFAULT_MAX_FRAME_BYTES: number;

/** The wire error object. */
export interface WireError {
  code: number;
  message: string;
  retryable?: boolean;
  data?: Json;
}

/**
 * An error with wire fields. Throw one from a handler to choose `code`, `retryable` and
 * `data`; any other thrown value answers `{code: 0, message}`. A host's error answer to
 * `ctx.ask` rejects with one.
 */
export declare class YepError extends Error {
  constructor(message: string, options?: { code?: number; retryable?: boolean; data?: Json });
  code: number;
  retryable: boolean;
  data?: Json;
  toWire(): WireError;
}

/** `hook/fire` params. */
export interface HookFireParams {
  /** `pre_tool_use` or `post_tool_use`. */
  event: string;
  tool_name: string;
  args: Json;
  /** The tool's result (post_tool_use only): its value, or `{"error": message}`. */
  result?: Json;
}

/** A hook's answer. Returning `undefined` allows the call unchanged. */
export interface HookDecision {
  /** `true` blocks the tool call (pre_tool_use only). */
  block?: boolean;
  /** Shown to the model and the audit log when blocking. */
  reason?: string;
  /** Optional user-facing message when blocking. */
  user_message?: string | null;
  /** Replacement arguments for the tool call (pre_tool_use only). */
  modified_args?: Json;
}

/** Allow the tool call unchanged (the same as returning `undefined`). */
export declare function allow(): HookDecision;
/** Block the tool call, with a reason for the model and an optional message for the user. */
export declare function block(reason: string, userMessage?: string): HookDecision;
/** Allow the tool call with replacement arguments (pre_tool_use only). */
export declare function modify(args: Json): HookDecision;

/** Whether a peer speaking `version` (`MAJOR.MINOR`) can talk to us: the majors match. */
export declare function versionCompatible(version: string): boolean;

/** `status/changed` severity. */
export type StatusLevel = "ok" | "warn" | "error";
/** `log` levels. */
export type LogLevel = "error" | "warn" | "info" | "debug" | "trace";

/** Sends server → host notifications: from handlers, `onStart`, timers. */
export interface Notifier {
  /** Push a status-bar string (`status/changed`). An empty text clears it. */
  status(text: string, level?: StatusLevel, detail?: string): void;
  /** Send a log line to the host (`log`). */
  log(text: string, level?: LogLevel): void;
}

/** Options of `ctx.ask`. */
export interface AskOptions {
  /** Mask the typed input (credentials). */
  secret?: boolean;
  /** Offer a selector over these options instead of free text. */
  options?: string[];
  /** A hint shown in the empty input field. */
  placeholder?: string;
}

/** The context a request handler runs in. */
export interface Context extends Notifier {
  /** The envelope id of the request being handled. */
  readonly requestId: number;
  /** Aborted when the host cancels this request (or the connection ends before it answers). */
  readonly signal: AbortSignal;
  /** Whether the host cancelled this request; whatever the handler returns now is dropped. */
  readonly cancelled: boolean;
  /** Stream one progress line (`tool/update`). Nothing is sent once cancelled. */
  update(text: string): void;
  /**
   * Ask the user (`ui/ask`). Resolves with the answer, or `null` when the user dismissed the
   * question or this request was cancelled. Rejects with a YepError when the host refuses.
   */
  ask(prompt: string, options?: AskOptions): Promise<string | null>;
  /**
   * Why the host cancelled the last `ask` without asking anyone (no UI takes questions, a
   * secret it will not relay), or `null`.
   */
  askRefused: string | null;
}

/** One agentic-lifecycle event (`trace/event`), carried verbatim. */
export interface TraceEvent {
  event_type: string;
  id: string;
  ts: string;
  session_id: string;
  context?: Json;
  data?: Json;
  metadata?: Json;
  [key: string]: Json | undefined;
}

/** What a command handler returns: a message (success), or the full result. */
export type CommandResult = string | { success?: boolean; message?: string } | undefined | void;

/** How a server takes a config change. `undefined` means `ok`. */
export type ConfigStatus = "ok" | "restart-required";

type Awaitable<T> = T | Promise<T>;

export type ToolHandler = (args: any, ctx: Context) => Awaitable<unknown>;
export type HookHandler = (params: HookFireParams) => Awaitable<HookDecision | undefined | void>;
export type PromptHandler = () => Awaitable<string>;
export type CommandHandler = (argumentsText: string, ctx: Context) => Awaitable<CommandResult>;
export type ConfigHandler = (config: any) => Awaitable<ConfigStatus | undefined | void>;
export type WorkspaceHandler = (workspaceRoot: string) => Awaitable<void>;
export type TraceHandler = (event: TraceEvent) => Awaitable<void>;
export type StartHandler = (notifier: Notifier) => Awaitable<void>;

export interface ServerOptions {
  /** Static system-prompt text, sent in the handshake (advertises `prompt`). */
  instructions?: string;
  /** The longest incoming line accepted, in bytes (default 4 MiB). */
  maxFrameBytes?: number;
}

/** Minimal stream shapes `serve` needs. */
export interface InputStream {
  on(event: "data", listener: (chunk: Uint8Array | string) => void): unknown;
  on(event: "end" | "close", listener: () => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  off?(event: string, listener: (...args: any[]) => void): unknown;
  resume?(): unknown;
}
export interface OutputStream {
  write(line: string): unknown;
  on?(event: "error", listener: (err: Error) => void): unknown;
  off?(event: string, listener: (...args: any[]) => void): unknown;
}

export interface ServeOptions {
  /** Read from this stream instead of process.stdin. */
  input?: InputStream;
  /** Write to this stream instead of process.stdout (no stdout guard is installed then). */
  output?: OutputStream;
  /** Serving on process.stdout, route stray stdout output to stderr (default true). */
  guardStdout?: boolean;
}

/** A JSON Schema object, as the SDK checks it (see `check` in yep-sdk.js for the keywords). */
export type JsonSchema = { [keyword: string]: Json };

/** A schema that can produce JSON Schema (duck-typed): a `toJSONSchema()` method, or the
 * Standard JSON Schema interface (zod 4.2+, Valibot, ArkType). For older zod, pass
 * `z.toJSONSchema(schema)`. */
export type ToJsonSchema =
  | { toJSONSchema(): JsonSchema }
  | { "~standard": { jsonSchema: { input(options: { target: string }): JsonSchema } } };

/** What a tool takes and gives, for `Server.tool(name, spec, handler)`. */
export interface ToolSpec {
  /** What the tool does, for the model. */
  description?: string;
  /** The arguments' schema; each call is checked against it. */
  schema?: JsonSchema | ToJsonSchema;
  /** The result's schema, declared (not checked). */
  outputSchema?: JsonSchema | ToJsonSchema;
}

/** A schema as JSON: a JSON Schema object as given, or the output of its `toJSONSchema()`. */
export declare function jsonSchemaOf(schema: JsonSchema | ToJsonSchema): JsonSchema;

/** A capability server. Register handlers (each returns `this`), then `await serve()`. */
export declare class Server {
  constructor(name: string, options?: ServerOptions);
  /** The name sent in the handshake. */
  readonly name: string;
  /** Serve a tool; a thrown error answers `{code: 0, message}` (or a YepError's fields). */
  tool(name: string, handler: ToolHandler): this;
  /**
   * Serve a tool that says what it takes: `schema` goes in the handshake (where `yep manifest
   * sync` copies it into plugin.json), and each call's arguments are checked against it, with
   * defaults filled in, before the handler runs. A bad argument is answered with an
   * invalid-params error naming the field. Each check visits at most 10,000 schemas and
   * follows them at most 64 levels deep: arguments too large or nested for that (a
   * 10,002-item array, say) are refused with the same error, naming the budget, never
   * passed to the handler unchecked.
   */
  tool(name: string, spec: ToolSpec, handler: ToolHandler): this;
  /** Answer `hook/fire` (advertises `hooks`). */
  onHook(handler: HookHandler): this;
  /** Recompute the system-prompt contribution per turn (advertises `dynamic_prompt`). */
  dynamicPrompt(handler: PromptHandler): this;
  /** Serve a slash command (advertises `commands`). */
  command(name: string, handler: CommandHandler): this;
  /** Receive `initialize.config` at handshake (answer ignored), then every `config/changed`. */
  onConfig(handler: ConfigHandler): this;
  /** Receive `workspace/changed`, in notification order. */
  onWorkspace(handler: WorkspaceHandler): this;
  /** Receive `trace/event`, in notification order (advertises `trace`). */
  onTrace(handler: TraceHandler): this;
  /** Run once the handshake completes (`initialized`). */
  onStart(handler: StartHandler): this;
  /**
   * Serve until EOF or `exit`; resolves once every request has its answer (running ones get
   * 1 s, then are answered cancelled and their `ctx.signal` aborted). The process then exits
   * when nothing else keeps it alive; a handler that ignores its signal may need
   * `process.exit()` after `await serve()`.
   */
  serve(options?: ServeOptions): Promise<void>;
}
