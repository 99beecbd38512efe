"""Tests for the Python YEP SDK: drift guards against meta.json, and behaviour over real pipes.

Run from the repo root: python3 -m unittest discover -s sdk/python/tests -v
"""

import json
import queue
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SDK_DIR = HERE.parent
REPO_ROOT = HERE.parents[2]
META = REPO_ROOT / "schema" / "yep" / "v1" / "meta.json"
ECHO = SDK_DIR / "examples" / "echo_server.py"
FIXTURE = HERE / "fixture_server.py"

sys.path.insert(0, str(SDK_DIR))

import yep_sdk  # noqa: E402

TIMEOUT = 10.0


def load_meta():
    with open(META, encoding="utf-8") as f:
        return json.load(f)


class DriftTest(unittest.TestCase):
    """The SDK's protocol constants must match schema/yep/v1/meta.json."""

    def setUp(self):
        self.meta = load_meta()

    def test_host_methods_cover_meta(self):
        host = {m["name"] for m in self.meta["methods"] if m["direction"] == "host"}
        self.assertTrue(host <= set(yep_sdk.HOST_METHODS),
                        "unhandled host methods: %s" % (host - set(yep_sdk.HOST_METHODS)))
        self.assertEqual(set(yep_sdk.HOST_METHODS) - host, set(), "methods meta.json lacks")

    def test_server_methods_exist_in_meta(self):
        server = {m["name"] for m in self.meta["methods"] if m["direction"] == "server"}
        self.assertTrue(set(yep_sdk.SERVER_METHODS) <= server)

    def test_capabilities_subset_of_meta(self):
        allowed = set(self.meta["capabilities"])
        self.assertTrue(set(yep_sdk.CAPABILITIES) <= allowed,
                        "unknown tokens: %s" % (set(yep_sdk.CAPABILITIES) - allowed))
        # A server with every handler advertises only tokens from CAPABILITIES.
        s = yep_sdk.Server("all", instructions="x")
        s.tool("t")(lambda a, c: None)
        s.command("c")(lambda a, c: "")
        s.hook(lambda p: None)
        s.dynamic_prompt(lambda: "")
        s.on_trace(lambda e: None)
        s.on_config(lambda c: "ok")
        s.on_workspace(lambda r: None)
        s.on_start(lambda c: None)
        self.assertEqual(set(s.capabilities()), set(yep_sdk.CAPABILITIES))

    def test_protocol_version_matches_meta(self):
        self.assertEqual(yep_sdk.PROTOCOL_VERSION, self.meta["version"])


class Peer:
    """A host stand-in: runs a server script and talks to it over pipes."""

    def __init__(self, script):
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.raw = []
        self.err = []
        self.lines = queue.Queue()
        self.next_id = 1000
        self.out_thread = threading.Thread(target=self._pump_out, daemon=True)
        self.err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self.out_thread.start()
        self.err_thread.start()

    def _pump_out(self):
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self):
        for line in self.proc.stderr:
            self.err.append(line.decode("utf-8", "replace"))

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, method, params=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.next_id

    def notify(self, method, params=None):
        msg = {"method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def recv(self, timeout=TIMEOUT):
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError("server closed stdout")
        return json.loads(line)

    def until(self, pred, timeout=TIMEOUT):
        """Read until pred(msg); return (msg, messages seen before it)."""
        before = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.01, deadline - time.monotonic()))
            if pred(msg):
                return msg, before
            before.append(msg)

    def response(self, id, timeout=TIMEOUT):
        return self.until(lambda m: m.get("id") == id and "method" not in m, timeout)

    def call(self, method, params=None):
        msg, _ = self.response(self.request(method, params))
        return msg

    def handshake(self, version="1.0", config=None):
        params = {"protocol_version": version, "workspace_root": "/tmp", "session_id": "s"}
        if config is not None:
            params["config"] = config
        init = self.call("initialize", params)
        self.notify("initialized")
        return init

    def close(self, timeout=TIMEOUT):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        code = self.proc.wait(timeout)
        self.out_thread.join(timeout)
        self.err_thread.join(timeout)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


