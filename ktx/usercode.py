"""The user's code in a templated file: the knob header's markers, comments, and what is left.

Both the pass framework (:mod:`ktx.passbase`, which refuses a knob whose placeholder the user's
code already names) and the template writer (:mod:`ktx.template`, which writes the header and
lowers placeholders outside comments) read source text this way. It lives apart from both so
that neither imports the other for it: the template layer stands on the pass framework (knobs,
outcomes), never the reverse. Plain text and regular expressions, no tree: the header is text
ktx itself writes, and comments must be skipped before any tree exists (lowering a template).

>>> user_code("int a; // KTX_B")
'int a;         '
"""

from __future__ import annotations

import bisect
import re
import sys

HEADER_BEGIN = "// ktx:knobs begin"
HEADER_END = "// ktx:knobs end"
#: The header's markers as lines of their own (a comment that quotes them does not count).
HEADER_BEGIN_LINE = re.compile(r"(?m)^// ktx:knobs begin[ \t]*\r?$")
HEADER_END_LINE = re.compile(r"(?m)^// ktx:knobs end[ \t]*\r?$")


def user_code(source: str) -> str:
    """``source`` with the knob header and comments blanked (offsets and lines kept)."""
    begin = HEADER_BEGIN_LINE.search(source)
    stop = HEADER_END_LINE.search(source, begin.end()) if begin is not None else None
    blank = source
    if begin is not None and stop is not None:
        inside = re.sub(r"[^\n]", " ", source[begin.start() : stop.end()])
        blank = source[: begin.start()] + inside + source[stop.end() :]
    chars = list(blank)
    for a, b in comment_spans(blank):
        chars[a:b] = [c if c == "\n" else " " for c in blank[a:b]]
    return "".join(chars)


#: Where a comment or a literal can start; every other character :func:`comment_spans` passes over.
_COMMENT_SCAN_STOP = re.compile(r"[\"'/]")
#: A string or char literal's body after its opening quote: up to its closing quote or the line's
#: end (a backslash escapes the next character, a newline too).
_LITERAL_BODY = {q: re.compile(r"(?:\\[\s\S]|[^\\\n" + q + r"])*") for q in "\"'"}


def comment_spans(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each ``//`` and ``/* */`` comment (string and char literals skipped)."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        stop = _COMMENT_SCAN_STOP.search(text, i)  # jump over what cannot start either (most text)
        if stop is None:
            break
        i = stop.start()
        ch = text[i]
        if ch in "\"'":
            body = _LITERAL_BODY[ch].match(text, i + 1)  # always matches, maybe empty
            i = (i + 1 if body is None else body.end()) + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            spans.append((i, j))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


def inside(offset: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``offset`` lies in one of ``spans`` (:func:`comment_spans`: ascending, disjoint),
    by bisection: callers ask once per match over a whole template."""
    k = bisect.bisect_right(spans, (offset, sys.maxsize)) - 1
    return k >= 0 and spans[k][0] <= offset < spans[k][1]
