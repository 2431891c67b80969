// capfs mcp --listen: who is refused (no token, a wrong one, an Origin not allowed, a Host that
// is not the listener's), what a session answers to, that each session's roots are its own,
// and that a client holding streams it never reads gets its share and no more while the server
// keeps answering others. Raw requests go through node:http, which lets a test set Host.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import path from "node:path";
import { describe, test } from "node:test";
import { awaitAllowed, call, CAPFS, connectHttp, startHttp, tempDir } from "./lib.mjs";

const TOKEN = "http-test-token-5d1c";
const INIT = {
  jsonrpc: "2.0", id: 1, method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};
const LIST = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };

/** One request; resolves with { status, headers, body } once the whole body is read. */
function request(url, { method = "POST", headers = {}, body, ca } = {}) {
  const u = new URL(url);
  const lib = u.protocol === "https:" ? https : http;
  const all = { accept: "application/json, text/event-stream", "content-type": "application/json", ...headers };
  return new Promise((resolve, reject) => {
    const req = lib.request(u, { method, headers: all, agent: false, ca }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => { text += c; });
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** A request whose response is never read: resolves with { status, res, req } as soon as the
 *  status line arrives, the body left paused in the socket. */
function unread(url, { method = "GET", headers = {}, body } = {}) {
  const all = { accept: "text/event-stream, application/json", "content-type": "application/json", ...headers };
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(url), { method, headers: all, agent: false }, (res) => {
      res.pause();
      resolve({ status: res.statusCode, res, req });
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const auth = (token = TOKEN) => ({ authorization: `Bearer ${token}` });

describe("capfs mcp --listen refuses", () => {
  test("no token, a wrong token, an Origin not allowed, a Host not the listener's; the token in no reply or log line", async () => {
    const ws = tempDir("http-refuse");
    const server = await startHttp([ws], ["--allow-origin", "http://allowed.example", "--authorization-server", "https://auth.example"], { token: TOKEN });
    const replies = [];
    const send = async (options) => { const r = await request(server.url, options); replies.push(r); return r; };
    try {
      const base = new URL(server.url).origin;
      const metadataUrl = `${base}/.well-known/oauth-protected-resource/mcp`;

      let r = await send({ body: INIT });
      assert.equal(r.status, 401);
      assert.equal(r.headers["www-authenticate"], `Bearer realm="capfs", resource_metadata="${metadataUrl}"`);
      r = await send({ body: INIT, headers: auth("not-the-token") });
      assert.equal(r.status, 401);
      assert.match(r.headers["www-authenticate"], /^Bearer realm="capfs", error="invalid_token", resource_metadata=/);
      r = await send({ body: INIT, headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString("base64")}` } });
      assert.equal(r.status, 401, "only the Bearer scheme carries the token");

      r = await send({ body: INIT, headers: { ...auth(), origin: "http://evil.example" } });
      assert.equal(r.status, 403);
      r = await send({ body: INIT, headers: { ...auth(), origin: "null" } });
      assert.equal(r.status, 403);
      r = await send({ body: INIT, headers: { origin: "http://evil.example" } });
      assert.equal(r.status, 403, "a page is refused before its token is looked at");
      r = await send({ body: INIT, headers: { ...auth(), origin: "http://allowed.example" } });
      assert.equal(r.status, 200);
      assert.ok(r.headers["mcp-session-id"]);

      const port = new URL(server.url).port;
      for (const host of ["evil.example", `evil.example:${port}`, `127.0.0.1:${Number(port) + 1}`, `attacker.test:${port}`]) {
        r = await send({ body: INIT, headers: { ...auth(), host } });
        assert.equal(r.status, 403, host);
      }
      r = await send({ body: INIT, headers: { ...auth(), host: `localhost:${port}` } });
      assert.equal(r.status, 200);

      // The metadata needs no token (RFC 9728), and names this resource and its issuer.
      const metadata = await request(metadataUrl, { method: "GET" });
      assert.equal(metadata.status, 200);
      assert.deepEqual(JSON.parse(metadata.body), {
        resource: server.url, authorization_servers: ["https://auth.example"],
        bearer_methods_supported: ["header"], resource_name: "capfs mcp",
      });

      // The SDK client with a wrong token fails to connect.
      await assert.rejects(connectHttp(server.url, "not-the-token"));
    } finally { await server.stop(); }
    for (const r of replies) assert.ok(!JSON.stringify(r).includes(TOKEN), "a reply holds the token");
    assert.ok(server.stderr().length > 0);
    assert.ok(!server.stderr().includes(TOKEN), "the log holds the token");
  });

  test("a start without a token, or on a non-loopback address without TLS, with a clear error", () => {
    const ws = tempDir("http-start");
    const env = { ...process.env };
    delete env.CAPFS_TOKEN;
    let r = spawnSync(CAPFS, ["mcp", "--listen", "http://127.0.0.1:0/mcp", ws], { env, encoding: "utf8" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--listen needs a bearer token for its clients: --token-file FILE or CAPFS_TOKEN/);
    r = spawnSync(CAPFS, ["mcp", "--listen", "http://0.0.0.0:0/mcp", ws], { env: { ...env, CAPFS_TOKEN: TOKEN }, encoding: "utf8" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /refusing to listen on non-loopback address 0\.0\.0\.0:0 without TLS/);
    assert.equal(r.stdout, "");
  });
});

describe("capfs mcp --listen sessions", () => {
  test("a session needs the token, ends with DELETE, an unknown one is 404; MCP-Protocol-Version is honoured", async () => {
    const ws = tempDir("http-session");
    const server = await startHttp([ws], [], { token: TOKEN });
    try {
      const a = await connectHttp(server.url, TOKEN);
      const b = await connectHttp(server.url, TOKEN);
      const id = a.transport.sessionId;
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "a random (v4) id");
      assert.notEqual(id, b.transport.sessionId);
      const version = a.transport.protocolVersion;
      const headers = { "mcp-session-id": id, "mcp-protocol-version": version };

      assert.equal((await request(server.url, { body: LIST, headers })).status, 401, "the session id is no credential");
      assert.equal((await request(server.url, { body: LIST, headers: { ...headers, ...auth() } })).status, 200);
      const unknown = { ...headers, ...auth(), "mcp-session-id": "00000000-0000-4000-8000-000000000000" };
      assert.equal((await request(server.url, { body: LIST, headers: unknown })).status, 404);
      const old = await request(server.url, { body: LIST, headers: { ...headers, ...auth(), "mcp-protocol-version": "1999-01-01" } });
      assert.equal(old.status, 400);

      await a.transport.terminateSession();
      assert.equal((await request(server.url, { body: LIST, headers: { ...headers, ...auth() } })).status, 404);
      // The other session is untouched.
      assert.match((await call(b.client, "list_allowed_directories")).text, new RegExp(ws));
      await b.close();
      await a.close();
    } finally { await server.stop(); }
  });

  test("with one token a line, a session answers only to the token that made it, and each token has its share", async () => {
    const ws = tempDir("http-tokens");
    const [one, two] = ["token-one-a81f", "token-two-c3d9"];
    const file = path.join(tempDir("http-token-file"), "tokens");
    fs.writeFileSync(file, `${one}\n\n  ${two}  \n`);
    const server = await startHttp([ws], ["--token-file", file, "--max-sessions-per-token", "1"], { token: "not-used" });
    try {
      const a = await connectHttp(server.url, one);
      const headers = { "mcp-session-id": a.transport.sessionId, "mcp-protocol-version": a.transport.protocolVersion };
      assert.equal((await request(server.url, { body: LIST, headers: { ...headers, ...auth(one) } })).status, 200);
      assert.equal((await request(server.url, { body: LIST, headers: { ...headers, ...auth(two) } })).status, 404, "another token's session is unknown");
      assert.equal((await request(server.url, { method: "DELETE", headers: { ...headers, ...auth(two) } })).status, 404, "nor can it end it");
      assert.equal((await request(server.url, { body: INIT, headers: auth("not-used") })).status, 401, "the file wins over CAPFS_TOKEN");
      // One session per token: token one has its own, token two still gets one.
      assert.equal((await request(server.url, { body: INIT, headers: auth(one) })).status, 503);
      const b = await connectHttp(server.url, two);
      assert.match((await call(b.client, "list_allowed_directories")).text, new RegExp(ws));
      assert.match((await call(a.client, "list_allowed_directories")).text, new RegExp(ws));
      await a.close();
      await b.close();
    } finally { await server.stop(); }
  });

  test("an idle session ends, and its open stream with it", { timeout: 60_000 }, async () => {
    const ws = tempDir("http-idle");
    const server = await startHttp([ws], ["--session-idle-timeout", "100ms"], { token: TOKEN });
    try {
      const init = await request(server.url, { body: INIT, headers: auth() });
      assert.equal(init.status, 200);
      const headers = { ...auth(), "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18" };
      const initialized = await request(server.url, { body: { jsonrpc: "2.0", method: "notifications/initialized" }, headers });
      assert.equal(initialized.status, 202);
      // A GET stream, read but never answered: it ends when the server ends the idle session
      // (the keep-alive pings of an open stream are not requests).
      const stream = await unread(server.url, { headers });
      assert.equal(stream.status, 200);
      await new Promise((resolve) => { stream.res.on("close", resolve); stream.res.resume(); });
      assert.equal((await request(server.url, { body: LIST, headers })).status, 404);
    } finally { await server.stop(); }
  });

  test("two sessions with different roots cannot see each other's files", async () => {
    const base = tempDir("http-roots");
    const [one, two] = ["one", "two"].map((d) => path.join(base, d));
    for (const [dir, secret] of [[one, "ONE-SECRET"], [two, "TWO-SECRET"]]) {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "secret.txt"), `${secret}\n`);
    }
    const server = await startHttp([one, two], [], { token: TOKEN });
    const clients = [];
    try {
      const a = await connectHttp(server.url, TOKEN, { roots: { current: [{ uri: `file://${one}` }] } });
      clients.push(a);
      const b = await connectHttp(server.url, TOKEN, { roots: { current: [{ uri: `file://${two}` }] } });
      clients.push(b);
      const both = await connectHttp(server.url, TOKEN);
      clients.push(both);
      assert.equal(await awaitAllowed(a.client, `Allowed directories:\n${one}`), `Allowed directories:\n${one}`);
      assert.equal(await awaitAllowed(b.client, `Allowed directories:\n${two}`), `Allowed directories:\n${two}`);
      for (const [client, mine, theirs, secret] of [[a.client, one, two, "TWO-SECRET"], [b.client, two, one, "ONE-SECRET"]]) {
        assert.ok(!(await call(client, "read_text_file", { path: path.join(mine, "secret.txt") })).isError);
        for (const [name, args] of [
          ["read_text_file", { path: path.join(theirs, "secret.txt") }],
          ["list_directory", { path: theirs }],
          ["write_file", { path: path.join(theirs, "planted.txt"), content: "x" }],
          ["search_files", { path: base, pattern: "**" }],
        ]) {
          const r = await call(client, name, args);
          assert.ok(r.isError, `${name} ${JSON.stringify(args)}: ${r.text}`);
          assert.ok(!r.text.includes(secret));
        }
      }
      assert.ok(!fs.existsSync(path.join(one, "planted.txt")) && !fs.existsSync(path.join(two, "planted.txt")));
      // A session without roots keeps the configured directories: no session narrowed it.
      assert.equal((await call(both.client, "list_allowed_directories")).text.split("\n").slice(1).sort().join("\n"), [one, two].sort().join("\n"));
    } finally {
      for (const c of clients) await c.close();
      await server.stop();
    }
  });

  test("streams never read hold no more than their bound; the server keeps answering", async () => {
    const ws = tempDir("http-bounds");
    fs.writeFileSync(path.join(ws, "big.txt"), "x".repeat(3 << 20));
    const limits = ["--max-streams-per-session", "3", "--max-streams", "6", "--max-sessions", "3"];
    const server = await startHttp([ws], limits, { token: TOKEN });
    const held = [];
    try {
      const a = await connectHttp(server.url, TOKEN);
      const headersOf = (c) => ({ ...auth(), "mcp-session-id": c.transport.sessionId, "mcp-protocol-version": c.transport.protocolVersion });
      // Session a: GET streams, never read, until the server refuses one.
      const opened = [];
      for (let i = 0; i < 10; i++) {
        const s = await unread(server.url, { headers: headersOf(a) });
        held.push(s);
        if (s.status !== 200) { assert.equal(s.status, 429); break; }
        opened.push(s);
      }
      assert.ok(opened.length >= 2 && opened.length <= 3, `a's streams: ${opened.length} (the SDK's own GET may hold one)`);
      // Unread POSTs of a large read are refused too, and a's tool calls with them.
      const readBig = { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "read_text_file", arguments: { path: path.join(ws, "big.txt") } } };
      for (let i = 0; i < 5; i++) {
        const s = await unread(server.url, { method: "POST", headers: headersOf(a), body: readBig });
        held.push(s);
        assert.equal(s.status, 429);
      }
      await assert.rejects(call(a.client, "list_allowed_directories"));

      // Another session is served, a large read included, while a holds its share.
      const b = await connectHttp(server.url, TOKEN);
      assert.equal((await call(b.client, "read_text_file", { path: path.join(ws, "big.txt") })).text.length, 3 << 20);
      const bStreams = [];
      for (let i = 0; i < 10; i++) {
        const s = await unread(server.url, { headers: headersOf(b) });
        if (s.status !== 200) { s.res.resume(); assert.equal(s.status, 429); break; }
        bStreams.push(new Promise((resolve) => { s.res.on("end", resolve); s.res.on("close", resolve); s.res.resume(); }));
      }
      // Six streams in all: a third session is refused until some close.
      const c = await request(server.url, { body: INIT, headers: auth() });
      assert.equal(c.status, 429);

      // b ends its session: its streams end with it, and a new session gets their places.
      await b.transport.terminateSession();
      await Promise.all(bStreams);
      let d;
      for (let i = 0; i < 50 && !d; i++) d = await connectHttp(server.url, TOKEN).catch(() => undefined);
      assert.ok(d, "a new session once b's streams closed");
      assert.match((await call(d.client, "list_allowed_directories")).text, new RegExp(ws));
      // Sessions a and d, and one more: the fourth is refused.
      const e = await connectHttp(server.url, TOKEN);
      assert.equal((await request(server.url, { body: INIT, headers: auth() })).status, 503);
      await d.close();
      await e.close();
      await b.close();
    } finally {
      for (const s of held) s.req.destroy();
      await server.stop();
    }
  });
});

test("https:// with --tls-cert and --tls-key", async () => {
  const dir = tempDir("http-tls");
  const [cert, key] = [path.join(dir, "cert.pem"), path.join(dir, "key.pem")];
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { stdio: "ignore" });
  const server = await startHttp([dir], ["--tls-cert", cert, "--tls-key", key], { token: TOKEN, listen: "https://127.0.0.1:0/mcp" });
  try {
    const url = server.url;
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const ca = fs.readFileSync(cert);
    const r = await request(url, { body: INIT, headers: auth(), ca });
    assert.equal(r.status, 200);
    assert.match(r.body, /"serverInfo":\{"name":"capfs"/);
    assert.equal((await request(url, { body: INIT, ca })).status, 401);
    await assert.rejects(request(url, { body: INIT, headers: auth() }), "a certificate no one trusts is refused");
  } finally { await server.stop(); }
});
