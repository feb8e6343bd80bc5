// A small layer over corral's tool interface, so that a tool is a name, a
// description, a JSON Schema, its effects and a function.
//
// Nothing here imports the component bindings: src/app.js connects this
// module to the host with `bind(...)`, and the tests run it under Node with
// a host of their own.
//
//     export const shout = tool({
//       name: 'shout',
//       description: 'Returns the text in capitals.',
//       schema: { type: 'object', properties: { text: { type: 'string' } },
//                 required: ['text'], additionalProperties: false },
//       effects: [],
//       run: (args) => args.text.toUpperCase(),
//     });

export const EFFECTS = ['read', 'write', 'execute', 'network'];
export const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

/** Why a call produced no output. `kind` is the WIT `tool-error` case. */
export class ToolError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

/** The arguments do not fit the tool's schema or make no sense. */
export const invalidArguments = (message) => new ToolError('invalid-arguments', message);
/** The call failed; the model may try something else. */
export const failed = (message) => new ToolError('failed', message);
/** The call failed in a way that should stop the agent's run. */
export const fatal = (message) => new ToolError('fatal', message);

/**
 * Makes a tool. `run(args)` gets the arguments already checked against
 * `schema` and returns a string, `{ content, isError?, data? }` (`data`: any
 * JSON value, for UIs and scripts), or throws a
 * ToolError (`failed(...)`). `preview(args)`, for tools that write, returns
 * the unified diff the call would make.
 */
export function tool({ name, description, schema, effects = ['read'], run, preview }) {
  for (const e of effects) {
    if (!EFFECTS.includes(e)) throw new Error(`tool \`${name}\`: unknown effect \`${e}\`; use one of ${EFFECTS.join(', ')}`);
  }
  const parse = (argumentsJson) => {
    let args;
    try {
      args = JSON.parse(argumentsJson);
    } catch (e) {
      throw invalidArguments(`arguments for \`${name}\` are not JSON: ${e.message}`);
    }
    validate(schema, args, `arguments for \`${name}\``);
    return args;
  };
  return {
    name,
    description,
    schema,
    effects,
    spec: () => ({ name, description, inputSchema: JSON.stringify(schema), effects }),
    call(argumentsJson) {
      const out = run(parse(argumentsJson));
      if (typeof out === 'string') return { content: out, isError: false, data: undefined };
      // `data` travels as JSON text (WIT `option<string>`).
      const data = out.data === undefined ? undefined : JSON.stringify(out.data);
      return { content: out.content, isError: out.isError ?? false, data };
    },
    previewCall(argumentsJson) {
      const args = parse(argumentsJson);
      return preview ? preview(args) : undefined;
    },
  };
}

/** The tool named `name` in `tools`, or an `unknown-tool` error. */
export function find(tools, name) {
  const t = tools.find((t) => t.name === name);
  if (!t) throw new ToolError('unknown-tool', `this plugin has no tool named \`${name}\``);
  return t;
}

// JSON Schema, the subset tools use: type, properties, required,
// additionalProperties, items, enum, minimum, maximum, minLength.
const TYPES = {
  object: (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  array: (v) => Array.isArray(v),
  string: (v) => typeof v === 'string',
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === 'number',
  boolean: (v) => typeof v === 'boolean',
  null: (v) => v === null,
};

function jsonType(v) {
  return ['null', 'boolean', 'integer', 'number', 'string', 'array', 'object'].find((t) => TYPES[t](v)) ?? typeof v;
}

/** Throws `invalid-arguments` naming the first place `value` does not fit `schema`. */
export function validate(schema, value, where = 'value') {
  if (schema.type !== undefined) {
    const names = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!names.some((n) => (TYPES[n] ?? (() => true))(value))) {
      throw invalidArguments(`${where}: expected ${names.join(' or ')}, got ${jsonType(value)}`);
    }
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    throw invalidArguments(`${where}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) throw invalidArguments(`${where}: ${value} is below the minimum ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) throw invalidArguments(`${where}: ${value} is above the maximum ${schema.maximum}`);
  }
  if (typeof value === 'string' && value.length < (schema.minLength ?? 0)) {
    throw invalidArguments(`${where}: shorter than ${schema.minLength} characters`);
  }
  if (TYPES.object(value)) {
    const props = schema.properties ?? {};
    for (const key of schema.required ?? []) {
      if (!(key in value)) throw invalidArguments(`${where}: \`${key}\` is required`);
    }
    for (const [key, item] of Object.entries(value)) {
      if (key in props) validate(props[key], item, `${where}: \`${key}\``);
      else if (schema.additionalProperties === false) {
        const known = Object.keys(props).map((k) => `\`${k}\``).join(', ') || 'none';
        throw invalidArguments(`${where}: unknown field \`${key}\` (known: ${known})`);
      }
    }
  }
  if (Array.isArray(value) && schema.items && typeof schema.items === 'object') {
    value.forEach((item, i) => validate(schema.items, item, `${where}[${i}]`));
  }
}

