// An MCP client for corral's tests, built on the official TypeScript SDK
// (`@modelcontextprotocol/sdk`), the second client beside client.py.
//
// Usage: node client.mjs SDK_DIR SCENARIO -- COMMAND [ARG...]
//
// SDK_DIR is the directory whose node_modules holds the SDK (.ci/run's
// cache, CORRAL_TEST_MCP_JS). Starts COMMAND (the `corral mcp serve` under
// test) as a stdio MCP server, runs the scenario against it and prints one
// JSON object with what the server answered. The scenario is JSON:
//
//   {"list": true, "calls": [{"name": "read_file", "arguments": {...}}, ...],
//    "roots": ["file:///dir", ...]}     // offer these roots (none: no roots capability)
//
// Output: {"tools": [{name, annotations}...], "calls": [{is_error, text,
// structured}...]}. The server's environment is this process's.

import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, scenarioText, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--") {
  throw new Error("usage: client.mjs SDK_DIR SCENARIO -- COMMAND [ARG...]");
}
const sdk = (p) =>
  import(pathToFileURL(path.join(sdkDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { ListRootsRequestSchema } = await sdk("types.js");

const scenario = JSON.parse(scenarioText);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const capabilities = scenario.roots ? { roots: { listChanged: true } } : {};
const client = new Client({ name: "corral-test-ts", version: "0" }, { capabilities });
if (scenario.roots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: scenario.roots.map((uri) => ({ uri })),
  }));
}
await client.connect(transport);
const out = { calls: [] };
if (scenario.list) {
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null }));
}
for (const c of scenario.calls ?? []) {
  const r = await client.callTool({ name: c.name, arguments: c.arguments ?? {} });
  out.calls.push({
    is_error: r.isError ?? false,
    text: (r.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join(""),
    structured: r.structuredContent ?? null,
  });
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
