// The component's entry point: connects the tools in tools.js to corral.
// You should not need to change it. The `corral:plugin/...` modules are the
// host's imports, described in wit/ (`npm run build` writes their TypeScript types to types/).

import { log, config } from 'corral:plugin/host@0.1.0';
import { readFiles } from 'corral:plugin/files@0.1.0';
import { ToolError, bind, find } from './corral-tool.js';
import { TOOLS } from './tools.js';

bind({ log, config, readFiles });

// A WIT error is thrown as a plain `{ tag, val }` object; throwing an Error
// would abort the component.
function guard(f) {
  try {
    return f();
  } catch (e) {
    if (e instanceof ToolError) throw { tag: e.kind, val: e.message };
    throw { tag: 'failed', val: `internal error: ${e?.stack ?? e}` };
  }
}

export const tool = {
  describe: () => TOOLS.map((t) => t.spec()),
  invoke: (call) => guard(() => find(TOOLS, call.name).call(call.arguments)),
  preview: (call) => guard(() => find(TOOLS, call.name).previewCall(call.arguments)),
};
