// genmcp over stdio driven by a 2025-era host: the TypeScript MCP SDK
// (@modelcontextprotocol/sdk 1.32.2) launches `genmcp serve --stdio` with its
// StdioClientTransport, as desktop hosts do, and speaks 2025-11-25: initialize,
// tools, a pushed tools/list_changed, resources/subscribe / updated /
// unsubscribe, logging/setLevel with notifications/message, elicitation
// answered by the host, ping, and close (EOF). Exits non-zero on any failed
// check. Run by scripts/ts-stdio-peer.sh (GENMCP_BIN names the binary).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const BIN = process.env.GENMCP_BIN;
const WAIT_MS = 10_000;
let failed = 0;

function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed += 1;
}

async function waitUntil(cond, what) {
  const end = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > end) {
      check(false, `${what} (timed out)`);
      return false;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  check(true, what);
  return true;
}

async function connect(args, capabilities = {}) {
  const transport = new StdioClientTransport({ command: BIN, args, stderr: "pipe" });
  const client = new Client({ name: "ts-stdio-peer", version: "1.0.0" }, { capabilities });
  await client.connect(transport);
  return { client, transport };
}

async function demo() {
  const { client, transport } = await connect(["serve", "--stdio"]);
  check(client.getServerVersion()?.name === "genmcp-notes", "initialize: serverInfo");
  check(client.getServerCapabilities()?.tools?.listChanged === true, "initialize: tools.listChanged");

  let toolsChanged = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { toolsChanged += 1; });
  const updated = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); });

  const tools = (await client.listTools()).tools.map((t) => t.name);
  check(tools.includes("toggle_extra_tool"), "tools/list");
  const toggled = await client.callTool({ name: "toggle_extra_tool", arguments: {} });
  check(!toggled.isError, "tools/call toggle_extra_tool");
  await waitUntil(() => toolsChanged >= 1, "notifications/tools/list_changed pushed");

  const added = await client.callTool({ name: "add_note", arguments: { text: "one" } });
  const uri = added.content[0].text;
  check(uri.startsWith("note://"), "add_note returns a URI");
  await client.subscribeResource({ uri });
  await client.callTool({ name: "add_note", arguments: { text: "two", uri } });
  await waitUntil(() => updated.includes(uri), "notifications/resources/updated for a subscribed URI");
  await client.unsubscribeResource({ uri });
  const seen = updated.length;
  await client.callTool({ name: "add_note", arguments: { text: "three", uri } });
  await client.ping();
  await new Promise((r) => setTimeout(r, 300));
  check(updated.length === seen, "no resources/updated after unsubscribe");

  try {
    await client.readResource({ uri: "note://nope" });
    check(false, "resources/read of an unknown URI fails");
  } catch (e) {
    check(e.code === -32002, `resources/read of an unknown URI is -32002 (got ${e.code})`);
  }
  await client.close();
  const code = await new Promise((resolve) => {
    const proc = transport._process;
    if (!proc || proc.exitCode !== null) return resolve(proc?.exitCode ?? 0);
    proc.once("exit", (c) => resolve(c));
  });
  check(code === 0 || code === null, `the server exits cleanly on close (exit ${code})`);
}

async function conformance() {
  const { client } = await connect(["serve", "--stdio", "--conformance"], { elicitation: {} });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params.level); });
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: "accept",
    content: { username: "ada", email: "ada@example.com" },
  }));
  await client.setLoggingLevel("info");
  await client.callTool({ name: "test_tool_with_logging", arguments: {} });
  await waitUntil(() => logs.length >= 3, "notifications/message at the set level");
  check(logs.every((l) => l === "info"), "log messages carry their level");
  await client.setLoggingLevel("error");
  const before = logs.length;
  await client.callTool({ name: "test_tool_with_logging", arguments: {} });
  check(logs.length === before, "no log messages below the level");

  const elicited = await client.callTool({ name: "test_elicitation", arguments: { message: "who?" } });
  check(!elicited.isError && elicited.content[0].text.includes("ada"), "elicitation answered on the pipe");
  await client.close();
}

try {
  await demo();
  await conformance();
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
}
console.log(failed === 0 ? "all checks passed" : `${failed} check(s) failed`);
process.exit(failed === 0 ? 0 : 1);
