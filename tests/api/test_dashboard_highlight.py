"""The diff colouring as a function: lines keep every character, tokens get classes by each file's
language, unknown files and very large diffs stay uncoloured."""

from __future__ import annotations

from controller.api.dashboard.highlight import MAX_LINES, DiffLine, diff_html, diff_lines

DIFF = """\
diff --git a/src/a.py b/src/a.py
--- a/src/a.py
+++ b/src/a.py
@@ -1,2 +1,2 @@
-x = 1
+x = 2  # <script>alert(1)</script>
 def f(): return "s"
diff --git a/notes.weird b/notes.weird
--- a/notes.weird
+++ b/notes.weird
@@ -1 +1 @@
-def f(): return 1
+"><img src=x onerror=alert(3)>
"""


def _text(line: DiffLine) -> str:
    return line.prefix + "".join(text for _, text in line.pieces)


def test_every_line_keeps_every_character_and_its_diff_kind() -> None:
    lines = diff_lines(DIFF)
    assert [_text(line) for line in lines] == DIFF.splitlines()
    kinds = [line.kind for line in lines]
    assert kinds[:7] == ["meta", "meta", "meta", "hunk", "del", "add", "ctx"]


def test_tokens_get_classes_by_the_files_language_and_unknown_files_none() -> None:
    lines = diff_lines(DIFF)
    python = dict((text, css) for line in lines[4:7] for css, text in line.pieces if css)
    assert python == {
        "1": "tk-m",
        "2": "tk-m",
        "# <script>alert(1)</script>": "tk-c",
        "def": "tk-k",
        "f": "tk-f",
        "return": "tk-k",
        '"s"': "tk-s",
    }
    weird = [css for line in lines[11:] for css, _ in line.pieces]
    assert weird == ["", ""]  # the same code in a file no lexer knows: not coloured


def test_a_very_large_diff_is_shown_uncoloured() -> None:
    big = "+++ b/a.py\n" + "+x = 1\n" * MAX_LINES
    lines = diff_lines(big)
    assert len(lines) == MAX_LINES + 1 and all(line.pieces == (("", "x = 1"),) for line in lines[1:])


def test_the_html_escapes_every_text_and_keeps_the_lines() -> None:
    html = str(diff_html(DIFF))
    assert "<script>" not in html and "<img" not in html
    assert '<span class="tk-c"># &lt;script&gt;alert(1)&lt;/script&gt;</span>' in html
    assert '<span class="add">+&#34;&gt;&lt;img src=x onerror=alert(3)&gt;</span>' in html
    assert html.count("\n") == len(DIFF.splitlines())