/**
 * The normalised workspace-relative form of `path` (`.` for the root).
 * Refuses absolute paths and paths that climb out with `..`; the host
 * refuses them too (and symlinks leading out), this only explains it better.
 */
export function workspacePath(path) {
  if (/^[/\\]/.test(path) || /^[A-Za-z]:/.test(path)) {
    throw invalidArguments(`\`${path}\` is an absolute path; tool paths are relative to the workspace root (e.g. \`src/app.js\`)`);
  }
  const parts = [];
  for (const part of path.replaceAll('\\', '/').split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw invalidArguments(`\`${path}\` leads out of the workspace; tool paths stay inside the workspace root`);
      parts.pop();
    } else parts.push(part);
  }
  return parts.join('/') || '.';
}

// The host: set by `bind`. Files come through corral's `files` interface,
// which serves exactly the plugin's `grants.fs`.
let host = null;

/**
 * Connects this module to the host: `h` has `log(level, message)`,
 * `config(key)` and `readFiles(paths, maxBytes)` as in wit/files.wit. Without
 * it, `log` writes info and above to stderr, `config` returns undefined and
 * files cannot be read.
 */
export function bind(h) {
  host = h;
}

/** Writes a line to corral's log (`corral -v` shows it). */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new Error(`unknown log level \`${level}\`; use one of ${LEVELS.join(', ')}`);
  if (host) host.log(level, message);
  else if (LEVELS.indexOf(level) >= LEVELS.indexOf('info')) console.error(`[${level}] ${message}`);
}

/** One of this plugin's settings from `[plugins.NAME.config]` in corral.toml, or undefined. */
export function config(key) {
  return host ? host.config(key) : undefined;
}

/** Largest file `readBytes` reads (the host caps a batch at 32 MiB). */
export const MAX_FILE_BYTES = 16n << 20n;

/** A message for the model about a `file-error` on `path`. */
export function fileError(path, err) {
  switch (err.tag) {
    case 'not-found':
      return failed(`\`${path}\` does not exist`);
    case 'denied':
      return failed(`\`${path}\` is outside what this plugin may access (a path or symlink leading out of its grant); check grants.fs in corral.toml`);
    case 'wrong-kind':
      return failed(`\`${path}\` is not a regular file`);
    case 'over-budget':
      return failed(`\`${path}\` is larger than ${MAX_FILE_BYTES} bytes`);
    default:
      return failed(`\`${path}\`: ${err.val ?? err.tag}`);
  }
}

/** The content of the workspace file `path`, as a Uint8Array. */
export function readBytes(path) {
  const rel = workspacePath(path);
  if (!host) throw failed('no host is bound: call bind() first');
  const [result] = host.readFiles([rel], MAX_FILE_BYTES);
  if (result.tag === 'err') throw fileError(path, result.val);
  return result.val;
}

/** The content of the workspace file `path` as UTF-8 text. */
export function readText(path) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(readBytes(path));
  } catch (e) {
    if (e instanceof ToolError) throw e;
    throw failed(`\`${path}\` is not UTF-8 text`);
  }
}
