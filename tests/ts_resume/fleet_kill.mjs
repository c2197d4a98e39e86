// A node killed under a 2025-era client's GET stream: the TypeScript MCP SDK
// (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) through
// a per-request round-robin proxy over three `genmcp serve --bus` nodes on
// one redis-server. The GET stream opens on node 0 (which holds it: its
// node records the session's events in Redis); the proxy cuts it (an idle
// timeout) and the SDK resumes it with Last-Event-ID on node 1; node 1 is
// killed with SIGKILL while resources/updated are published, the proxy
// stops sending to it, and the SDK resumes on node 2. Every update must
// arrive once and in order. Exits non-zero on any failed check. Run by
// scripts/ts-resume-peer.sh (GENMCP_BIN names the binary; redis-server
// must be on PATH).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { WAIT_MS, check, finish, roundRobin, sleep, startFleet, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;
const KILL_AFTER = 6;

const children = [];
let proxy;
try {
  const ports = await startFleet(BIN, 3, ["--keep-alive", "1"], children);
  const gets = [];
  const dead = new Set();
  proxy = await roundRobin(ports, gets, dead);

  const url = new URL(`http://127.0.0.1:${proxy.address().port}/mcp`);
  const transport = new StreamableHTTPClientTransport(url, {
    reconnectionOptions: {
      initialReconnectionDelay: 200,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 5,
    },
  });
  const client = new Client({ name: "ts-fleet-kill-peer", version: "1.0.0" }, { capabilities: {} });
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
  check(updates.includes(uris[0]) && gets[0]?.node === 0, "the GET stream is open on node 0");

  // An idle timeout cuts it: the SDK resumes on node 1.
  proxy.cutGets();
  await waitUntil(() => gets.length >= 2, "the GET stream was resumed after the cut");
  check(gets[1]?.node === 1 && Boolean(gets[1]?.lastEventId), `resumed with Last-Event-ID on node ${gets[1]?.node}`);
  await sleep(500);

  const start = updates.length;
  for (let i = 0; i < NOTES; i += 1) {
    if (i === KILL_AFTER) {
      // Node 1, serving the stream now, dies; the balancer drops it.
      dead.add(1);
      children[2].kill("SIGKILL");
    }
    await addNote("edit", uris[i]);
    await sleep(250);
  }
  await waitUntil(() => updates.length - start >= NOTES, `${NOTES} updates arrived`);
  await sleep(500);
  const got = updates.slice(start);
  check(
    JSON.stringify(got) === JSON.stringify(uris),
    `every update once and in order across the kill (${got.length} received)`,
  );
  if (JSON.stringify(got) !== JSON.stringify(uris)) console.log(JSON.stringify(got));
  const after = gets.slice(2);
  check(
    after.length >= 1 && after.every((g) => g.node === 2 && g.lastEventId),
    `after the kill the GET stream resumed with Last-Event-ID on node 2 (${JSON.stringify(after)})`,
  );
  const unexpected = errors.filter((e) => !e.includes("SSE stream disconnected"));
  check(unexpected.length === 0, `no transport error but the cut streams' (${unexpected.join("; ")})`);
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  proxy?.closeAllConnections?.();
  proxy?.close();
  for (const child of children.reverse()) child.kill("SIGTERM");
}
finish("ts-fleet-kill-peer");
