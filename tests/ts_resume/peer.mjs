// SSE polling with a 2025-era client: the TypeScript MCP SDK
// (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) against
// `genmcp serve --max-stream-duration 2`, which closes the session's GET
// stream every 2 s with a `retry` hint. The SDK reconnects with
// Last-Event-ID; every resources/updated published meanwhile must arrive
// once and in order. Exits non-zero on any failed check. Run by
// scripts/ts-resume-peer.sh (GENMCP_BIN names the binary).
import { checkInOrder, close, connect, followNotes, stopAll } from "./client.mjs";
import { check, finish, sleep, startNode, waitUntil } from "./lib.mjs";

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
  const peer = await connect("ts-resume-peer", new URL(`http://127.0.0.1:${port}/mcp`), {
    fetch: countingFetch,
  });
  const { updates, errors, addNote } = peer;
  const { uris, open } = await followNotes(peer, NOTES);
  check(open, "the GET stream is open");
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
  checkInOrder(updates.slice(start), uris, "the closes");
  const resumed = gets.filter((id) => id).length - resumedBefore;
  check(resumed >= 2, `the GET stream was closed and resumed with Last-Event-ID ${resumed} times during the edits`);
  check(errors.length === 0, `no transport error (${errors.join("; ")})`);
  await close(peer);
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  stopAll(undefined, children);
}
finish("ts-resume-peer");
