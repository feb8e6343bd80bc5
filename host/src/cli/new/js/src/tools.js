// The tools of plugin `{{name}}`. Add a tool: make it with `tool({...})` and
// list it in TOOLS.

import { log, readText, tool } from './corral-tool.js';

/** Lines, words and characters of `text`, as `wc` counts them. */
export function stats(text) {
  return {
    lines: (text.match(/\n/g) ?? []).length,
    words: text.split(/\s+/).filter((w) => w !== '').length,
    chars: [...text].length,
  };
}

export const fileStats = tool({
  name: 'file_stats',
  description: 'Counts the lines, words and characters of a text file in the workspace.',
  schema: {
    type: 'object',
    properties: {
      path: { type: 'string', description: 'The file, relative to the workspace root (e.g. `README.md`).' },
    },
    required: ['path'],
    additionalProperties: false,
  },
  effects: ['read'],
  run(args) {
    log('debug', `file_stats: counting ${args.path}`);
    const counts = stats(readText(args.path));
    return {
      content: `${args.path}: ${counts.lines} lines, ${counts.words} words, ${counts.chars} characters`,
      data: counts,
    };
  },
});

export const TOOLS = [fileStats];
