// SSE polling with a 2025-era client: the TypeScript MCP SDK
// (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) against
// `genmcp serve --max-stream-duration 2`, which closes the session's GET
// stream every 2 s with a `retry` hint. The SDK reconnects with
// Last-Event-ID; every resources/updated published meanwhile must arrive
// once and in order. Exits non-zero on any failed check. Run by
// scripts/ts-resume-peer.sh (GENMCP_BIN names the binary).
import { spawn } from "node:child_process";
import net from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;
const WAIT_MS = 20_000;
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

const port = await freePort();
const server = spawn(
  BIN,
  ["serve", "--host", "127.0.0.1", "--port", String(port), "--keep-alive", "1", "--max-stream-duration", "2"],
  { stdio: ["ignore", "ignore", "inherit"] },
);
try {
  const up = Date.now() + WAIT_MS;
  while (!(await accepts(port))) {
    if (Date.now() > up) throw new Error("genmcp did not start");
    await sleep(50);
  }
  // Every GET the SDK sends, with its Last-Event-ID (null when none): the
  // stream must be resumed, not merely reopened.
  const gets = [];
  const countingFetch = (url, init) => {
    if ((init?.method ?? "GET").toUpperCase() === "GET") {
      gets.push(new Headers(init?.headers).get("last-event-id"));
    }
    return fetch(url, init);
  };
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
    fetch: countingFetch,
  });
  const client = new Client({ name: "ts-resume-peer", version: "1.0.0" }, { capabilities: {} });
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
  // The SDK opens its GET stream in the background after initialized.
  const probeEnd = Date.now() + WAIT_MS;
  while (!updates.includes(uris[0]) && Date.now() < probeEnd) {
    await addNote("probe", uris[0]);
    await sleep(100);
  }
  check(updates.includes(uris[0]), "the GET stream is open");
  await sleep(500);
  const start = updates.length;
  const resumedBefore = gets.filter((id) => id).length;
  // One edit per note, 250 ms apart: about 6 s, across at least two closes.
  for (const uri of uris) {
    await addNote("edit", uri);
    await sleep(250);
  }
  await waitUntil(() => updates.length - start >= NOTES, `${NOTES} updates arrived`);
  await sleep(500);
  const got = updates.slice(start);
  check(
    JSON.stringify(got) === JSON.stringify(uris),
    `every update once and in order across the closes (${got.length} received)`,
  );
  if (JSON.stringify(got) !== JSON.stringify(uris)) console.log(JSON.stringify(got));
  const resumed = gets.filter((id) => id).length - resumedBefore;
  check(resumed >= 2, `the GET stream was closed and resumed with Last-Event-ID ${resumed} times during the edits`);
  check(errors.length === 0, `no transport error (${errors.join("; ")})`);
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  server.kill("SIGTERM");
}
console.log(`ts-resume-peer: ${failed === 0 ? "all checks passed" : `${failed} checks failed`}`);
process.exit(failed === 0 ? 0 : 1);
