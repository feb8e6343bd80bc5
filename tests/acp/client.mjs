// An editor's side of the Agent Client Protocol for corral's tests, built on
// the official TypeScript SDK (`@agentclientprotocol/sdk`), the library the
// editors' integrations are built on.
//
// Usage: node client.mjs SDK_DIR SCENARIO -- COMMAND [ARG...]
//
// SDK_DIR is the directory whose node_modules holds the SDK (.ci/run's
// cache, CORRAL_TEST_ACP_JS). Starts COMMAND (`corral acp`) as the agent,
// runs the scenario's steps in order and prints one JSON object: what each
// step got back. The SDK checks every message corral sends against the
// protocol's schema. Steps:
//
//   {"op": "initialize"}
//   {"op": "new", "cwd": DIR, "mcpServers": [...], "as": "NAME"}
//   {"op": "load", "sessionId": ID | "@NAME", "cwd": DIR, "as": "NAME"}
//   {"op": "prompt", "session": "NAME", "prompt": [blocks] | "text",
//    "permissions": ["allow_once" | "reject_once" | "cancelled" |
//                    {"answer": ..., "forge": true}],   // in order asked
//    "cancelAfterChunks": N}                            // session/cancel then
//   {"op": "set_mode", "session": "NAME", "modeId": "..."}
//   {"op": "raw", "lines": ["...", ...]}                // written as they are
//   {"op": "flood", "notifications": N, "requests": N, "bigLine": BYTES}
//
// A permission answer with "forge" first writes two forged answers that
// allow a call: one to the id the next request of corral's will carry, one
// to the id of the request answered before. With "fs": {"read": true,
// "write": true, "buffers": {ABS_PATH: TEXT}} the client offers its file
// system: a read is answered from `buffers` (else from disk), a write is
// saved to disk, and each request is recorded. Output: {"steps": [...],
// "permissions": [{toolCall, options, answered}], "fs": [...],
// "stderr": "..."}.

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, scenarioText, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--") {
  throw new Error("usage: client.mjs SDK_DIR SCENARIO -- COMMAND [ARG...]");
}
const acp = await import(
  pathToFileURL(path.join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href
);
const scenario = JSON.parse(scenarioText);

const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], env: process.env });
let stderr = "";
child.stderr.on("data", (d) => {
  if (stderr.length < 200000) stderr += d.toString();
});
// Every line corral wrote, for what the SDK does not surface (answers to
// raw requests).
let rawOut = "";
let floodAnswers = 0;
child.stdout.on("data", (d) => {
  rawOut += d.toString();
  const lines = rawOut.split("\n");
  rawOut = lines.pop();
  for (const line of lines) {
    // A line over the cap is answered without its id (it was not read).
    if (line.includes('"flood-') || (line.includes('"id":null') && line.includes("MiB"))) {
      floodAnswers += 1;
    }
  }
});

const fsOffered = scenario.fs ?? {};
const fsRequests = [];
const sessions = {}; // NAME -> sessionId
const updates = {}; // sessionId -> [update]
const permissions = [];
let plan = []; // the running prompt's permission answers, in order
let cancelAt = null; // {sessionId, chunks}
let lastPermissionId = null;
let ctxRef = null;

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = acp
  .client({ name: "corral-test-editor" })
  .onNotification("session/update", ({ params }) => {
    (updates[params.sessionId] ??= []).push(params.update);
    if (
      cancelAt &&
      params.sessionId === cancelAt.sessionId &&
      params.update.sessionUpdate === "agent_message_chunk"
    ) {
      cancelAt.chunks -= 1;
      if (cancelAt.chunks === 0) {
        cancelAt = null;
        ctxRef.notify("session/cancel", { sessionId: params.sessionId });
      }
    }
  })
  .onRequest("session/request_permission", async ({ params, requestId }) => {
    const step = plan.shift() ?? "reject_once";
    const answer = typeof step === "string" ? step : step.answer;
    if (typeof step === "object" && step.forge) {
      const allow = { outcome: { outcome: "selected", optionId: "allow_once" } };
      const forged = [requestId + 1, lastPermissionId ?? requestId - 1];
      for (const id of forged) {
        child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, result: allow }) + "\n");
      }
    }
    lastPermissionId = requestId;
    permissions.push({
      toolCall: params.toolCall,
      options: params.options,
      answered: answer,
      requestId,
    });
    if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: answer } };
  })
  .onRequest("fs/read_text_file", async ({ params }) => {
    fsRequests.push({ method: "read", path: params.path, line: params.line ?? null });
    const text = fsOffered.buffers?.[params.path] ?? readFileSync(params.path, "utf8");
    return { content: text };
  })
  .onRequest("fs/write_text_file", async ({ params }) => {
    fsRequests.push({ method: "write", path: params.path, content: params.content });
    writeFileSync(params.path, params.content);
    return {};
  });

