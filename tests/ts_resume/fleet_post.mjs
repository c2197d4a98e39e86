// A 2025 tool call reply resumed on any node of a fleet: the TypeScript MCP
// SDK (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport)
// through a per-request round-robin proxy over three
// `genmcp serve --conformance --bus` nodes on one redis-server, each with
// `--max-stream-duration 0.05`: the reply of `test_tool_with_progress`
// (progress 0, 50, 100 about 50 ms apart, then its result) is closed with a
// `retry` hint before it is done, the SDK reconnects with GET and
// Last-Event-ID, and the proxy sends that GET to another node than the
// POST's. Every progress notification must arrive once and in order, then
// the result. Exits non-zero on any failed check. Run by
// scripts/ts-resume-peer.sh (GENMCP_BIN names the binary; redis-server
// must be on PATH).
import { close, connect, stopAll } from "./client.mjs";
import { check, finish, roundRobin, startFleet } from "./lib.mjs";

const BIN = process.env.GENMCP_BIN;
const CALLS = 4;

const children = [];
let proxy;
try {
  const ports = await startFleet(BIN, 3, ["--conformance", "--max-stream-duration", "0.05"], children);
  const gets = [];
  proxy = await roundRobin(ports, gets);
  const url = new URL(`http://127.0.0.1:${proxy.address().port}/mcp`);
  const peer = await connect("ts-fleet-post-peer", url);
  const { client, errors } = peer;

  for (let i = 0; i < CALLS; i += 1) {
    const progress = [];
    const before = gets.filter((g) => g.lastEventId).length;
    const result = await client.callTool({ name: "test_tool_with_progress", arguments: {} }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: 30_000,
    });
    const resumed = gets.filter((g) => g.lastEventId).length - before;
    check(
      JSON.stringify(progress) === "[0,50,100]",
      `call ${i + 1}: progress once and in order (${JSON.stringify(progress)})`,
    );
    check(
      result.content?.[0]?.text === "Progress test completed",
      `call ${i + 1}: its result after the progress (${JSON.stringify(result.content)})`,
    );
    check(resumed >= 1, `call ${i + 1}: its reply resumed with Last-Event-ID ${resumed} times`);
  }
  const nodes = new Set(gets.filter((g) => g.lastEventId).map((g) => g.node));
  check(nodes.size >= 2, `the replies resumed on ${nodes.size} nodes`);
  check(errors.length === 0, `no transport error (${errors.join("; ")})`);
  await close(peer);
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  stopAll(proxy, children);
}
finish("ts-fleet-post-peer");
