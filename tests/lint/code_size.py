#!/usr/bin/env python3
"""Classes and functions in the headers stay short enough to read.

  code_size.py [REPO] [--list] [--allowlist FILE]

Scans every *.hpp, *.ipp, *.cuh and *.h file under REPO/include/ (REPO defaults to the
repository this script lives in) and finds
  - each class, struct or union whose body is longer than 400 lines, counted from the line of
    its opening `{` to the line of its closing `};`, and
  - each named function (free or member, templates and constructors included) whose body is
    longer than 120 lines, counted from the line of its opening `{` to the matching `}`.
Lambdas, control-statement blocks, namespaces, `extern "C"` blocks and enums are not functions.

Each finding reads `path:line: class NAME is N lines (limit 400)` or
`path:line: function NAME is N lines (limit 120)`, where line is where NAME is written and NAME
carries the names of the classes around it (Outer::Inner, Class::method).

code_size_allowlist.txt beside this script lists known offenders as `path NAME` lines (`#`
starts a comment). A listed finding is not a failure; a listed entry that no longer names an
offender is one ("stale allowlist entry"), so the list only shrinks. Exits 0 when there is no
failure and 1 otherwise, printing each. --list prints every finding, allowed or not, and exits 0.

The scanner is tolerant rather than a parser: it blanks comments, string and character
literals (raw strings included) and preprocessor directives (keeping only the first branch of
each #if), then matches braces and classifies each `{` by the text before it, back to the
previous `;`, `{` or `}` outside parentheses.
"""
import argparse
import bisect
import os
import re
import sys

SUFFIXES = (".hpp", ".ipp", ".cuh", ".h")
CLASS_LIMIT = 400
FUNCTION_LIMIT = 120
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ALLOWLIST = os.path.join(HERE, "code_size_allowlist.txt")

CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try"}
# Words followed by a parenthesis that are not the name of the function being defined.
NOT_NAMES = {
    "decltype", "noexcept", "requires", "alignas", "alignof", "sizeof", "static_assert",
    "explicit", "throw", "__attribute__", "__declspec", "__launch_bounds__", "__align__",
    "void", "int", "char", "bool", "float", "double", "auto", "unsigned", "signed", "long",
    "short", "const", "volatile", "return", "new", "delete", "case", "co_return", "co_await",
    "co_yield", "if", "for", "while", "switch", "catch",
}
# What may follow the parameter list of a function definition.
TAIL = re.compile(r"(?:const|volatile|&|noexcept|override|final|mutable|->|requires|:(?!:)"
                  r"|\[\[|__attribute__|try)")
IDENT = re.compile(r"[A-Za-z_]\w*")
RAW_PREFIXES = ("R", "LR", "uR", "UR", "u8R")


# ---- blanking ----

def _blank(chars, start, end):
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = " "


def _word_before(text, i):
    """The identifier characters that end right before position i."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    return text[j:i]


def strip_literals(text):
    """text with comments, string and character literals replaced by spaces (newlines kept)."""
    chars = list(text)
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            _blank(chars, i, end)
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            _blank(chars, i, end)
            i = end
        elif c == '"':
            word = _word_before(text, i)
            m = re.match(r'"([^()\\\s]{0,16})\(', text[i:i + 20]) if word in RAW_PREFIXES else None
            if m:
                end = text.find(")" + m.group(1) + '"', i + len(m.group(0)))
                end = n if end < 0 else end + len(m.group(1)) + 2
            else:
                end = _quoted_end(text, i, '"')
            _blank(chars, i, end)
            i = end
        elif c == "'":
            word = _word_before(text, i)
            if word and word[0].isdigit():  # a digit separator: 1'000'000
                i += 1
                continue
            end = _quoted_end(text, i, "'")
            _blank(chars, i, end)
            i = end
        else:
            i += 1
    return "".join(chars)


def _quoted_end(text, i, quote):
    """The position after the literal that opens at i; a literal ends at its line's end at most."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            return j
        j += 1
    return n


def strip_preprocessor(text):
    """text with directive lines blanked, and every #elif/#else branch blanked as well."""
    lines = text.split("\n")
    out = []
    stack = []  # per open #if: whether this region is skipped
    skipping = False
    continued = False
    for line in lines:
        stripped = line.lstrip()
        if continued or stripped.startswith("#"):
            directive = "" if continued else stripped[1:].lstrip()
            continued = line.rstrip().endswith("\\")
            if re.match(r"if(n?def)?\b", directive):
                stack.append(skipping)
            elif re.match(r"(elif|else)\b", directive) and stack:
                skipping = True
            elif re.match(r"endif\b", directive) and stack:
                skipping = stack.pop()
            out.append(" " * len(line))
            continue
        out.append(" " * len(line) if skipping else line)
    return "\n".join(out)


def clean(text):
    return strip_preprocessor(strip_literals(text))


# ---- classification ----

