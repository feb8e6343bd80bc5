// Tests of the tools' logic under Node, without building: `npm test`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ToolError, bind } from '../src/corral-tool.js';
import { TOOLS, fileStats, stats } from '../src/tools.js';

// A host whose `readFiles` serves one directory the way corral's `files`
// interface serves the workspace.
const ws = mkdtempSync(join(tmpdir(), 'corral-tool-'));
writeFileSync(join(ws, 'notes.txt'), 'one two\nthree\n');
bind({
  log() {},
  config: () => undefined,
  readFiles: (paths) =>
    paths.map((p) => {
      try {
        if (!statSync(join(ws, p)).isFile()) return { tag: 'err', val: { tag: 'wrong-kind' } };
        return { tag: 'ok', val: new Uint8Array(readFileSync(join(ws, p))) };
      } catch {
        return { tag: 'err', val: { tag: 'not-found' } };
      }
    }),
});

function rejects(f, kind, message) {
  assert.throws(f, (e) => e instanceof ToolError && e.kind === kind && e.message.includes(message));
}

test('counts lines, words and characters', () => {
  assert.deepEqual(stats('one two\nthree\n'), { lines: 2, words: 3, chars: 14 });
});

test('reads a workspace file', () => {
  const out = fileStats.call(JSON.stringify({ path: 'notes.txt' }));
  assert.equal(out.content, 'notes.txt: 2 lines, 3 words, 14 characters');
  assert.deepEqual(JSON.parse(out.data), { lines: 2, words: 3, chars: 14 });
});

test('refuses paths outside the workspace', () => {
  for (const path of ['../secret.txt', '/etc/passwd', 'a/../../b']) {
    rejects(() => fileStats.call(JSON.stringify({ path })), 'invalid-arguments', path);
  }
});

test('a missing file is a readable failure', () => {
  rejects(() => fileStats.call('{"path":"nope.txt"}'), 'failed', '`nope.txt` does not exist');
});

test('arguments are checked against the schema', () => {
  const cases = {
    '{}': '`path` is required',
    '{"path": 3}': 'expected string, got integer',
    '{"path": "a", "extra": 1}': 'unknown field `extra`',
    '[1]': 'expected object, got array',
    'not json': 'are not JSON',
  };
  for (const [args, message] of Object.entries(cases)) {
    rejects(() => fileStats.call(args), 'invalid-arguments', message);
  }
});

test('every tool has a unique name and an object schema', () => {
  const names = TOOLS.map((t) => t.name);
  assert.equal(new Set(names).size, names.length);
  for (const t of TOOLS) assert.equal(t.schema.type, 'object', t.name);
});
