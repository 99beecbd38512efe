"""A remote MCP server behind OAuth, on loopback, for yep's login tests (standard library only).

One origin serves both:
  - the authorization server: metadata (RFC 8414), dynamic registration, /authorize (which
    approves at once and redirects with a code), /token (authorization code with PKCE S256,
    and refresh, which rotates the refresh token);
  - the protected MCP resource at /mcp (its metadata per RFC 9728), stateless, JSON answers:
    initialize, tools/list and tools/call of `whoami`, which answers with the access token's
    serial (so a test sees a refresh happen), and of `admin`, which wants the scope `admin`
    beyond `tools` (403 `insufficient_scope` without it: a step-up).

Test hooks: POST /test/expire ends every access token (the refresh tokens stay good), POST
/test/revoke ends every token, GET /test/stats counts authorizations and refreshes.

Prints {"url": "<base>/mcp"} on its first line, then serves until stdin closes.
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

state = {
    "codes": {},  # code -> (challenge, scope)
    "access": {},  # token -> (serial, scope)
    "refresh": {},  # token -> scope
    "serial": 0,
    "authorizations": 0,
    "refreshes": 0,
    "bearer_seen": [],
}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    @property
    def base(self):
        return "http://%s:%d" % self.server.server_address

    def answer(self, status, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path in ("/.well-known/oauth-protected-resource/mcp",
                        "/.well-known/oauth-protected-resource"):
            return self.answer(200, {"resource": self.base + "/mcp",
                                     "authorization_servers": [self.base],
                                     "scopes_supported": ["tools"]})
        if url.path == "/.well-known/oauth-authorization-server":
            return self.answer(200, {
                "issuer": self.base,
                "authorization_endpoint": self.base + "/authorize",
                "token_endpoint": self.base + "/token",
                "registration_endpoint": self.base + "/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["tools"],
            })
        if url.path == "/authorize":
            if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                return self.answer(400, {"error": "invalid_request"})
            code = secrets.token_hex(8)
            with lock:
                state["codes"][code] = (query["code_challenge"], query.get("scope", ""))
                state["authorizations"] += 1
            target = query["redirect_uri"] + "?" + urllib.parse.urlencode(
                {"code": code, "state": query.get("state", "")})
            return self.answer(302, None, [("location", target)])
        if url.path == "/test/stats":
            with lock:
                return self.answer(200, {k: state[k] for k in ("authorizations", "refreshes")})
        if url.path == "/mcp":
            return self.answer(405)
        return self.answer(404)

    def token(self, scope):
        with lock:
            state["serial"] += 1
            access = "access-%d-%s" % (state["serial"], secrets.token_hex(6))
            refresh = "refresh-%s" % secrets.token_hex(8)
            state["access"][access] = (state["serial"], scope)
            state["refresh"][refresh] = scope
        return {"access_token": access, "refresh_token": refresh, "token_type": "Bearer",
                "expires_in": 3600, "scope": scope}

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        raw = self.body()
        if url.path == "/register":
            asked = json.loads(raw or b"{}")
            return self.answer(201, {"client_id": "yep-test-client",
                                     "redirect_uris": asked.get("redirect_uris", []),
                                     "token_endpoint_auth_method": "none"})
        if url.path == "/token":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            if form.get("grant_type") == "authorization_code":
                with lock:
                    found = state["codes"].pop(form.get("code"), None)
                if not found:
                    return self.answer(400, {"error": "invalid_grant"})
                challenge, scope = found
                digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
                if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                    return self.answer(400, {"error": "invalid_grant",
                                             "error_description": "PKCE verifier mismatch"})
                return self.answer(200, self.token(scope))
            if form.get("grant_type") == "refresh_token":
                with lock:
                    scope = state["refresh"].pop(form.get("refresh_token"), None)
                    if scope is not None:
                        state["refreshes"] += 1
                if scope is None:
                    return self.answer(400, {"error": "invalid_grant"})
                return self.answer(200, self.token(scope))
            return self.answer(400, {"error": "unsupported_grant_type"})
        if url.path == "/test/expire":
            with lock:
                state["access"].clear()
            return self.answer(200, {})
        if url.path == "/test/revoke":
            with lock:
                state["access"].clear()
                state["refresh"].clear()
            return self.answer(200, {})
        if url.path != "/mcp":
            return self.answer(404)
        bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        with lock:
            serial, scope = state["access"].get(bearer, (None, ""))
        if serial is None:
            challenge = 'Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % self.base
            return self.answer(401, {"error": "invalid_token"}, [("www-authenticate", challenge)])
        message = json.loads(raw)
        if "id" not in message:
            return self.answer(202)
        method, rid = message.get("method"), message["id"]
        if method == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"],
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-test", "version": "1.0.0"}}
        elif method == "tools/list":
            empty = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "whoami", "description": "Which token called",
                                 "inputSchema": empty},
                                {"name": "admin", "description": "Wants the scope admin",
                                 "inputSchema": empty}]}
        elif method == "tools/call" and message["params"]["name"] == "admin" \
                and "admin" not in scope.split():
            challenge = ('Bearer error="insufficient_scope", scope="tools admin", '
                         'resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % self.base)
            return self.answer(403, {"error": "insufficient_scope"},
                               [("www-authenticate", challenge)])
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "token %d (%s)" % (serial, scope)}]}
        else:
            return self.answer(200, {"jsonrpc": "2.0", "id": rid,
                                     "error": {"code": -32601, "message": "no " + method}})
        return self.answer(200, {"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"url": "http://127.0.0.1:%d/mcp" % server.server_address[1]}), flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
