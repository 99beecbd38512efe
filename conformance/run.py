#!/usr/bin/env python3
"""Replay conformance transcripts (the format is conformance/README.md). Python 3 stdlib only.

  run.py server TRANSCRIPT|DIR... [options] -- COMMAND [ARG...]
      Play the host: spawn COMMAND once per transcript and replay it over the child's stdio.
  run.py host TRANSCRIPT [--report FILE] [options]
      Play the server: this process is what the host under test spawns; replay over stdio.
  run.py check TRANSCRIPT|DIR...
      Parse transcripts and their patterns without running anything.
  run.py selftest [MATCHING_JSON]
      Check this matcher against the shared cases (conformance/matching.json).

Options: --timeout SECONDS (per awaited frame; default the transcript's timeout_ms, else 5),
--bind NAME=JSON (a variable bound before the first step; workspace_root defaults to the
current directory, config to null), -v (every frame to stderr).

Exit status: 0 when everything passed, 1 when a transcript failed, 2 on a usage or transcript
error.
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque

MAX_FRAME = 4 * 1024 * 1024
DEFAULT_TIMEOUT = 5.0
HERE = os.path.dirname(os.path.abspath(__file__))

# Absent: what a pattern is matched against when an object has no such member.
ABSENT = object()

TYPES = {
    "$string": lambda v: isinstance(v, str),
    "$number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "$integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "$boolean": lambda v: isinstance(v, bool),
    "$object": lambda v: isinstance(v, dict),
    "$array": lambda v: isinstance(v, list),
}


class TranscriptError(Exception):
    """The transcript itself is wrong (an unknown step or matcher): not the peer's fault."""


class Failed(Exception):
    """The peer did not do what the transcript says."""


