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
import { checkInOrder, close, fleetPeer, followNotes, stopAll } from "./client.mjs";
import { check, finish, sleep, waitUntil } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const NOTES = 24;
const KILL_AFTER = 6;

const children = [];
let proxy;
try {
  const fleet = await fleetPeer(BIN, "ts-fleet-kill-peer", children);
  proxy = fleet.proxy;
  const { gets, dead, peer } = fleet;
  const { updates, errors, addNote } = peer;
  const { uris, open } = await followNotes(peer, NOTES);
  check(open && gets[0]?.node === 0, "the GET stream is open on node 0");

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
  checkInOrder(updates.slice(start), uris, "the kill");
  const after = gets.slice(2);
  check(
    after.length >= 1 && after[0].node === 2 && after.every((g) => g.node !== 1 && g.lastEventId),
    `after the kill the GET stream resumed with Last-Event-ID on node 2, never on the dead node (${JSON.stringify(after)})`,
  );
  const unexpected = errors.filter((e) => !e.includes("SSE stream disconnected"));
  check(unexpected.length === 0, `no transport error but the cut streams' (${unexpected.join("; ")})`);
  await close(peer);
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  stopAll(proxy, children);
}
finish("ts-fleet-kill-peer");
