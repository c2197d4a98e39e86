// Renders genmcp's MCP Apps view in headless Chromium, as a web host does:
// serves host.html (on 127.0.0.1) and sandbox.html (on localhost: another
// origin), forwards the page's /mcp to the genmcp server, adds two notes, opens
// the host page, and checks that the view, inside the sandbox proxy, rendered
// the notes of the tool result (its DOM), then takes a screenshot.
//
// Environment: GENMCP_URL (the server's /mcp URL), APPS_HOST_CACHE (where
// playwright-core is installed), CHROMIUM (the browser), SCREENSHOT (output).
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = createRequire(join(process.env.APPS_HOST_CACHE, "package.json"))("playwright-core");
const MCP = process.env.GENMCP_URL;
const WAIT_MS = 30_000;
let failed = 0;
const check = (ok, what) => { console.log(`${ok ? "ok" : "FAIL"}: ${what}`); if (!ok) failed += 1; };

const pages = { "/host.html": "host.html", "/sandbox.html": "sandbox.html" };
const server = createServer(async (req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (req.method === "POST" && path === "/mcp") {
    // The host's backend: the page's MCP requests go to the server as they are.
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = {};
    for (const h of ["content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name"]) {
      if (req.headers[h] !== undefined) headers[h] = req.headers[h];
    }
    const r = await fetch(MCP, { method: "POST", headers, body: Buffer.concat(chunks) });
    res.writeHead(r.status, { "content-type": r.headers.get("content-type") || "application/json" });
    res.end(Buffer.from(await r.arrayBuffer()));
  } else if (req.method === "GET" && pages[path]) {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(readFileSync(join(here, pages[path])));
  } else if (path === "/favicon.ico") {
    res.writeHead(204).end();
  } else {
    res.writeHead(404).end();
  }
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const port = server.address().port;

async function tool(name, args) {
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "apps-host-setup", version: "1" },
    "io.modelcontextprotocol/clientCapabilities": {} };
  const r = await fetch(MCP, { method: "POST", headers: { "content-type": "application/json",
    accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call", "mcp-name": name },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args, _meta: meta } }) });
  if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
}

// Markup in a note must show as text, not become elements.
const NOTES = ["buy milk", "<b>call</b> the plumber & the roofer"];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox"] });
try {
  for (const text of NOTES) await tool("add_note", { text });
  const page = await browser.newPage({ viewport: { width: 800, height: 500 } });
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  const host = `http://127.0.0.1:${port}`;
  const sandbox = `http://localhost:${port}/sandbox.html?host=${encodeURIComponent(host)}`;
  await page.goto(`${host}/host.html?tool=show_notes&sandbox=${encodeURIComponent(sandbox)}`);
  const items = page.frameLocator("#sandbox").frameLocator("#view").locator("#notes li");
  await page.waitForFunction(() => window.hostLog.some((l) => l === "sent tool-result" || l.startsWith("error")),
    null, { timeout: WAIT_MS }).catch(() => {});
  const hostLog = await page.evaluate(() => window.hostLog);
  console.log(hostLog.map((l) => `  host: ${l}`).join("\n"));
  check(!hostLog.some((l) => l.startsWith("error")), "the host listed, read and called without error");
  check(hostLog.some((l) => /^ui\/initialize: protocolVersion \d{4}-\d\d-\d\d/.test(l)),
    "the view sent ui/initialize with a protocolVersion");
  check(hostLog.includes("ui/notifications/initialized"), "the view sent ui/notifications/initialized");
  // The notes of the tool result, in the view's DOM.
  await items.filter({ hasText: NOTES[1] }).first().waitFor({ timeout: WAIT_MS }).catch(() => {});
  const texts = await items.allTextContents().catch(() => []);
  console.log(texts.map((t) => `  view: ${t}`).join("\n"));
  for (const text of NOTES) {
    check(texts.some((t) => t.startsWith(text + " note://")), `the view shows the note ${JSON.stringify(text)}`);
  }
  const bold = await items.locator("b").count().catch(() => -1);
  check(bold === 0, "a note's markup is shown as text");
  const inner = page.frames().find((f) => f.parentFrame() && f.parentFrame().parentFrame());
  const csp = inner ? await inner.evaluate(() =>
    document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? null) : null;
  check(csp !== null && csp.includes("connect-src 'none'"), `the view runs under the host's CSP (${csp})`);
  check(consoleErrors.length === 0, `no console error (${consoleErrors.join(" | ")})`);
  if (process.env.SCREENSHOT) {
    // The view is an out-of-process frame: let it paint before the shot.
    const painted = () => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
    if (inner) await inner.evaluate(painted);
    await page.evaluate(painted);
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
    console.log(`screenshot: ${process.env.SCREENSHOT}`);
  }
} catch (e) {
  check(false, `unexpected error: ${e?.stack ?? e}`);
} finally {
  await browser.close();
  server.close();
}
console.log(`apps-host: ${failed === 0 ? "all checks passed" : `${failed} check(s) failed`}`);
process.exit(failed === 0 ? 0 : 1);
