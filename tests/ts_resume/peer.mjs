// SSE polling with a 2025-era client: the TypeScript MCP SDK
// (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) against
// `genmcp serve --max-stream-duration 2`, which closes the session's GET
// stream every 2 s with a `retry` hint. The SDK reconnects with
// Last-Event-ID; every resources/updated published meanwhile must arrive
// once and in order. Exits non-zero on any failed check. Run by
// scripts/ts-resume-peer.sh (GENMCP_BIN names the binary).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { WAIT_MS, check, finish, sleep, startNode, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;

const children = [];
try {
  const port = await startNode(BIN, ["--keep-alive", "1", "--max-stream-duration", "2"], children);
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
  for (const child of children) child.kill("SIGTERM");
}
finish("ts-resume-peer");