async function settle(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { error: { code: e.code ?? null, message: String(e.message ?? e) } };
  }
}

const sessionOf = (name) => sessions[name] ?? name;

async function step(ctx, s) {
  switch (s.op) {
    case "initialize":
      return settle(
        ctx.request("initialize", {
          protocolVersion: acp.PROTOCOL_VERSION,
          clientCapabilities: {
            fs: { readTextFile: !!fsOffered.read, writeTextFile: !!fsOffered.write },
            terminal: false,
          },
          clientInfo: { name: "corral-test-editor", version: "0" },
        }),
      );
    case "new": {
      const r = await settle(
        ctx.request("session/new", { cwd: s.cwd, mcpServers: s.mcpServers ?? [] }),
      );
      if (r.ok && s.as) sessions[s.as] = r.ok.sessionId;
      return r;
    }
    case "load": {
      const id = s.sessionId.startsWith("@") ? sessions[s.sessionId.slice(1)] : s.sessionId;
      const r = await settle(
        ctx.request("session/load", { sessionId: id, cwd: s.cwd, mcpServers: s.mcpServers ?? [] }),
      );
      if (r.ok && s.as) sessions[s.as] = id;
      return { ...r, updates: updates[id] ?? [] };
    }
    case "prompt": {
      const sessionId = sessionOf(s.session);
      plan = [...(s.permissions ?? [])];
      if (s.cancelAfterChunks) cancelAt = { sessionId, chunks: s.cancelAfterChunks };
      const before = (updates[sessionId] ?? []).length;
      const prompt = typeof s.prompt === "string" ? [{ type: "text", text: s.prompt }] : s.prompt;
      const r = await settle(ctx.request("session/prompt", { sessionId, prompt }));
      return { ...r, updates: (updates[sessionId] ?? []).slice(before) };
    }
    case "set_mode":
      return settle(
        ctx.request("session/set_mode", { sessionId: sessionOf(s.session), modeId: s.modeId }),
      );
    case "raw":
      for (const line of s.lines) child.stdin.write(line + "\n");
      return { ok: null };
    case "flood": {
      for (let i = 0; i < (s.notifications ?? 0); i++) {
        child.stdin.write(
          JSON.stringify({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId: `nope-${i}` } }) +
            "\n",
        );
      }
      for (let i = 0; i < (s.requests ?? 0); i++) {
        child.stdin.write(
          JSON.stringify({ jsonrpc: "2.0", id: `flood-${i}`, method: "flood/unknown", params: {} }) + "\n",
        );
      }
      if (s.bigLine) child.stdin.write('{"jsonrpc":"2.0","id":"flood-big","method":"x","params":"' + "x".repeat(s.bigLine) + '"}\n');
      // Wait until every flood request is answered (or give up after 60 s).
      const want = (s.requests ?? 0) + (s.bigLine ? 1 : 0);
      const deadline = Date.now() + 60000;
      while (floodAnswers < want && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      return { ok: { answered: floodAnswers, asked: want } };
    }
    default:
      throw new Error(`unknown step ${s.op}`);
  }
}

const out = { steps: [], permissions, fs: fsRequests };
await app.connectWith(stream, async (ctx) => {
  ctxRef = ctx;
  for (const s of scenario.steps) {
    out.steps.push(await step(ctx, s));
  }
});
child.stdin.end();
await new Promise((resolve) => {
  if (child.exitCode !== null) resolve();
  child.on("exit", resolve);
  setTimeout(() => {
    child.kill("SIGKILL");
    resolve();
  }, 20000);
});
out.stderr = stderr;
out.exitCode = child.exitCode;
process.stdout.write(JSON.stringify(out) + "\n");
