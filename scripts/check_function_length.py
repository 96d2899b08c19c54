#!/usr/bin/env python3
"""Finds the functions longer than 80 lines in nn/, pipeline/ and apps/ and fails unless each says why.

The house rule: a function in the layers a learner reads most stays within about 80 lines; a longer one
carries, in the comment right above it, a sentence with the word "long" that says why (for example "Long
because it is one table: ..."). Run by ctest as style.function_length (tests/CMakeLists.txt).

How: a brace-matching scan, not a C++ parser. Comments, string and character literals (raw strings too) and
preprocessor lines are blanked first; then every `{` at namespace or class scope whose header has a
parameter list `( ... )` (and no top-level `=`, which would make it a variable's initializer) opens a
function, which ends at its matching `}`. A function's length counts from the first line of its header
(the template line, if any) to the closing brace. Lambdas and local classes count towards the function
they are in.

Usage: check_function_length.py [--max N] [ROOT]   (ROOT: the repository, default: this script's parent)
Exit status: 0 when every long function explains itself, 1 otherwise (each offender listed).
"""
import argparse
import os
import re
import sys

FOLDERS = ('nn', 'pipeline', 'apps')
EXTENSIONS = ('.cpp', '.h', '.cc', '.hpp')


def blank_code(text):
    """`text` with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in ' \t':
            out.append(c)
            i += 1
            continue
        if at_line_start and c == '#':  # a preprocessor line, with its continuations
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out.append(' \n')
                    i += 2
                    continue
                out.append(' ')
                i += 1
            continue
        at_line_start = False
        if c == '\n':
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith('//', i):
            while i < n and text[i] != '\n':
                out.append(' ')
                i += 1
        elif text.startswith('/*', i):
            end = text.find('*/', i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:end]))
            i = end
        elif c == 'R' and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or
                                                                          text[i - 1] == '_')):
            match = re.match(r'R"([^(\s]*)\(', text[i:])
            if match is None:
                out.append(c)
                i += 1
                continue
            close = ')' + match.group(1) + '"'
            end = text.find(close, i + match.end())
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r'[^\n]', ' ', text[i:end]))
            i = end
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(' ' * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def depth0_has(header, char):
    """Whether `char` occurs in `header` outside parentheses, brackets and angle brackets."""
    depth = 0
    for c in header:
        if c in '([':
            depth += 1
        elif c in ')]':
            depth -= 1
        elif c == char and depth == 0:
            return True
    return False


def is_function_header(header):
    header = header.strip()
    if ')' not in header:
        return False
    if re.match(r'(namespace|class|struct|union|enum)\b', header):
        return False
    if re.search(r'\boperator\b', header):
        return True
    return not depth0_has(header, '=')


def is_member_initializer(header):
    """Whether a `{` after `header` opens a member initializer of a constructor (`S(int x) : v_{x}`)."""
    return re.search(r'\)\s*(noexcept\s*)?:(?!:)', header) is not None and re.search(r'[\w>]\s*$', header) is not None


def functions(code):
    """(name, first line, last line) of every function defined at namespace or class scope in `code`."""
    found = []
    stack = []  # one entry per open brace: 'scope' (namespace, class, extern) or 'body' (inside a function)
    header_start = 0  # offset where the current declaration's header begins
    opened = []  # for 'function' braces: (name, first line)
    line_of = [0] * (len(code) + 1)
    line = 1
    for k, c in enumerate(code):
        line_of[k] = line
        if c == '\n':
            line += 1
    for k, c in enumerate(code):
        in_body = bool(stack) and stack[-1] not in ('scope', 'initializer')
        if c == '{':
            if in_body:
                stack.append('body')
                continue
            header = code[header_start:k]
            if is_member_initializer(header):  # `S(int x) : v_{x}`: the brace belongs to the header
                stack.append('initializer')
                continue
            if is_function_header(header):
                stripped = header.lstrip()
                first = line_of[header_start + (len(header) - len(stripped))]
                name = re.findall(r'(operator\s*[^\s(]+|[~\w:]+)\s*\(', header)
                opened.append((name[0] if name else '?', first))
                stack.append('function')
            else:
                stack.append('scope')
            header_start = k + 1
        elif c == '}':
            kind = stack.pop() if stack else 'scope'
            if kind == 'initializer':
                continue
            if kind == 'function':
                name, first = opened.pop()
                found.append((name, first, line_of[k]))
            if not stack or stack[-1] == 'scope':
                header_start = k + 1
        elif c == ';' and not in_body:
            header_start = k + 1
        elif c == ':' and not in_body and re.search(r'\b(public|private|protected)\s*$', code[header_start:k]):
            header_start = k + 1
    return found


def explains_length(lines, first):
    """Whether the comment block right above line `first` (1-based) has the word "long"."""
    comment = []
    i = first - 2
    while i >= 0 and lines[i].strip().startswith(('//', '/*', '*')):
        comment.append(lines[i])
        i -= 1
    return re.search(r'\blong\b', ' '.join(comment), re.IGNORECASE) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--max', type=int, default=80, help='longest function allowed without a reason')
    parser.add_argument('root', nargs='?', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    offenders, checked = [], 0
    for folder in FOLDERS:
        for directory, _, names in sorted(os.walk(os.path.join(args.root, folder))):
            for name in sorted(names):
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(directory, name)
                text = open(path, encoding='utf-8').read()
                lines = text.splitlines()
                for function, first, last in functions(blank_code(text)):
                    checked += 1
                    length = last - first + 1
                    if length > args.max and not explains_length(lines, first):
                        offenders.append(f'{os.path.relpath(path, args.root)}:{first}: {function} is {length} '
                                         f'lines (over {args.max}, and no comment above it says why it is long)')
    for offender in offenders:
        print(offender)
    print(f'check_function_length: {checked} functions in {", ".join(FOLDERS)}; {len(offenders)} over '
          f'{args.max} lines without a reason')
    return 1 if offenders else 0


if __name__ == '__main__':
    sys.exit(main())
