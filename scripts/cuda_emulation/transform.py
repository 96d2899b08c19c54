#!/usr/bin/env python3
"""Rewrites a kernels/cuda/*.cu file into host C++ for the CPU emulation (scripts/cuda_emulation/run.sh).

Three textual changes, nothing else: a launch `kernel<<<grid, block, shared, stream>>>(args)` becomes
`::emu::launch(::emu::cfg(grid, block, shared, stream), kernel, args)`; `extern __shared__ T name[];`
becomes a pointer to the emulated dynamic shared memory; the cp.async inline PTX becomes a synchronous
copy with the same zero fill (so the emulation checks what lands where, not the pipeline's ordering).
Inline assembly the emulation does not know is refused. The kernels/cuda/*.cuh headers the file includes
are compiled untransformed, so their inline assembly must sit where BRIGADE_CUDA_EMULATION (defined by
run.sh) compiles it out, next to a plain-C++ path: asm outside such a branch is refused too.
Usage: transform.py IN.cu OUT.cpp
"""
import os
import re
import sys


def unguarded_asm(header):
    """Lines of `header` with inline asm that a BRIGADE_CUDA_EMULATION build would still compile."""
    stack = []  # per open #if: [kind, skipped by the emulation build]
    found = []
    for number, line in enumerate(open(header), 1):
        code = line.split('//')[0].strip()
        if re.match(r'#\s*(if|ifdef|ifndef)\b', code):
            if re.fullmatch(r'#\s*(if\s+!\s*defined\s*\(\s*BRIGADE_CUDA_EMULATION\s*\)'
                            r'|ifndef\s+BRIGADE_CUDA_EMULATION)', code):
                stack.append(['not_emulation', True])
            elif re.fullmatch(r'#\s*(if\s+defined\s*\(\s*BRIGADE_CUDA_EMULATION\s*\)'
                              r'|ifdef\s+BRIGADE_CUDA_EMULATION)', code):
                stack.append(['emulation', False])
            else:  # any other condition never counts as a guard
                stack.append(['other', False])
        elif re.match(r'#\s*elif\b', code) and stack:
            stack[-1] = ['other', False]
        elif re.match(r'#\s*else\b', code) and stack:
            kind = stack[-1][0]
            stack[-1][1] = kind == 'emulation'
        elif re.match(r'#\s*endif\b', code) and stack:
            stack.pop()
        elif re.search(r'\basm\b', code) and not any(skipped for _, skipped in stack):
            found.append(f'{header}:{number}: {code}')
    return found


def included_headers(path, repo, seen):
    """kernels/cuda/*.cuh headers that `path` includes, directly or through each other."""
    for name in re.findall(r'^#include "(kernels/cuda/\w+\.cuh)"', open(path).read(), flags=re.M):
        header = os.path.join(repo, name)
        if header not in seen and os.path.exists(header):
            seen.add(header)
            included_headers(header, repo, seen)
    return seen

source, target = sys.argv[1], sys.argv[2]
text = open(source).read()
text = re.sub(r'extern __shared__ ([\w ]+?) (\w+)\[\];',
              r'\1* \2 = reinterpret_cast<\1*>(::emu::dynamic_shared());', text)
text = re.sub(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\(',
              r'::emu::launch(::emu::cfg(\2), \1, ', text, flags=re.S)
text = re.sub(r'asm volatile\("cp\.async\.cg\.shared\.global.*?\);',
              'std::memcpy(dst, src, src_bytes); '
              'std::memset(static_cast<char*>(dst) + src_bytes, 0, 16 - src_bytes); (void)dst_shared;',
              text, flags=re.S)
text = re.sub(r'asm volatile\("cp\.async\.(commit_group|wait_group \d);\\n" ::: "memory"\);', ';', text)
leftover = [line for line in text.splitlines() if 'asm volatile' in line]
if leftover:
    sys.exit(f'{source}: inline assembly the emulation does not know: {leftover}')
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(source))))
unguarded = [hit for header in sorted(included_headers(source, repo, set())) for hit in unguarded_asm(header)]
if unguarded:
    sys.exit(f'{source}: inline assembly in an included header outside an `#if !defined('
             f'BRIGADE_CUDA_EMULATION)` branch (the emulation would compile it): {unguarded}')
open(target, 'w').write(text)
