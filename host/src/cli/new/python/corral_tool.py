"""A small layer over corral's tool interface, so that a tool is a name, a
description, a JSON Schema, its effects and a function.

Nothing here imports the component bindings: `app.py` connects this module
to the host with `bind(...)`, and the tests run it as plain Python, where
`log` writes to stderr and `config` returns nothing.

    @tool(
        name="shout",
        description="Returns the text in capitals.",
        schema={"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False},
        effects=[],
    )
    def shout(args):
        return args["text"].upper()
"""

import json
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

EFFECTS = ("read", "write", "execute", "network")
LEVELS = ("trace", "debug", "info", "warn", "error")


class ToolError(Exception):
    """Why a call produced no output. The model sees the message."""

    kind = "failed"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArguments(ToolError):
    """The arguments do not fit the tool's schema or make no sense."""

    kind = "invalid-arguments"


class Failed(ToolError):
    """The call failed; the model may try something else."""

    kind = "failed"


class Fatal(ToolError):
    """The call failed in a way that should stop the agent's run."""

    kind = "fatal"


class UnknownTool(ToolError):
    """This plugin has no tool of that name."""

    kind = "unknown-tool"


@dataclass
class Output:
    """What a tool returns: text for the model, optional JSON data for UIs."""

    content: str
    is_error: bool = False
    data: Any = None


@dataclass
class Tool:
    """One tool. Build it with the `tool` decorator."""

    name: str
    description: str
    schema: Dict[str, Any]
    effects: List[str]
    run: Callable[[Dict[str, Any]], Any]
    preview: Optional[Callable[[Dict[str, Any]], Optional[str]]] = None

    def __post_init__(self):
        for effect in self.effects:
            if effect not in EFFECTS:
                raise ValueError(f"tool `{self.name}`: unknown effect `{effect}`; use one of {EFFECTS}")

    def spec(self) -> Dict[str, Any]:
        """The tool as corral lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": json.dumps(self.schema),
            "effects": list(self.effects),
        }

    def call(self, arguments: str) -> Output:
        """Parses and checks `arguments` (JSON text), then runs the tool."""
        result = self.run(self.parse(arguments))
        if isinstance(result, Output):
            return result
        if isinstance(result, str):
            return Output(result)
        return Output(json.dumps(result), data=result)

    def preview_call(self, arguments: str) -> Optional[str]:
        """What the call would change in files (`None`: nothing)."""
        args = self.parse(arguments)
        return self.preview(args) if self.preview else None

    def parse(self, arguments: str) -> Dict[str, Any]:
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise InvalidArguments(f"arguments for `{self.name}` are not JSON: {e}") from None
        validate(self.schema, args, f"arguments for `{self.name}`")
        return args


def tool(name: str, description: str, schema: Dict[str, Any], effects=("read",), preview=None):
    """Makes a `Tool` of the decorated function, which takes the arguments
    (a dict already checked against `schema`) and returns a string, an
    `Output`, or any JSON value; it raises `Failed` (or another `ToolError`)
    to report a failure."""

    def wrap(run):
        return Tool(name, description, schema, list(effects), run, preview)

    return wrap


def find(tools: List[Tool], name: str) -> Tool:
    for t in tools:
        if t.name == name:
            return t
    raise UnknownTool(f"this plugin has no tool named `{name}`")


# --- JSON Schema (the subset tools use: type, properties, required,
# additionalProperties, items, enum, minimum, maximum, minLength) ---

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(schema: Dict[str, Any], value: Any, where: str = "value") -> None:
    """Raises `InvalidArguments` naming the first place where `value` does
    not fit `schema`."""
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_TYPES.get(n, lambda v: True)(value) for n in names):
            raise InvalidArguments(f"{where}: expected {' or '.join(names)}, got {_json_type(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArguments(f"{where}: {json.dumps(value)} is not one of {json.dumps(schema['enum'])}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidArguments(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidArguments(f"{where}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        raise InvalidArguments(f"{where}: shorter than {schema['minLength']} characters")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise InvalidArguments(f"{where}: `{key}` is required")
        for key, item in value.items():
            if key in props:
                validate(props[key], item, f"{where}: `{key}`")
            elif schema.get("additionalProperties") is False:
                known = ", ".join(f"`{k}`" for k in props) or "none"
                raise InvalidArguments(f"{where}: unknown field `{key}` (known: {known})")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            validate(schema["items"], item, f"{where}[{i}]")


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


# --- Files: paths are relative to the workspace root, which is the
# plugin's current directory when its manifest grants it. ---


def workspace_path(path: str) -> str:
    """The normalised workspace-relative form of `path` (`.` for the root).
    Refuses absolute paths and paths that climb out with `..`; the sandbox
    refuses them too (and symlinks leading out), this only explains it
    better."""
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise InvalidArguments(
            f"`{path}` is an absolute path; tool paths are relative to the workspace root (e.g. `src/main.py`)"
        )
    parts: List[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise InvalidArguments(
                    f"`{path}` leads out of the workspace; tool paths stay inside the workspace root"
                )
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or "."


def file_error(path: str, err: OSError) -> Failed:
    """A message for the model about an I/O error on `path`."""
    if isinstance(err, FileNotFoundError):
        return Failed(f"`{path}` does not exist")
    if isinstance(err, IsADirectoryError):
        return Failed(f"`{path}` is a directory, not a file")
    if isinstance(err, NotADirectoryError):
        return Failed(f"`{path}`: a part of the path is not a directory")
    if isinstance(err, PermissionError):
        return Failed(
            f"`{path}` is outside what this plugin may access (a path or symlink leading out of its grant, "
            "or a read-only grant); check grants.fs in corral.toml"
        )
    return Failed(f"`{path}`: {err.strerror or err}")


def read_text(path: str) -> str:
    """The content of the workspace file `path` as UTF-8 text."""
    rel = workspace_path(path)
    try:
        with open(rel, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise file_error(path, e) from None
    except UnicodeDecodeError:
        raise Failed(f"`{path}` is not UTF-8 text") from None


def read_bytes(path: str) -> bytes:
    """The content of the workspace file `path`."""
    rel = workspace_path(path)
    try:
        with open(rel, "rb") as f:
            return f.read()
    except OSError as e:
        raise file_error(path, e) from None


# --- The host: log lines and the plugin's settings ---

_host = None


def bind(host) -> None:
    """Connects this module to the host: `host` has `log(level, message)`
    (level one of LEVELS) and `config(key) -> Optional[str]`. `app.py` does
    this; without it `log` writes info and above to stderr and `config`
    returns None."""
    global _host
    _host = host


def log(level: str, message: str) -> None:
    """Writes a line to corral's log (`corral -v` shows it)."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level `{level}`; use one of {LEVELS}")
    if _host is None:
        if LEVELS.index(level) >= LEVELS.index("info"):
            print(f"[{level}] {message}", file=sys.stderr)
    else:
        _host.log(level, message)


def config(key: str) -> Optional[str]:
    """One of this plugin's settings from `[plugins.NAME.config]` in
    corral.toml (tables and arrays as JSON text), or None."""
    return None if _host is None else _host.config(key)