class PeerTest(unittest.TestCase):
    script = FIXTURE

    def setUp(self):
        self.peer = Peer(self.script)
        self.addCleanup(self.peer.kill)

    def assertOnlyJsonOnStdout(self):
        for line in self.peer.raw:
            msg = json.loads(line)
            self.assertIsInstance(msg, dict)
            self.assertNotIn("jsonrpc", msg)


class EchoExampleTest(PeerTest):
    script = ECHO

    def test_handshake_fields(self):
        init = self.peer.handshake()
        result = init["result"]
        self.assertEqual(result["protocol_version"], "1.0")
        self.assertEqual(result["name"], "echo")
        self.assertEqual(result["capabilities"], [
            "tools", "streaming", "cancel", "prompt", "dynamic_prompt", "hooks", "commands"])
        params = result["capability_params"]
        self.assertEqual(params["tools"], [{"name": "ask"}, {"name": "count"}, {"name": "echo"}])
        self.assertEqual(params["prompt"]["static"],
                         "Use the echo tool to repeat text back; count streams progress.")
        self.assertTrue(set(result["capabilities"]) <= set(load_meta()["capabilities"]))

    def test_status_pushed_at_start(self):
        self.peer.handshake()
        msg, _ = self.peer.until(lambda m: m.get("method") == "status/changed")
        self.assertEqual(msg["params"], {"status": "echo ready", "level": "ok"})

    def test_echo_and_updates_precede_result(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("tool/call", {"name": "echo", "args": {"text": "hi"}})
                         ["result"], {"echoed": "hi"})
        id = self.peer.request("tool/call", {"name": "count",
                                             "args": {"n": 3, "interval_ms": 10}})
        msg, before = self.peer.response(id)
        self.assertEqual(msg["result"], {"counted": 3})
        updates = [m["params"] for m in before if m.get("method") == "tool/update"]
        self.assertEqual(updates, [{"request_id": id, "output": "%d/3" % i} for i in (1, 2, 3)])
        # Nothing for this call after its answer.
        self.peer.call("tool/call", {"name": "echo", "args": {"text": "x"}})

    def test_hook_blocks_forbidden(self):
        self.peer.handshake()
        blocked = self.peer.call("hook/fire", {"event": "pre_tool_use", "tool_name": "bash",
                                               "args": {"forbidden": True}})["result"]
        self.assertTrue(blocked["block"])
        self.assertIn("forbidden", blocked["reason"])
        allowed = self.peer.call("hook/fire", {"event": "pre_tool_use", "tool_name": "bash",
                                               "args": {"cmd": "ls"}})["result"]
        self.assertFalse(allowed.get("block", False))

    def test_prompt_and_command(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("prompt/contribution")["result"],
                         {"text": "echo dynamic prompt, turn 1"})
        self.assertEqual(self.peer.call("prompt/contribution")["result"]["text"],
                         "echo dynamic prompt, turn 2")
        self.assertEqual(self.peer.call("command/execute", {"name": "ping", "arguments": ""})
                         ["result"], {"success": True, "message": "pong"})
        err = self.peer.call("command/execute", {"name": "nope"})["error"]
        self.assertEqual(err["message"], "no such command: nope")

    def test_ask_round_trip(self):
        self.peer.handshake()
        id = self.peer.request("tool/call", {"name": "ask", "args": {"prompt": "Name?"}})
        ask, _ = self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.assertIsInstance(ask["id"], int)
        self.assertEqual(ask["params"], {"prompt": "Name?"})
        self.peer.send({"id": ask["id"], "result": {"answer": "Ada", "cancelled": False}})
        msg, _ = self.peer.response(id)
        self.assertEqual(msg["result"], {"answer": "Ada"})
        # Cancelled by the host without asking anyone: the handler is told why.
        id = self.peer.request("tool/call", {"name": "ask", "args": {"prompt": "Name?"}})
        ask, _ = self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.peer.send({"id": ask["id"], "result": {"answer": "", "cancelled": True,
                                                    "reason": "no UI here"}})
        msg, _ = self.peer.response(id)
        self.assertEqual(msg["error"]["message"], "no UI here")

    def test_config_changed_without_handler_restarts(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("config/changed", {"config": {"a": 1}})["result"],
                         {"status": "restart-required"})

    def test_eof_exits_zero(self):
        self.peer.handshake()
        self.assertEqual(self.peer.close(), 0)
        self.assertOnlyJsonOnStdout()