def _skip_balanced(s, i, open_c, close_c):
    """The position after the bracket that closes the one opening at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == open_c:
            depth += 1
        elif s[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def _strip_prefix(s):
    """s without leading attributes, access labels and template<...> headers."""
    while True:
        s = s.lstrip()
        m = re.match(r"(?:public|private|protected)\s*:(?!:)", s)
        if m:
            s = s[m.end():]
            continue
        if s.startswith("[["):
            s = s[_skip_balanced(s, 0, "[", "]"):]
            continue
        m = re.match(r"template\s*<", s)
        if m:
            s = s[_skip_balanced(s, m.end() - 1, "<", ">"):]
            continue
        return s


def _has_assignment(s):
    """Whether s has an `=` outside brackets that is not part of a comparison."""
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "=" and depth == 0:
            before = s[i - 1] if i else ""
            after = s[i + 1] if i + 1 < len(s) else ""
            if before not in "=!<>" and after != "=":
                return True
    return False


def _operator_name(s, i):
    """(name, position of the parameter list's `(`) for an `operator` word ending at i."""
    j = i
    while j < len(s) and s[j].isspace():
        j += 1
    if s.startswith("()", j):
        k = s.find("(", j + 2)
        return "operator()", k
    k = s.find("(", j)
    if k < 0:
        return None, -1
    return "operator" + re.sub(r"\s+", "", s[j:k]), k


def _declarator(s):
    """(name, position of the name, position of `(`) of the function declared in s, or
    (None, -1, -1)."""
    paren = angle = 0
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif paren == 0 and c == "<":
            angle += 1
        elif paren == 0 and c == ">" and not (i and s[i - 1] == "-"):
            angle = max(0, angle - 1)
        elif paren == 0 and angle == 0 and (c.isalpha() or c in "_~"):
            m = re.compile(r"~?[A-Za-z_]\w*").match(s, i)
            word = m.group(0)
            i = m.end()
            if word == "operator":
                name, k = _operator_name(s, i)
                if name is None:
                    return None, -1, -1
                return _qualified(s, m.start(), name), m.start(), k
            j = i
            while j < n and s[j].isspace():
                j += 1
            if j < n and s[j] == "(":
                if word in NOT_NAMES:
                    i = _skip_balanced(s, j, "(", ")")
                    continue
                return _qualified(s, m.start(), word), m.start(), j
            continue
        i += 1
    return None, -1, -1


def _qualified(s, start, name):
    """name with the `A::B<T>::` qualification written before it (template arguments dropped)."""
    parts = [name]
    i = start
    while True:
        j = len(s[:i].rstrip())
        if not s[:j].endswith("::"):
            break
        j = len(s[:j - 2].rstrip())
        if j and s[j - 1] == ">":
            depth = 0
            while j > 0:
                j -= 1
                depth += {">": 1, "<": -1}.get(s[j], 0)
                if depth == 0:
                    break
            j = len(s[:j].rstrip())
        k = j
        while k > 0 and (s[k - 1].isalnum() or s[k - 1] == "_"):
            k -= 1
        if k == j:
            break
        parts.insert(0, s[k:j])
        i = k
    return "::".join(parts)


def classify(segment):
    """(kind, name) of the `{` that follows segment. kind is one of class, function, lambda,
    control, namespace, init (a brace initialiser after a name) and other."""
    s = _strip_prefix(segment)
    if not s:
        return "other", None
    if s.startswith("["):
        return "lambda", None
    first = IDENT.match(s)
    word = first.group(0) if first else ""
    if word in CONTROL:
        return "control", None
    if word in ("namespace", "extern", "enum"):
        return "namespace", None
    if word in ("typedef", "class", "struct", "union") and not _has_assignment(s):
        m = re.match(r"(?:typedef\s+)?(class|struct|union)\b", s)
        if m:
            head = re.split(r":(?!:)|<|\bfinal\b", s[m.end():], maxsplit=1)[0]
            head = re.sub(r"\[\[.*?\]\]|\b(?:alignas|__align__)\s*\([^)]*\)", " ", head)
            names = re.findall(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*", head)
            return "class", re.sub(r"\s+", "", names[-1]) if names else "(anonymous)"
    name, start, k = _declarator(s)
    if name is not None and not _has_assignment(s[:start]):
        close = _skip_balanced(s, k, "(", ")")
        tail = s[close:].strip()
        if not tail:
            return "function", name
        if TAIL.match(tail):
            if tail.startswith(":") and not tail.startswith("::"):
                # A constructor's member initialisers: the body follows a `)` or `}`, and a `{`
                # after a member's name is that member's initialiser.
                last = s.rstrip()[-1]
                return ("function", name) if last in ")}" else ("init", None)
            return "function", name
    last = s.rstrip()[-1]
    if last.isalnum() or last in "_>":
        return "init", None
    return "other", None


# ---- scanning ----

def _segment_start(code, i, kinds):
    """Where the text that introduces the `{` at i begins: after the previous `;`, `{` or `}`
    outside parentheses, or the `(` that encloses it. Brace initialisers are passed over."""
    depth = 0
    j = i - 1
    while j >= 0:
        c = code[j]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth < 0:
                return j + 1
        elif depth == 0 and c in ";{":
            return j + 1
        elif depth == 0 and c == "}":
            opened = kinds.get(j)
            if opened is None or opened[0] != "init":
                return j + 1
            j = opened[1]
        j -= 1
    return 0


def scan(text, path="<text>"):
    """Every finding in one file's text: (path, line, kind, name, lines, limit)."""
    code = clean(text)
    starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line_of(pos):
        return bisect.bisect_right(starts, pos)

    findings = []
    stack = []  # (position, kind, name, line the name is on)
    closed = {}  # position of a `}` -> (kind of its `{`, position of its `{`)
    for i, c in enumerate(code):
        if c == "{":
            begin = _segment_start(code, i, closed)
            segment = code[begin:i]
            kind, name = classify(segment)
            name_line = line_of(i)
            if name is not None:
                at = _name_position(segment, kind, name)
                name_line = line_of(begin + at) if at >= 0 else name_line
                outer = [e[2] for e in stack if e[1] == "class"]
                if outer and (kind == "class" or "::" not in name):
                    name = outer[-1] + "::" + name
            stack.append((i, kind, name, name_line))
        elif c == "}" and stack:
            pos, kind, name, name_line = stack.pop()
            closed[i] = (kind, pos)
            limit = {"class": CLASS_LIMIT, "function": FUNCTION_LIMIT}.get(kind)
            length = line_of(i) - line_of(pos) + 1
            if limit is not None and length > limit:
                findings.append((path, name_line, kind, name, length, limit))
    return findings


def _name_position(segment, kind, name):
    """Where name is written in the segment that introduces its `{`, or -1."""
    short = name.rsplit("::", 1)[-1]
    if kind == "class":
        m = re.search(r"\b(?:class|struct|union)\b", segment)
        m = m and re.compile(r"\b" + re.escape(short) + r"\b").search(segment, m.end())
    elif short.startswith("operator"):
        m = re.search(r"\boperator\b", segment)
    else:
        m = re.search(r"(?<![\w~])" + re.escape(short) + r"\s*\(", segment)
    return m.start() if m else -1


def format_finding(f):
    path, line, kind, name, length, limit = f
    return f"{path}:{line}: {kind} {name} is {length} lines (limit {limit})"


def sources(repo):
    root = os.path.join(repo, "include")
    found = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            if f.endswith(SUFFIXES):
                found.append(os.path.relpath(os.path.join(d, f), repo).replace(os.sep, "/"))
    return sorted(found)


def scan_repo(repo):
    findings = []
    for rel in sources(repo):
        with open(os.path.join(repo, rel), encoding="utf-8", errors="replace") as f:
            findings.extend(scan(f.read(), rel))
    return findings


def read_allowlist(path):
    """[(line number, path, name)] from an allowlist file."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 2:
                raise SystemExit(f"{path}:{n}: expected 'path NAME', got '{line.strip()}'")
            entries.append((n, fields[0], fields[1]))
    return entries


def check(findings, entries, allowlist_name="code_size_allowlist.txt"):
    """The failure lines: findings not allowed, then allowlist entries that match no finding."""
    allowed = {(p, name) for _, p, name in entries}
    offenders = {(f[0], f[3]) for f in findings}
    failures = [format_finding(f) for f in findings if (f[0], f[3]) not in allowed]
    for n, p, name in entries:
        if (p, name) not in offenders:
            failures.append(f"{allowlist_name}:{n}: stale allowlist entry '{p} {name}': it is "
                            f"within the limits now (or gone), so remove the line")
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--list", action="store_true", help="print every finding and exit 0")
    ap.add_argument("--allowlist", default=DEFAULT_ALLOWLIST)
    args = ap.parse_args(argv)
    findings = scan_repo(args.repo)
    entries = read_allowlist(args.allowlist)
    if args.list:
        allowed = {(p, name) for _, p, name in entries}
        for f in findings:
            print(format_finding(f) + (" [allowlisted]" if (f[0], f[3]) in allowed else ""))
        return 0
    failures = check(findings, entries, os.path.relpath(args.allowlist, args.repo))
    for line in failures:
        print(line)
    if failures:
        print(f"code_size: {len(failures)} failure(s); split long classes (> {CLASS_LIMIT} lines) "
              f"and functions (> {FUNCTION_LIMIT} lines), and drop stale allowlist entries")
        return 1
    print(f"code_size: {len(findings)} long class(es)/function(s) in include/, each on the "
          f"allowlist; no other class over {CLASS_LIMIT} or function over {FUNCTION_LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
