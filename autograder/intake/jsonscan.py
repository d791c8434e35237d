"""Counting what a JSON text would become before it is parsed.

`json.loads` of a text builds every container and value it holds: a line of empty lists nested
90 deep costs some 32 bytes of Python objects per byte of JSON, so a valid notebook under the
size cap, or one line on a sandbox's events pipe, could make the grader hold gigabytes.
`scan` reads the text's tokens in order (a regular expression finds strings, brackets,
separators and the other values; nothing is built), counts containers and values, follows
the nesting, and stops at the first cap it passes. Its memory is bounded whatever the text; its time is bounded by the
caps (it stops there) or by the text's length.

For a valid JSON text the tokens are exactly the parser's. For a broken one the count may
differ after the break, where `json.loads` stops too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Whitespace (skipped in one run), then a string (escapes included), an opening or closing
# bracket, a comma, a colon, or a run of anything else but whitespace (a number, a literal).
# A quote that opens no complete string matches alone (the last alternative): the scan stops
# there, so a text of many unclosed strings costs one pass, not one pass per quote. Whitespace
# that no token follows (at the end) matches on its own (group 1 empty), in one pass: without
# that, each of its bytes began a new try that ran to the end, and a notebook or a worker's
# reply ending in megabytes of spaces (valid JSON) took hours.
_TOKENS = re.compile(rb'\s*("[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]|[^\s"\[\]{},:]+|")|\s+',
                     re.S)
_QUOTE, _COMMA, _COLON = ord('"'), ord(","), ord(":")
_CLOSE = (ord("]"), ord("}"))
_OPEN_LIST, _OPEN_OBJECT = ord("["), ord("{")
_OPEN = {_OPEN_LIST: False, _OPEN_OBJECT: True}  # whether the container is an object
_KEY_CHARS = 64  # a key longer than this is never one the path rules name


@dataclass
class Scan:
    """What a JSON text holds: `items` (its containers and values, keys included: what
    parsing it builds), those outside cells' sources (`other_items`), its containers alone, the deepest nesting seen, the bytes of the strings of cells'
    sources and of all other strings, and the first cap it passed (`over`: "items",
    "containers", "other_items", "depth", "other_bytes"; "" when none)."""

    items: int = 0
    containers: int = 0
    other_items: int = 0
    depth: int = 0
    source_bytes: int = 0
    other_bytes: int = 0
    over: str = ""


def scan(data: bytes, max_items: int, max_depth: int, notebook: bool = False,
         max_other_items: int | None = None, max_other_bytes: int | None = None,
         max_containers: int | None = None) -> Scan:
    """Count `data`'s tokens up to the caps. With `notebook`, what makes up a cell's "source"
    (a string, or a list of strings, at cells[i].source) is told apart from the rest, whose
    items and string bytes may be capped by `max_other_items` and `max_other_bytes`."""
    found = Scan()
    # One entry per open container: [is an object, its current key, a key comes next].
    stack: list[list] = []
    items = others = depth = other = source = containers = 0
    for match in _TOKENS.finditer(data):
        start, end = match.span(1)
        if start < 0:  # whitespace at the end: nothing more to count
            break
        first = data[start]
        if first == _QUOTE and end - start == 1:  # a string never closed: not JSON from here
            break
        if first == _COLON:
            continue
        if first == _COMMA:
            if stack and stack[-1][0]:
                stack[-1][2] = True
            continue
        if first in _CLOSE:
            if stack:
                stack.pop()
            continue
        items += 1
        if items > max_items:
            found.over = "items"
            break
        is_key = first == _QUOTE and bool(stack) and stack[-1][2]
        in_source = notebook and not is_key and first != _OPEN_LIST \
            and first != _OPEN_OBJECT and _in_source(stack)
        if not in_source:
            others += 1
            if max_other_items is not None and others > max_other_items:
                found.over = "other_items"
                break
        if first == _QUOTE:
            if is_key:
                top = stack[-1]
                top[2] = False
                if notebook:
                    top[1] = data[start + 1:end - 1] if end - start <= _KEY_CHARS else None
                continue
            size = end - start - 2
            if in_source:
                source += size
            else:
                other += size
                if max_other_bytes is not None and other > max_other_bytes:
                    found.over = "other_bytes"
                    break
        elif first in _OPEN:
            containers += 1
            if max_containers is not None and containers > max_containers:
                found.over = "containers"
                break
            is_object = _OPEN[first]
            stack.append([is_object, None, is_object])
            depth = max(depth, len(stack))
            if len(stack) > max_depth:
                found.over = "depth"
                break
    found.items, found.other_items, found.depth = items, others, depth
    found.containers = containers
    found.source_bytes, found.other_bytes = source, other
    return found


def _in_source(stack: list[list]) -> bool:
    """Whether a string value at this point is (part of) a cell's source: the notebook, its
    "cells" list, a cell, its "source" (a string there, or a list of strings)."""
    if len(stack) == 3:
        cell = stack
    elif len(stack) == 4 and not stack[3][0]:
        cell = stack[:3]
    else:
        return False
    return (cell[0][0] and cell[0][1] == b"cells" and not cell[1][0]
            and cell[2][0] and cell[2][1] == b"source")
