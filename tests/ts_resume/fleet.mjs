// Resumption on any node of a fleet with a 2025-era client: the TypeScript
// MCP SDK (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport)
// through a per-request round-robin proxy over three `genmcp serve --bus`
// nodes on one redis-server, each with `--max-stream-duration 2`: the GET
// stream is closed every 2 s with a `retry` hint, the SDK reconnects with
// Last-Event-ID and lands on whichever node the proxy picks next; every
// resources/updated published meanwhile must arrive once and in order.
// Exits non-zero on any failed check. Run by scripts/ts-resume-peer.sh
// (GENMCP_BIN names the binary; redis-server must be on PATH).
import { spawn } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;
const WAIT_MS = 20_000;
const KEY = "5a".repeat(32);
let failed = 0;

function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed += 1;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(cond, what) {
  const end = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > end) {
      check(false, `${what} (timed out)`);
      return false;
    }
    await sleep(20);
  }
  check(true, what);
  return true;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function accepts(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
  });
}

async function waitAccepts(port, what) {
  const up = Date.now() + WAIT_MS;
  while (!(await accepts(port))) {
    if (Date.now() > up) throw new Error(`${what} did not start`);
    await sleep(50);
  }
}

// Each request goes to the next node in turn; GETs take their own turns, so
// each reconnection of the GET stream lands on another node than the last
// one. Bodies are streamed both ways, and a client that leaves aborts the
// upstream request.
function roundRobin(ports, gets) {
  let next = 0;
  let nextGet = 0;
  const proxy = http.createServer((req, res) => {
    let node;
    if (req.method === "GET") {
      node = nextGet % ports.length;
      nextGet += 1;
      gets.push({ node, lastEventId: req.headers["last-event-id"] });
    } else {
      node = next % ports.length;
      next += 1;
    }
    const up = http.request(
      { host: "127.0.0.1", port: ports[node], method: req.method, path: req.url, headers: req.headers },
      (upRes) => {
        res.writeHead(upRes.statusCode, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve(proxy)));
}

const children = [];
let proxy;
try {
  const redisPort = await freePort();
  children.push(
    spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    }),
  );
  await waitAccepts(redisPort, "redis-server");
  const ports = [];
  for (let i = 0; i < 3; i += 1) {
    const port = await freePort();
    ports.push(port);
    children.push(
      spawn(
        BIN,
        [
          "serve", "--host", "127.0.0.1", "--port", String(port),
          "--bus", `redis://127.0.0.1:${redisPort}`,
          "--keep-alive", "1", "--max-stream-duration", "2",
        ],
        { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, GENMCP_KEY: KEY } },
      ),
    );
  }
  for (const port of ports) await waitAccepts(port, "genmcp");
  const gets = [];
  proxy = await roundRobin(ports, gets);

  const url = new URL(`http://127.0.0.1:${proxy.address().port}/mcp`);
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client({ name: "ts-fleet-resume-peer", version: "1.0.0" }, { capabilities: {} });
  const updates = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updates.push(n.params.uri);
  });
  const errors = [];
  transport.onerror = (e) => errors.push(String(e));
  await client.connect(transport);
  check(transport.protocolVersion === "2025-11-25", `negotiated ${transport.protocolVersion}`);

  const addNote = async (text, uri) => {
    const args = uri === undefined ? { text } : { text, uri };
    const r = await client.callTool({ name: "add_note", arguments: args });
    return r.content[0].text;
  };
  const uris = [];
  for (let i = 0; i < NOTES; i += 1) uris.push(await addNote(`note ${i}`));
  for (const uri of uris) await client.subscribeResource({ uri });
  const probeEnd = Date.now() + WAIT_MS;
  while (!updates.includes(uris[0]) && Date.now() < probeEnd) {
    await addNote("probe", uris[0]);
    await sleep(100);
  }
  check(updates.includes(uris[0]), "the GET stream is open");
  await sleep(500);
  const start = updates.length;
  const resumedBefore = gets.filter((g) => g.lastEventId).length;
  // One edit per note, 400 ms apart: about 10 s, across at least two closes
  // (one every 2 s, then the 1 s retry), published through whichever node
  // the proxy picks.
  for (const uri of uris) {
    await addNote("edit", uri);
    await sleep(400);
  }
  await waitUntil(() => updates.length - start >= NOTES, `${NOTES} updates arrived`);
  await sleep(500);
  const got = updates.slice(start);
  check(
    JSON.stringify(got) === JSON.stringify(uris),
    `every update once and in order across the closes (${got.length} received)`,
  );
  if (JSON.stringify(got) !== JSON.stringify(uris)) console.log(JSON.stringify(got));
  const resumed = gets.filter((g) => g.lastEventId);
  const nodes = new Set(resumed.map((g) => g.node));
  check(
    resumed.length - resumedBefore >= 2 && nodes.size >= 2,
    `the GET stream resumed with Last-Event-ID ${resumed.length - resumedBefore} times during the edits, on ${nodes.size} nodes in all`,
  );
  check(errors.length === 0, `no transport error (${errors.join("; ")})`);
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  proxy?.closeAllConnections?.();
  proxy?.close();
  for (const child of children.reverse()) child.kill("SIGTERM");
}
console.log(`ts-fleet-resume-peer: ${failed === 0 ? "all checks passed" : `${failed} checks failed`}`);
process.exit(failed === 0 ? 0 : 1);
