// Resumption on any node of a fleet with a 2025-era client: the TypeScript
// MCP SDK (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport)
// through a per-request round-robin proxy over three `genmcp serve --bus`
// nodes on one redis-server, each with `--max-stream-duration 2`: the GET
// stream is closed every 2 s with a `retry` hint, the SDK reconnects with
// Last-Event-ID and lands on whichever node the proxy picks next; every
// resources/updated published meanwhile must arrive once and in order.
// Exits non-zero on any failed check. Run by scripts/ts-resume-peer.sh
// (GENMCP_BIN names the binary; redis-server must be on PATH).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { WAIT_MS, check, finish, roundRobin, sleep, startFleet, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;

const children = [];
let proxy;
try {
  const ports = await startFleet(BIN, 3, ["--keep-alive", "1", "--max-stream-duration", "2"], children);
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
finish("ts-fleet-resume-peer");
