// A node drained under a 2025-era client's GET stream: the TypeScript MCP
// SDK (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport)
// through a per-request round-robin proxy over three `genmcp serve --bus`
// nodes on one redis-server. The GET stream opens on node 0, which holds it
// (its node records the session's events); node 0 is drained (SIGTERM) and
// the proxy stops sending to it; its response ends with a `retry` hint, and
// the SDK resumes with Last-Event-ID on node 1, which takes the stream over
// from the draining node. Updates published while the client is away and
// after node 0 is gone must all arrive once and in order. Exits non-zero on
// any failed check. Run by scripts/ts-resume-peer.sh (GENMCP_BIN names the
// binary; redis-server must be on PATH).
import { checkInOrder, close, fleetPeer, followNotes, stopAll } from "./client.mjs";
import { check, finish, sleep, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 16;
const AWAY = 4;

const children = [];
let proxy;
try {
  const fleet = await fleetPeer(BIN, "ts-fleet-drain-peer", children);
  proxy = fleet.proxy;
  const { gets, dead, peer } = fleet;
  const { updates, errors, addNote } = peer;
  const { uris, open } = await followNotes(peer, NOTES);
  check(open && gets[0]?.node === 0, "the GET stream is open on node 0");
  const start = updates.length;

  // Node 0 drains; the balancer drops it.
  dead.add(0);
  children[1].kill("SIGTERM");
  // Published while the client is away: node 0 still records them.
  for (let i = 0; i < AWAY; i += 1) await addNote("away", uris[i]);
  await waitUntil(() => gets.length >= 2, "the GET stream was resumed after the drain");
  check(gets[1]?.node === 1 && Boolean(gets[1]?.lastEventId), `resumed with Last-Event-ID on node ${gets[1]?.node}`);
  await waitUntil(() => updates.length - start >= AWAY, `the ${AWAY} updates made while away arrived`);
  // Node 0 is gone; the stream goes on from node 1.
  await waitUntil(() => children[1].exitCode !== null || children[1].signalCode !== null, "node 0 finished draining");
  for (let i = AWAY; i < NOTES; i += 1) {
    await addNote("after", uris[i]);
    await sleep(100);
  }
  await waitUntil(() => updates.length - start >= NOTES, `${NOTES} updates arrived`);
  await sleep(500);
  checkInOrder(updates.slice(start), uris, "the drain");
  check(
    gets.slice(1).every((g) => g.node !== 0),
    `after the drain the GET stream never went to the drained node (${JSON.stringify(gets)})`,
  );
  const unexpected = errors.filter((e) => !e.includes("SSE stream disconnected"));
  check(unexpected.length === 0, `no transport error but the cut streams' (${unexpected.join("; ")})`);
  await close(peer);
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  stopAll(proxy, children);
}
finish("ts-fleet-drain-peer");