class FixtureTest(PeerTest):
    def test_handshake_without_instructions(self):
        result = self.peer.handshake(config={"k": "v"})["result"]
        self.assertEqual(result["capabilities"],
                         ["tools", "streaming", "cancel", "hooks", "trace"])
        self.assertNotIn("prompt", result["capability_params"])
        self.assertEqual(self.peer.call("tool/call", {"name": "configs"})["result"],
                         {"configs": [{"k": "v"}]})

    def test_incompatible_major_refused(self):
        err = self.peer.call("initialize", {"protocol_version": "2.0"})["error"]
        self.assertEqual(err, {"code": -32001, "message":
                               "host speaks YEP 2.0, incompatible with this server (1.0)"})
        self.assertEqual(self.peer.call("initialize", {"protocol_version": "1.7"})
                         ["result"]["protocol_version"], "1.0")
        self.assertIn("result", self.peer.call("initialize", {}))

    def test_stream_updates_precede_result(self):
        self.peer.handshake()
        id = self.peer.request("tool/call", {"name": "stream", "args": {"n": 50}})
        msg, before = self.peer.response(id)
        outputs = [m["params"]["output"] for m in before
                   if m.get("method") == "tool/update" and m["params"]["request_id"] == id]
        self.assertEqual(outputs, ["line %d" % i for i in range(50)])
        self.assertEqual(msg["result"], {"lines": 50})

    def test_concurrent_calls_rendezvous(self):
        self.peer.handshake()
        start = time.monotonic()
        ids = [self.peer.request("tool/call", {"name": "rendezvous"}) for _ in range(8)]
        results = {}
        while len(results) < 8:
            msg = self.peer.recv()
            if msg.get("id") in ids and "method" not in msg:
                results[msg["id"]] = msg
        for msg in results.values():
            self.assertEqual(msg.get("result"), {"met": True}, msg)
        self.assertLess(time.monotonic() - start, 4.0)

    def test_concurrent_slow_calls_overlap(self):
        self.peer.handshake()
        one = time.monotonic()
        self.peer.call("tool/call", {"name": "slow", "args": {"seconds": 0.3}})
        single = time.monotonic() - one
        start = time.monotonic()
        ids = {self.peer.request("tool/call", {"name": "slow", "args": {"seconds": 0.3}})
               for _ in range(8)}
        while ids:
            msg = self.peer.recv()
            ids.discard(msg.get("id") if "method" not in msg else None)
        self.assertLess(time.monotonic() - start, 3 * single)

    def test_cancel_mid_call(self):
        self.peer.handshake()
        call = self.peer.request("tool/call", {"name": "slow", "args": {"seconds": 5}})
        time.sleep(0.1)
        cancel = self.peer.request("cancel", {"id": call})
        answers = {}
        while len(answers) < 2:
            msg = self.peer.recv()
            if msg.get("id") in (call, cancel) and "method" not in msg:
                answers[msg["id"]] = msg
        self.assertEqual(answers[cancel]["result"], {"cancelled": True})
        self.assertEqual(answers[call]["error"], {"code": -32800, "message": "cancelled"})
        # Cancelling again: nothing in flight.
        self.assertEqual(self.peer.call("cancel", {"id": call})["result"], {"cancelled": False})
        # Exactly one answer for the call: the handler's late result is dropped.
        self.assertEqual(self.peer.close(), 0)
        answers_for_call = [json.loads(l) for l in self.peer.raw]
        answers_for_call = [m for m in answers_for_call
                            if m.get("id") == call and "method" not in m]
        self.assertEqual(len(answers_for_call), 1)

    def test_cancel_unknown_id(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("cancel", {"id": 424242})["result"],
                         {"cancelled": False})

    def test_ask_with_options_and_dismissal(self):
        self.peer.handshake()
        id = self.peer.request("tool/call", {"name": "ask", "args": {
            "prompt": "Pick", "secret": True, "options": ["a", "b"]}})
        ask, _ = self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.assertEqual(ask["params"], {"prompt": "Pick", "secret": True, "options": ["a", "b"]})
        self.peer.send({"id": ask["id"], "result": {"answer": "", "cancelled": True}})
        self.assertEqual(self.peer.response(id)[0]["result"], {"answer": None})
        # A second question gets a fresh id.
        id2 = self.peer.request("tool/call", {"name": "ask", "args": {"prompt": "Again"}})
        ask2, _ = self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.assertNotEqual(ask2["id"], ask["id"])
        self.peer.send({"id": ask2["id"], "result": {"answer": "b"}})
        self.assertEqual(self.peer.response(id2)[0]["result"], {"answer": "b"})

    def test_ask_refused_by_host(self):
        self.peer.handshake()
        id = self.peer.request("tool/call", {"name": "ask", "args": {"prompt": "?"}})
        ask, _ = self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.peer.send({"id": ask["id"], "error": {"code": -32601, "message": "no prompt"}})
        err = self.peer.response(id)[0]["error"]
        self.assertEqual(err["message"], "no prompt")
        self.assertEqual(err["code"], -32601)

    def test_cancel_while_asking(self):
        self.peer.handshake()
        id = self.peer.request("tool/call", {"name": "ask", "args": {"prompt": "?"}})
        self.peer.until(lambda m: m.get("method") == "ui/ask")
        self.assertEqual(self.peer.call("cancel", {"id": id})["result"], {"cancelled": True})

    def test_stray_print_stays_off_the_wire(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("tool/call", {"name": "noisy"})["result"], {"ok": True})
        self.assertEqual(self.peer.close(), 0)
        self.assertOnlyJsonOnStdout()
        stderr = "".join(self.peer.err)
        self.assertIn("STRAY print from a handler", stderr)
        self.assertIn("STRAY raw fd-1 write", stderr)
        self.assertIn("STRAY child process", stderr)

    def test_unknown_method(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("frobnicate", {"x": 1})["error"],
                         {"code": -32601, "message": "method not supported by this host: frobnicate"})

    def test_bad_lines_are_skipped(self):
        self.peer.handshake()
        self.peer.send_raw(b"this is not json\n\n[1,2]\n{\"neither\":true}\n")
        self.peer.notify("no/such/notification", {"a": 1})
        self.peer.send_raw(b"x" * (4 * 1024 * 1024 + 10) + b"\n")
        self.peer.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"tool/call","params":'
                           b'{"name":"stream","args":{"n":1}}}\r\n')
        msg, _ = self.peer.response(7)
        self.assertEqual(msg["result"], {"lines": 1})
        # A string id counts as absent: that line is a notification, silently ignored.
        self.peer.send_raw(b'{"id":"8","method":"tool/call"}\n')
        self.assertEqual(self.peer.call("cancel", {"id": 1})["result"], {"cancelled": False})
        self.assertEqual(self.peer.close(), 0)
        stderr = "".join(self.peer.err)
        self.assertIn("malformed", stderr)
        self.assertIn("frame cap", stderr)
        self.assertOnlyJsonOnStdout()

    def test_invalid_params(self):
        self.peer.handshake()
        err = self.peer.call("tool/call", [1, 2])["error"]
        self.assertEqual(err["code"], -32602)

    def test_errors(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("tool/call", {"name": "fail"})["error"],
                         {"code": 0, "message": "plain failure"})
        self.assertEqual(self.peer.call("tool/call", {"name": "fail", "args": {"typed": True}})
                         ["error"], {"code": 7, "message": "typed failure", "retryable": True})
        self.assertEqual(self.peer.call("tool/call", {"name": "unserializable"})
                         ["error"]["code"], -32603)
        self.assertEqual(self.peer.call("tool/call", {"name": "missing"})["error"]["message"],
                         "no such tool: missing")

    def test_a_failing_config_handler_is_logged_with_its_traceback(self):
        self.peer.handshake()
        result = self.peer.call("config/changed", {"config": {"raise": True}})["result"]
        self.assertEqual(result, {"status": "restart-required"})
        self.assertEqual(self.peer.close(), 0)
        stderr = "".join(self.peer.err)
        self.assertIn("on_config failed:\nTraceback (most recent call last)", stderr)
        self.assertIn("RuntimeError: config handler broke", stderr)

    def test_hook_modify_and_default_prompt(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("hook/fire", {"event": "pre_tool_use", "tool_name": "x",
                                                      "args": {"rewrite": True}})["result"],
                         {"modified_args": {"rewritten": True}})
        self.assertEqual(self.peer.call("hook/fire", {"event": "post_tool_use", "tool_name": "x",
                                                      "args": {}, "result": {"ok": 1}})["result"],
                         {"block": False})
        self.assertEqual(self.peer.call("prompt/contribution")["result"], {"text": ""})

    def test_config_changed(self):
        self.peer.handshake()
        self.assertEqual(self.peer.call("config/changed", {"config": {"a": 1}})["result"],
                         {"status": "ok"})
        self.assertEqual(self.peer.call("config/changed", {"config": {"restart": True}})
                         ["result"], {"status": "restart-required"})

    def test_shutdown_after_trace_events(self):
        self.peer.handshake()
        for i in range(5):
            self.peer.notify("trace/event", {"id": "ev%d" % i, "event_type": "turn.started"})
        self.peer.notify("workspace/changed", {"workspace_root": "/new/root"})
        shutdown = self.peer.request("shutdown")
        msg, before = self.peer.response(shutdown)
        self.assertEqual(msg["result"], {})
        logs = [m["params"]["message"] for m in before if m.get("method") == "log"]
        self.assertEqual(logs, ["started"] + ["trace ev%d" % i for i in range(5)]
                         + ["workspace /new/root"])
        self.peer.notify("exit")
        self.assertEqual(self.peer.proc.wait(TIMEOUT), 0)

    def test_eof_exits_zero(self):
        self.peer.handshake()
        self.assertEqual(self.peer.close(), 0)

    def test_eof_grace(self):
        self.peer.handshake()
        quick = self.peer.request("tool/call", {"name": "slow",
                                                "args": {"seconds": 0.3, "ignore_cancel": True}})
        stuck = self.peer.request("tool/call", {"name": "slow",
                                                "args": {"seconds": 30, "ignore_cancel": True}})
        time.sleep(0.05)
        start = time.monotonic()
        self.assertEqual(self.peer.close(), 0)
        self.assertLess(time.monotonic() - start, 5.0)
        answers = {}
        for line in self.peer.raw:
            msg = json.loads(line)
            if "method" not in msg:
                answers.setdefault(msg["id"], []).append(msg)
        self.assertEqual(answers[quick], [{"id": quick, "result": {"slept": 0.3}}])
        self.assertEqual(answers[stuck], [{"id": stuck, "error":
                                           {"code": -32800, "message": "cancelled"}}])


if __name__ == "__main__":
    unittest.main()