def show(v):
    if v is ABSENT:
        return "nothing (absent)"
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def json_equal(a, b):
    """JSON equality: 1 equals 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def operator(p):
    """The operator of an operator object (`{"$includes": …}`), or None."""
    if isinstance(p, dict) and len(p) == 1:
        key = next(iter(p))
        if key.startswith("$") and not key.startswith("$$"):
            return key
    return None


def match(p, a, env, path="$"):
    """None when `a` matches pattern `p` (binding variables into `env`), else why not:
    (path, expected, got)."""
    miss = (path, p, a)
    if isinstance(p, str) and p.startswith("$") and not p.startswith("$$"):
        if p == "$absent":
            return None if a is ABSENT else (path, "$absent", a)
        if a is ABSENT:
            return miss
        if p == "$any":
            return None
        if p in TYPES:
            return None if TYPES[p](a) else miss
        if p.startswith("$var:") and len(p) > 5:
            name = p[5:]
            if name in env:
                return None if json_equal(env[name], a) else (path, env[name], a)
            env[name] = a
            return None
        raise TranscriptError("unknown matcher %s at %s" % (show(p), path))
    if a is ABSENT:
        return miss
    op = operator(p)
    if op == "$includes":
        items = p[op]
        if not isinstance(items, list):
            raise TranscriptError("$includes takes an array, at %s" % path)
        if not isinstance(a, list):
            return miss
        used = set()
        for i, item in enumerate(items):
            for j, el in enumerate(a):
                if j in used:
                    continue
                trial = dict(env)
                if match(item, el, trial, "%s[%d]" % (path, j)) is None:
                    env.clear()
                    env.update(trial)
                    used.add(j)
                    break
            else:
                return (path, {"$includes": [item]}, a)
        return None
    if op == "$prefix":
        if not isinstance(p[op], str):
            raise TranscriptError("$prefix takes a string, at %s" % path)
        return None if isinstance(a, str) and a.startswith(p[op]) else miss
    if op is not None:
        raise TranscriptError("unknown matcher %s at %s" % (op, path))
    if isinstance(p, dict):
        if not isinstance(a, dict):
            return miss
        for key, sub in p.items():
            optional = key.endswith("?")
            name = key[:-1] if optional else key
            if name.startswith("$$"):
                name = name[1:]
            got = a.get(name, ABSENT)
            if optional and got is ABSENT:
                continue
            why = match(sub, got, env, "%s.%s" % (path, name))
            if why is not None:
                return why
        return None
    if isinstance(p, list):
        if not isinstance(a, list) or len(a) != len(p):
            return miss
        for i, (sub, el) in enumerate(zip(p, a)):
            why = match(sub, el, env, "%s[%d]" % (path, i))
            if why is not None:
                return why
        return None
    if isinstance(p, str) and p.startswith("$$"):
        p = p[1:]
    return None if json_equal(p, a) else (path, p, a)


def check_pattern(p, path="$"):
    """Raise TranscriptError on an unknown matcher anywhere in pattern `p`."""
    if isinstance(p, str) and p.startswith("$") and not p.startswith("$$"):
        if p in ("$absent", "$any") or p in TYPES or (p.startswith("$var:") and len(p) > 5):
            return
        raise TranscriptError("unknown matcher %s at %s" % (show(p), path))
    op = operator(p)
    if op == "$includes":
        if not isinstance(p[op], list):
            raise TranscriptError("$includes takes an array, at %s" % path)
        for i, item in enumerate(p[op]):
            check_pattern(item, "%s[%d]" % (path, i))
    elif op == "$prefix":
        if not isinstance(p[op], str):
            raise TranscriptError("$prefix takes a string, at %s" % path)
    elif op is not None:
        raise TranscriptError("unknown matcher %s at %s" % (op, path))
    elif isinstance(p, dict):
        for k, v in p.items():
            check_pattern(v, "%s.%s" % (path, k))
    elif isinstance(p, list):
        for i, v in enumerate(p):
            check_pattern(v, "%s[%d]" % (path, i))


def check_template(t, path="$"):
    """Raise TranscriptError on a `$` string in a frame to send other than $var:NAME or $$…."""
    if isinstance(t, str) and t.startswith("$") and not t.startswith("$$"):
        if not (t.startswith("$var:") and len(t) > 5):
            raise TranscriptError("%s: only $var:NAME and $$… may be sent, at %s" % (t, path))
    elif isinstance(t, dict):
        for k, v in t.items():
            check_template(v, "%s.%s" % (path, k))
    elif isinstance(t, list):
        for i, v in enumerate(t):
            check_template(v, "%s[%d]" % (path, i))


def substitute(t, env, path="$"):
    """A frame to send: `$var:NAME` replaced by its value, `$$…` unescaped."""
    if isinstance(t, str) and t.startswith("$"):
        if t.startswith("$$"):
            return t[1:]
        if t.startswith("$var:") and len(t) > 5:
            if t[5:] not in env:
                raise TranscriptError("%s is not bound yet, at %s" % (t, path))
            return env[t[5:]]
        raise TranscriptError("%s: only $var:NAME and $$… may be sent, at %s" % (t, path))
    if isinstance(t, dict):
        out = {}
        for k, v in t.items():
            out[k[1:] if k.startswith("$$") else k] = substitute(v, env, "%s.%s" % (path, k))
        return out
    if isinstance(t, list):
        return [substitute(v, env, "%s[%d]" % (path, i)) for i, v in enumerate(t)]
    return t


STEP_KINDS = ("send", "send_raw", "expect", "close", "expect_eof")


def load(path):
    """A transcript from `path`, checked."""
    with open(path, encoding="utf-8") as f:
        try:
            t = json.load(f)
        except ValueError as e:
            raise TranscriptError("%s: not JSON: %s" % (path, e))
    if not isinstance(t, dict) or not isinstance(t.get("steps"), list):
        raise TranscriptError("%s: a transcript is an object with `steps`" % path)
    if t.get("wire") not in ("yep", "zot"):
        raise TranscriptError("%s: `wire` must be \"yep\" or \"zot\"" % path)
    if t.get("peer") not in ("server", "host"):
        raise TranscriptError("%s: `peer` must be \"server\" or \"host\"" % path)
    t["name"] = os.path.splitext(os.path.basename(path))[0]
    for i, step in enumerate(t["steps"]):
        kinds = [k for k in step if k in STEP_KINDS] if isinstance(step, dict) else []
        if len(kinds) != 1:
            raise TranscriptError("%s: step %d must have exactly one of %s"
                                  % (path, i + 1, ", ".join(STEP_KINDS)))
        if kinds[0] == "expect":
            frames = step["expect"] if isinstance(step["expect"], list) else [step["expect"]]
            for frame in frames:
                if not isinstance(frame, dict):
                    raise TranscriptError("%s: step %d expects a frame (an object)" % (path, i + 1))
                check_pattern(frame, "step %d" % (i + 1))
        if kinds[0] == "send":
            if not isinstance(step["send"], dict):
                raise TranscriptError("%s: step %d sends a frame (an object)" % (path, i + 1))
            check_template(step["send"], "step %d" % (i + 1))
        if kinds[0] == "send_raw" and not isinstance(step["send_raw"], str):
            raise TranscriptError("%s: step %d: send_raw takes a string" % (path, i + 1))
    return t


def transcripts(args):
    """The transcript files named, directories expanded (their *.json, sorted)."""
    out = []
    for a in args:
        if os.path.isdir(a):
            out += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".json"))
        else:
            out.append(a)
    return out


class Peer:
    """Frames in from a byte stream (a reader thread), frames out to another."""

    def __init__(self, reader, writer, verbose):
        self.writer = writer
        self.verbose = verbose
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(reader,), daemon=True).start()

    def _read(self, reader):
        try:
            while True:
                line = reader.readline(MAX_FRAME + 1)
                if not line:
                    break
                if len(line) > MAX_FRAME and not line.endswith(b"\n"):
                    self.lines.put(("toolong", len(line)))
                    break
                self.lines.put(("line", line))
        except (OSError, ValueError):
            pass
        self.lines.put(("eof", None))

    def write(self, text):
        if self.verbose:
            print("> " + text, file=sys.stderr)
        try:
            self.writer.write(text.encode("utf-8") + b"\n")
            self.writer.flush()
        except (OSError, ValueError) as e:
            raise Failed("could not write to the peer (%s): %s" % (e, text[:200]))

    def close(self):
        try:
            self.writer.close()
        except OSError:
            pass

    def next(self, deadline):
        """The next frame (a dict), "eof", or None at the deadline. Non-frames fail."""
        while True:
            left = deadline - time.monotonic()
            try:
                kind, value = self.lines.get(timeout=max(left, 0))
            except queue.Empty:
                return None
            if kind == "eof":
                self.lines.put((kind, value))  # stays at the end
                return "eof"
            if kind == "toolong":
                raise Failed("the peer wrote a line over %d bytes" % MAX_FRAME)
            text = value.decode("utf-8", "replace").rstrip("\r\n")
            if self.verbose:
                print("< " + text, file=sys.stderr)
            if not text.strip():
                continue
            try:
                frame = json.loads(text)
            except ValueError:
                raise Failed("the peer wrote a line that is not JSON: %s" % text[:200])
            if not isinstance(frame, dict):
                raise Failed("the peer wrote a line that is not a JSON object: %s" % text[:200])
            return frame


def skippable(frame, allow):
    """A frame with no id whose method (YEP) or type (zot) the transcript allows."""
    kind = frame.get("method", frame.get("type"))
    return "id" not in frame and isinstance(kind, str) and kind in allow


def describe(why):
    path, expected, got = why
    return "at %s: expected %s, got %s" % (path, show(expected), show(got))


def replay(t, peer, env, timeout):
    """Run the steps of `t` against `peer`; raise Failed on the first mismatch."""
    allow = set(t.get("allow", []))
    for n, step in enumerate(t["steps"], 1):
        where = "step %d" % n
        if "send" in step:
            peer.write(json.dumps(substitute(step["send"], env, where), ensure_ascii=False,
                                  separators=(",", ":")))
        elif "send_raw" in step:
            peer.write(step["send_raw"])
        elif "close" in step:
            peer.close()
        elif "expect_eof" in step:
            deadline = time.monotonic() + timeout
            while True:
                frame = peer.next(deadline)
                if frame == "eof":
                    break
                if frame is None:
                    raise Failed("%s (expect_eof): the peer's output did not end within %g s"
                                 % (where, timeout))
                if not skippable(frame, allow):
                    raise Failed("%s (expect_eof): expected the end of its output, got %s"
                                 % (where, show(frame)))
        else:
            frames = step["expect"] if isinstance(step["expect"], list) else [step["expect"]]
            unordered = step.get("unordered", False)
            pending = list(frames)
            while pending:
                candidates = pending if unordered else pending[:1]
                if len(frames) > 1:
                    where = "step %d, frame %d of %d" % (n, len(frames) - len(pending) + 1,
                                                         len(frames))
                deadline = time.monotonic() + timeout
                while True:
                    frame = peer.next(deadline)
                    if frame is None:
                        raise Failed("%s (expect): nothing within %g s; expected %s"
                                     % (where, timeout, " or ".join(show(c) for c in candidates)))
                    if frame == "eof":
                        raise Failed("%s (expect): the peer's output ended; expected %s"
                                     % (where, " or ".join(show(c) for c in candidates)))
                    whys = []
                    for c in candidates:
                        trial = dict(env)
                        why = match(c, frame, trial)
                        if why is None:
                            env.clear()
                            env.update(trial)
                            pending.remove(c)
                            break
                        whys.append((c, why))
                    else:
                        if skippable(frame, allow):
                            continue
                        lines = ["%s (expect): %s" % (where, describe(whys[0][1]))]
                        for c, why in whys:
                            lines.append("  expected: %s" % show(c))
                            if len(whys) > 1:
                                lines.append("    %s" % describe(why))
                        lines.append("  received: %s" % show(frame))
                        raise Failed("\n".join(lines))
                    break


def timeout_of(t, given):
    if given is not None:
        return given
    return t.get("timeout_ms", DEFAULT_TIMEOUT * 1000) / 1000.0


def run_server(paths, command, opts):
    """Play the host against COMMAND, once per transcript. Returns the exit status."""
    failed = passed = 0
    for path in paths:
        t = load(path)
        if t["peer"] != "server":
            print("skip  %s: its peer under test is a host (run.py host)" % path)
            continue
        env = dict(opts["bind"])
        try:
            child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=opts["cwd"])
        except OSError as e:
            print("FAIL  %s: cannot run %s: %s" % (path, command[0], e))
            failed += 1
            continue
        tail = deque(maxlen=10)

        def drain(stream=child.stderr, tail=tail):
            for line in stream:
                tail.append(line.decode("utf-8", "replace").rstrip())

        threading.Thread(target=drain, daemon=True).start()
        peer = Peer(child.stdout, child.stdin, opts["verbose"])
        try:
            replay(t, peer, env, timeout_of(t, opts["timeout"]))
            passed += 1
            print("pass  %s" % path)
        except Failed as e:
            failed += 1
            print("FAIL  %s\n  %s" % (path, str(e).replace("\n", "\n  ")))
            if tail:
                print("  its last stderr lines:\n    " + "\n    ".join(tail))
        finally:
            peer.close()
            try:
                child.wait(2)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def run_host(path, opts):
    """Play the server over this process's stdio."""
    t = load(path)
    if t["peer"] != "host":
        raise TranscriptError("%s: its peer under test is a server (run.py server)" % path)
    stdout = sys.stdout.buffer
    # Nothing else may reach the wire: a stray print goes to stderr.
    sys.stdout = sys.stderr
    peer = Peer(sys.stdin.buffer, stdout, opts["verbose"])
    try:
        replay(t, peer, dict(opts["bind"]), timeout_of(t, opts["timeout"]))
        verdict, status = "pass  %s\n" % path, 0
    except Failed as e:
        verdict, status = "FAIL  %s\n  %s\n" % (path, str(e).replace("\n", "\n  ")), 1
    sys.stderr.write(verdict)
    if opts["report"]:
        with open(opts["report"], "w", encoding="utf-8") as f:
            f.write(verdict)
    # Out at once: the reader thread may still be blocked on stdin, which an orderly
    # interpreter shutdown would wait on.
    for stream in (stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    os._exit(status)


def selftest(path):
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bad = 0
    for i, case in enumerate(cases, 1):
        env = dict(case.get("bound", {}))
        try:
            check_pattern(case["pattern"])
            why = match(case["pattern"], case["value"], env)
            got = why is None
        except TranscriptError as e:
            got = "error"
            why = str(e)
        want = case["matches"]
        if got != want or (got is True and "binds" in case and not json_equal(env, case["binds"])):
            bad += 1
            print("case %d (%s): expected %s, got %s %s" % (i, case.get("note", ""), want, got,
                                                            why if why else show(env)))
    print("%d cases, %d wrong" % (len(cases), bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    mode, rest = argv[1], argv[2:]
    command = []
    if "--" in rest:
        at = rest.index("--")
        rest, command = rest[:at], rest[at + 1:]
    opts = {"timeout": None, "verbose": False, "report": None, "cwd": None,
            "bind": {"workspace_root": os.getcwd(), "config": None}}
    files = []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a in ("--timeout", "--bind", "--report", "--cwd") and i + 1 < len(rest):
            value = rest[i + 1]
            i += 2
            if a == "--timeout":
                opts["timeout"] = float(value)
            elif a == "--report":
                opts["report"] = value
            elif a == "--cwd":
                opts["cwd"] = value
                opts["bind"]["workspace_root"] = os.path.abspath(value)
            else:
                name, _, text = value.partition("=")
                opts["bind"][name] = json.loads(text)
            continue
        if a == "-v":
            opts["verbose"] = True
        elif a.startswith("-"):
            print("run.py: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            files.append(a)
        i += 1
    try:
        if mode == "server":
            if not command or not files:
                print("run.py server TRANSCRIPT|DIR... -- COMMAND [ARG...]", file=sys.stderr)
                return 2
            return run_server(transcripts(files), command, opts)
        if mode == "host":
            if len(files) != 1:
                print("run.py host TRANSCRIPT [--report FILE]", file=sys.stderr)
                return 2
            return run_host(files[0], opts)
        if mode == "check":
            for path in transcripts(files):
                load(path)
            print("%d transcripts parse" % len(transcripts(files)))
            return 0
        if mode == "selftest":
            return selftest(files[0] if files else os.path.join(HERE, "matching.json"))
    except TranscriptError as e:
        print("run.py: %s" % e, file=sys.stderr)
        return 2
    print("run.py: unknown mode %s (server, host, check, selftest)" % mode, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
