// What the resumption peers share on the client side: a TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2) client of a 2025-era session, the demo's
// notes it follows on its GET stream, every update checked once and in order,
// a fleet of three nodes behind a round-robin proxy, and the clean-up. Used
// by peer.mjs, fleet.mjs, fleet_kill.mjs, fleet_drain.mjs and fleet_post.mjs.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { WAIT_MS, check, roundRobin, sleep, startFleet } from "./lib.mjs";

/**
 * A client named `name` of the endpoint `url` (the transport given
 * `options`), connected and checked to speak 2025-11-25: the client, its
 * transport, the URIs of every resources/updated it got in order, and the
 * transport's errors.
 */
export async function connect(name, url, options = {}) {
  const transport = new StreamableHTTPClientTransport(url, options);
  const client = new Client({ name, version: "1.0.0" }, { capabilities: {} });
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
  return { client, transport, updates, errors, addNote };
}

/**
 * Adds `count` notes and subscribes to each, then edits the first until its
 * update comes (the SDK opens its GET stream in the background): the notes'
 * URIs, and whether the stream is open.
 */
export async function followNotes({ client, updates, addNote }, count) {
  const uris = [];
  for (let i = 0; i < count; i += 1) uris.push(await addNote(`note ${i}`));
  for (const uri of uris) await client.subscribeResource({ uri });
  const probeEnd = Date.now() + WAIT_MS;
  while (!updates.includes(uris[0]) && Date.now() < probeEnd) {
    await addNote("probe", uris[0]);
    await sleep(100);
  }
  return { uris, open: updates.includes(uris[0]) };
}

/** Checks that `got` is `want`, once each and in order (`across`: what happened meanwhile). */
export function checkInOrder(got, want, across) {
  const same = JSON.stringify(got) === JSON.stringify(want);
  check(same, `every update once and in order across ${across} (${got.length} received)`);
  if (!same) console.log(JSON.stringify(got));
}

/**
 * Three `genmcp serve --bus` nodes (`--keep-alive 1`, pushed onto
 * `children`) behind a per-request round-robin proxy, and a client named
 * `name` through it whose SDK reconnects its GET stream quickly: the proxy
 * (its GETs logged in `gets`, the nodes in `dead` skipped) and the client.
 */
export async function fleetPeer(bin, name, children) {
  const ports = await startFleet(bin, 3, ["--keep-alive", "1"], children);
  const gets = [];
  const dead = new Set();
  const proxy = await roundRobin(ports, gets, dead);
  const url = new URL(`http://127.0.0.1:${proxy.address().port}/mcp`);
  const peer = await connect(name, url, {
    reconnectionOptions: {
      initialReconnectionDelay: 200,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 5,
    },
  });
  return { proxy, gets, dead, peer };
}

/** Ends the session and the client (errors ignored: the test has its answer). */
export async function close({ client, transport }) {
  await transport.terminateSession().catch(() => {});
  await client.close();
}

/** Stops the proxy (if any) and every child process, the last started first. */
export function stopAll(proxy, children) {
  proxy?.closeAllConnections?.();
  proxy?.close();
  for (const child of [...children].reverse()) child.kill("SIGTERM");
}
