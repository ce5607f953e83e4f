"""condor_submit's `queue` statement: how many jobs, and the items that vary between them.

Pure. The forms (HTCondor manual, condor_submit, "queue"):

    queue [<int expr>]
    queue [<int expr>] [<varname>] in [slice] <list of items>
    queue [<int expr>] [<varname>] matching [files | dirs | any] [slice] <globs>
    queue [<int expr>] [<list of varnames>] from [slice] <file name> | <list of items>

`<int expr>` jobs are queued for each item; the loop variable is ITEM unless named. An
item list on the statement's line is split on commas and spaces; an open parenthesis
at the end of the line starts a list that runs until a line beginning with `)`, one
item per line for `from` (lines starting with `#` are skipped). A `from` item is
split on commas and spaces until each variable has a value; the last takes the rest
of the line. A slice is Python's `[start:stop:step]` (no negative step).

The schedd cannot read the submitter's files or list their directories, so the items
of `from <file>` and `matching <globs>` are resolved by the submitting client
(`resolve_external_items`) and travel with the description; the schedd refuses such
a statement whose items did not come with it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_QUEUE_COUNT = 2 ** 31 - 2          # condor_submit: 0 <= N < INT_MAX
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_KEYWORD = re.compile(r"(?i)(?:^|(?<=\s))(in|from|matching)(?=\s|\(|\[|$)")
_SLICE = re.compile(r"^\[\s*(-?\d+)?\s*(?::\s*(-?\d+)?\s*)?(?::\s*(-?\d+)?\s*)?\]")


class QueueError(ValueError):
    """A queue statement that cannot be used; the message says why (without file and line)."""


@dataclass
class QueueStatement:
    line: int
    count: int = 1
    count_text: str = ""               # the <int expr> as written ("" for none)
    mode: str = ""                     # "" | "in" | "from" | "matching"
    match_kind: str = "any"            # matching: files | dirs | any
    variables: list[str] = field(default_factory=list)
    items: list[str] | None = None     # None: not an item form, or external and not yet resolved
    source: str = ""                   # from: a file name; matching: the glob patterns as written
    slice: tuple[int | None, int | None, int | None] | None = None
    open_list: bool = False            # the item list continues on the following lines

    @property
    def external(self) -> bool:
        """Items the client must supply (from a file, or from globbing)."""
        return self.mode == "matching" or (self.mode == "from" and self.items is None)

    def selected_items(self) -> list[str]:
        items = list(self.items or [])
        if self.slice is not None:
            start, stop, step = self.slice
            items = items[slice(start, stop, step)]
        return items

    def rows(self) -> list[list[str]]:
        """One value per variable for each selected item (an item form), or [[]] (plain queue)."""
        if not self.mode:
            return [[]]
        out = []
        for item in self.selected_items():
            out.append(split_item(item, len(self.variables)) if self.mode == "from" else [item])
        return out

    def job_count(self) -> int:
        return self.count * len(self.rows())


def split_item(item: str, n: int) -> list[str]:
    """A `from` item split on commas/spaces into n values; the last keeps the rest."""
    values: list[str] = []
    rest = item.strip()
    while len(values) < n - 1:
        m = re.search(r"[,\s]", rest)
        if m is None:
            break
        values.append(rest[:m.start()].strip())
        rest = rest[m.end():].lstrip(", \t")
    values.append(rest)
    while len(values) < n:
        values.append("")
    return values


def _split_list(text: str) -> list[str]:
    return [t for t in re.split(r"[,\s]+", text.strip()) if t]


def parse_queue(rest: str, line: int, evaluate_count) -> QueueStatement:
    """The statement after the word `queue`; `evaluate_count(text)` turns <int expr> into an int."""
    st = QueueStatement(line)
    text = rest.strip()
    if not text:
        return st
    m = _KEYWORD.search(text)
    head = text if m is None else text[:m.start()].rstrip()
    if m is not None:
        st.mode = m.group(1).lower()
        tail = text[m.end():].strip()
        tail = _qualifiers(st, tail)
        _item_list(st, tail)
        # Before the keyword: [<int expr>] [<varnames>]. Variable names are at the end.
        words = re.split(r"([,\s]+)", head)
        names: list[str] = []
        while words:
            w = words[-1].strip(", \t")
            if not w:
                words.pop()
                continue
            if _VAR.fullmatch(w) and not w[0].isdigit():
                names.insert(0, w)
                words.pop()
                continue
            break
        head = "".join(words).strip()
        st.variables = names or ["ITEM"]
        if st.mode != "from" and len(st.variables) > 1:
            raise QueueError(f"'queue ... {st.mode}' takes one variable, not {', '.join(st.variables)}")
    if head:
        st.count_text = head
        st.count = evaluate_count(head)
        if not 0 <= st.count <= MAX_QUEUE_COUNT:
            raise QueueError(f"queue count {head!r} is out of range (0 to {MAX_QUEUE_COUNT})")
    return st


def _qualifiers(st: QueueStatement, tail: str) -> str:
    """files | dirs | any (matching only) and a slice, before the item list."""
    while True:
        word = re.match(r"(?i)(files|dirs|any)\b", tail)
        if word:
            if st.mode != "matching":
                raise QueueError(f"'{word.group(1)}' only qualifies 'queue ... matching'")
            st.match_kind = word.group(1).lower()
            tail = tail[word.end():].lstrip()
            continue
        if tail.lower().startswith("table"):
            raise QueueError("'queue ... from table' is not supported; list the items one per line")
        s = _SLICE.match(tail)
        if s:
            st.slice = _parse_slice(s)
            tail = tail[s.end():].lstrip()
            continue
        if tail.startswith("["):
            # Where a slice may stand, '[' opens one (as condor_submit reads it): not an item.
            bad = tail.split("]", 1)[0] + ("]" if "]" in tail else "")
            raise QueueError(f"slice {bad!r}: expected [start:stop:step] with whole numbers")
        return tail


def _parse_slice(m: re.Match) -> tuple[int | None, int | None, int | None]:
    parts = [int(g) if g not in (None, "") else None for g in m.groups()]
    start, stop, step = parts
    if step is not None and step <= 0:
        raise QueueError(f"slice {m.group(0)!r}: the step must be positive")
    return start, stop, step


def _item_list(st: QueueStatement, tail: str) -> None:
    if tail.startswith("("):
        body = tail[1:].rstrip()
        one_line = body.endswith(")")
        body = body[:-1] if one_line else body
        st.open_list = not one_line
        if st.mode == "matching":
            st.source = body.strip()
        elif st.mode == "from":
            st.items = [body.strip()] if body.strip() else []
        else:
            st.items = _split_list(body)
        return
    if st.mode == "from":
        if not tail:
            raise QueueError("'queue ... from' needs a file name or a list of items in parentheses")
        if tail.endswith("|"):
            raise QueueError(f"'queue ... from {tail}' runs a command; htcpool does not run commands "
                             "from submit files (list the items, or put them in a file)")
        st.source = tail
        return
    if st.mode == "matching":
        if not tail:
            raise QueueError("'queue ... matching' needs at least one file name pattern")
        st.source = tail
        return
    st.items = _split_list(tail)


def add_list_line(st: QueueStatement, text: str) -> None:
    """One line of a multi-line item list (the caller stops at a line beginning with ')')."""
    t = text.strip()
    if not t or t.startswith("#"):
        return
    if st.mode == "matching":
        st.source = (st.source + " " + t).strip()
    elif st.mode == "from":
        assert st.items is not None
        st.items.append(t)
    else:
        assert st.items is not None
        st.items.extend(_split_list(t))


def glob_patterns(st: QueueStatement) -> list[str]:
    return _split_list(st.source)
