// Resumption on any node of a fleet with a 2025-era client: the TypeScript
// MCP SDK (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport)
// through a per-request round-robin proxy over three `genmcp serve --bus`
// nodes on one redis-server, each with `--max-stream-duration 2`: the GET
// stream is closed every 2 s with a `retry` hint, the SDK reconnects with
// Last-Event-ID and lands on whichever node the proxy picks next; every
// resources/updated published meanwhile must arrive once and in order.
// Exits non-zero on any failed check. Run by scripts/ts-resume-peer.sh
// (GENMCP_BIN names the binary; redis-server must be on PATH).
import { checkInOrder, close, connect, followNotes, stopAll } from "./client.mjs";
import { check, finish, roundRobin, sleep, startFleet, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;

const children = [];
let proxy;
try {
  const ports = await startFleet(BIN, 3, ["--keep-alive", "1", "--max-stream-duration", "2"], children);
  const gets = [];
  proxy = await roundRobin(ports, gets);

  const url = new URL(`http://127.0.0.1:${proxy.address().port}/mcp`);
  const peer = await connect("ts-fleet-resume-peer", url);
  const { updates, errors, addNote } = peer;
  const { uris, open } = await followNotes(peer, NOTES);
  check(open, "the GET stream is open");
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
  checkInOrder(updates.slice(start), uris, "the closes");
  const resumed = gets.filter((g) => g.lastEventId);
  const nodes = new Set(resumed.map((g) => g.node));
  check(
    resumed.length - resumedBefore >= 2 && nodes.size >= 2,
    `the GET stream resumed with Last-Event-ID ${resumed.length - resumedBefore} times during the edits, on ${nodes.size} nodes in all`,
  );
  check(errors.length === 0, `no transport error (${errors.join("; ")})`);
  await close(peer);
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  stopAll(proxy, children);
}
finish("ts-fleet-resume-peer");
