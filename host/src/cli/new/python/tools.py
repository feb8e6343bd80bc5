"""The tools of plugin `{{name}}`. Add a tool: write a function, decorate it
with `@tool(...)`, and list it in TOOLS."""

from corral_tool import Output, log, read_text, tool


def stats(text: str) -> dict:
    """Lines, words and characters of `text`, as `wc` counts them."""
    return {"lines": text.count("\n"), "words": len(text.split()), "chars": len(text)}


@tool(
    name="file_stats",
    description="Counts the lines, words and characters of a text file in the workspace.",
    schema={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file, relative to the workspace root (e.g. `README.md`).",
            }
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    effects=["read"],
)
def file_stats(args):
    log("debug", f"file_stats: counting {args['path']}")
    counts = stats(read_text(args["path"]))
    return Output(
        f"{args['path']}: {counts['lines']} lines, {counts['words']} words, {counts['chars']} characters",
        data=counts,
    )


TOOLS = [file_stats]
