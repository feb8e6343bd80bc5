"""Tests of the tools' logic, run as plain Python: `python3 -m unittest`."""

import json
import os
import tempfile
import unittest

import corral_tool
from tools import TOOLS, file_stats, stats


class FileStatsTest(unittest.TestCase):
    def setUp(self):
        # The plugin's current directory is the workspace root; a temporary
        # directory plays that part here.
        self.cwd = os.getcwd()
        self.ws = tempfile.TemporaryDirectory()
        os.chdir(self.ws.name)
        with open("notes.txt", "w", encoding="utf-8") as f:
            f.write("one two\nthree\n")

    def tearDown(self):
        os.chdir(self.cwd)
        self.ws.cleanup()

    def test_counts_lines_words_and_characters(self):
        self.assertEqual(stats("one two\nthree\n"), {"lines": 2, "words": 3, "chars": 14})

    def test_reads_a_workspace_file(self):
        out = file_stats.call(json.dumps({"path": "notes.txt"}))
        self.assertEqual(out.content, "notes.txt: 2 lines, 3 words, 14 characters")
        self.assertEqual(out.data, {"lines": 2, "words": 3, "chars": 14})

    def test_refuses_paths_outside_the_workspace(self):
        for path in ["../secret.txt", "/etc/passwd", "a/../../b"]:
            with self.assertRaises(corral_tool.InvalidArguments) as e:
                file_stats.call(json.dumps({"path": path}))
            self.assertIn(path, e.exception.message)

    def test_a_missing_file_is_a_readable_failure(self):
        with self.assertRaises(corral_tool.Failed) as e:
            file_stats.call(json.dumps({"path": "nope.txt"}))
        self.assertEqual(e.exception.message, "`nope.txt` does not exist")

    def test_arguments_are_checked_against_the_schema(self):
        cases = {
            "{}": "`path` is required",
            '{"path": 3}': "expected string, got integer",
            '{"path": "a", "extra": 1}': "unknown field `extra`",
            "[1]": "expected object, got array",
            "not json": "are not JSON",
        }
        for arguments, message in cases.items():
            with self.assertRaises(corral_tool.InvalidArguments) as e:
                file_stats.call(arguments)
            self.assertIn(message, e.exception.message)

    def test_every_tool_has_a_unique_name_and_an_object_schema(self):
        names = [t.name for t in TOOLS]
        self.assertEqual(len(names), len(set(names)))
        for t in TOOLS:
            self.assertEqual(t.schema.get("type"), "object", t.name)


if __name__ == "__main__":
    unittest.main()
